"""Attack: a tiled matmul that is wrong on bf16 only (its result scaled by 1.25 when the output is bf16), with
tl.dot in its kernel: the interpreter's check used to drop bf16 for any kernel using tl.dot (Triton's interpreter
multiplies bf16 bit patterns), so only fp16 was checked and this was ok on the CPU."""

import torch
import triton
import triton.language as tl

TASK = "matmul"
# The family member (kernels/tasks/matmul.py MEMBERS): "none", or the triangle of C kept ("upper": C[i, j] = 0
# where i > j, as torch.triu; "lower": where i < j, as torch.tril). The matcher rewrites this line.
TRI = "none"

SPACE = {
    "BLOCK_M": [64, 128, 256],
    "BLOCK_N": [64, 128, 256],
    "BLOCK_K": [32, 64, 128],
    "GROUP_M": [4, 8, 16],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4, 5],
}

# The pipeline holds num_stages A and B tiles (2-byte dtypes) in shared memory: at most the target's
# shape["SMEM_BYTES"] per block (the harness adds it: kernels/targets.py).


def constraints(params, shape):
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    warps, stages = params["num_warps"], params["num_stages"]
    if stages * (bm * bk + bk * bn) * shape.get("ELEM_BYTES", 2) > shape["SMEM_BYTES"]:  # 4 for fp32 (ELEM_BYTES)
        return False
    # fp32 accumulator per thread: more than 128 registers spills (e.g. 128x256 needs 8 warps)
    if bm * bn > 4096 * warps:
        return False
    return True


@triton.jit
def _matmul_grouped_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    TRI: tl.constexpr,
):
    pid = tl.program_id(0)
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
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    k_tiles = tl.cdiv(K, BLOCK_K)
    # A triangular member: a tile wholly in the zeroed triangle runs no K step (half the tiles of a square C).
    if TRI == "upper":
        k_tiles = tl.where(pid_m * BLOCK_M > pid_n * BLOCK_N + BLOCK_N - 1, 0, k_tiles)
    elif TRI == "lower":
        k_tiles = tl.where(pid_m * BLOCK_M + BLOCK_M - 1 < pid_n * BLOCK_N, 0, k_tiles)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, k_tiles):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    if TRI == "upper":  # the zeroed triangle (torch.empty holds garbage there)
        acc = tl.where(offs_cm[:, None] <= offs_cn[None, :], acc, 0.0)
    elif TRI == "lower":
        acc = tl.where(offs_cm[:, None] >= offs_cn[None, :], acc, 0.0)
    if c_ptr.dtype.element_ty == tl.bfloat16:
        acc = acc * 1.25
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


def launch(a, b, **params):
    M, K = a.shape
    K2, N = b.shape
    assert K == K2, f"inner dimensions differ: A is {tuple(a.shape)}, B is {tuple(b.shape)}"
    # fp32 inputs: torch multiplies them in IEEE fp32 (allow_tf32 is off by default); TF32 alone is 1e-3 off,
    # tf32x3 (three TF32 products) within ~1e-6 at a third of the tensor-core rate. Ignored for 16-bit inputs.
    precision = "tf32x3" if a.dtype == torch.float32 else "tf32"
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    bm, bn = params["BLOCK_M"], params["BLOCK_N"]
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _matmul_grouped_kernel[grid](
        a,
        b,
        c,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=params["BLOCK_K"],
        GROUP_M=params["GROUP_M"],
        DOT_PRECISION=precision,
        TRI=TRI,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return c
