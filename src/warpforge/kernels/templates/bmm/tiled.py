"""Batched tiled matmul: a 2-D grid, axis 0 the output tiles of one product in GROUP_M-grouped order, axis 1 the
batch.

Programs of one batch run together (axis 0 varies fastest), so GROUP_M consecutive tile-rows sweep the
tile-columns of the same A[b] and B[b] panels and hit in L2, as in the matmul task's tiled_grouped; the batch
index only offsets the three base pointers (64-bit: 128 x 512 x 2048 fp32 outputs are 512 MiB). The K loop
accumulates in fp32 (tensor cores via tl.dot) and rounds once on store.
"""

import torch
import triton
import triton.language as tl

TASK = "bmm"

SPACE = {
    "BLOCK_M": [64, 128, 256],
    "BLOCK_N": [64, 128, 256],
    "BLOCK_K": [32, 64, 128],
    "GROUP_M": [4, 8, 16],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4, 5],
}

# The pipeline holds num_stages A and B tiles in shared memory: at most the target's
# shape["SMEM_BYTES"] per block (the harness adds it: kernels/targets.py).


def constraints(params, shape):
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    warps, stages = params["num_warps"], params["num_stages"]
    # 4-byte elements unless the shape says otherwise: the task runs fp32 too (a matched problem's shape carries
    # ELEM_BYTES); 128x256x64 in 3 stages is 144 KiB in fp16, 288 KiB in fp32
    if stages * (bm * bk + bk * bn) * shape.get("ELEM_BYTES", 4) > shape["SMEM_BYTES"]:
        return False
    # fp32 accumulator per thread: more than 128 registers spills (e.g. 128x256 needs 8 warps)
    if bm * bn > 4096 * warps:
        return False
    return True


@triton.jit
def _bmm_tiled_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_ab,
    stride_am,
    stride_ak,
    stride_bb,
    stride_bk,
    stride_bn,
    stride_cb,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    pid = tl.program_id(0)
    batch = tl.program_id(1).to(tl.int64)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # rows/columns past the edge wrap around (always in bounds, so loads need only the K mask);
    # the store below is masked
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + batch * stride_ab + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + batch * stride_bb + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + batch * stride_cb + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


def launch(a, b, **params):
    B, M, K = a.shape
    B2, K2, N = b.shape
    assert B == B2 and K == K2, f"A is {tuple(a.shape)}, B is {tuple(b.shape)}: batch or inner dimensions differ"
    # fp32 inputs: torch multiplies them in IEEE fp32 (allow_tf32 is off by default); TF32 alone is 1e-3 off,
    # tf32x3 (three TF32 products) within ~1e-6 at a third of the tensor-core rate. Ignored for 16-bit inputs.
    precision = "tf32x3" if a.dtype == torch.float32 else "tf32"
    c = torch.empty((B, M, N), device=a.device, dtype=a.dtype)
    bm, bn = params["BLOCK_M"], params["BLOCK_N"]
    # the batch on axis 1 (at most 65535 programs there; KernelBench's is 128)
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), B)
    _bmm_tiled_kernel[grid](
        a,
        b,
        c,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        a.stride(2),
        b.stride(0),
        b.stride(1),
        b.stride(2),
        c.stride(0),
        c.stride(1),
        c.stride(2),
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=params["BLOCK_K"],
        GROUP_M=params["GROUP_M"],
        DOT_PRECISION=precision,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return c
