"""Persistent batched matmul: a fixed grid of NUM_SMS programs, each looping over the output tiles of every
product of the batch.

The B x tiles work items are numbered batch-major (all tiles of product 0, then product 1, ...), each product's
tiles in GROUP_M-grouped order; program p takes items p, p + NUM_SMS, ... so the programs resident at one
moment work on neighbouring tiles of the same product. One launch-sized wave instead of B x tiles programs:
it pays where the products are small (1024 heads of 512 x 512 with K = 64 is 16k tiles of a few microseconds
each). NUM_SMS is tunable (H100 SXM / H200 have 132 SMs; 264 keeps two programs per SM).
"""

import torch
import triton
import triton.language as tl

TASK = "bmm"

SPACE = {
    "BLOCK_M": [64, 128, 256],
    "BLOCK_N": [64, 128, 256],
    "BLOCK_K": [32, 64, 128],
    "GROUP_M": [8],
    "NUM_SMS": [132, 264],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4, 5],
}


def constraints(params, shape):
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    warps, stages = params["num_warps"], params["num_stages"]
    # 4-byte elements unless the shape says otherwise: the task runs fp32 too (a matched problem's shape carries
    # ELEM_BYTES)
    smem = stages * (bm * bk + bk * bn) * shape.get("ELEM_BYTES", 4)
    if smem > shape["SMEM_BYTES"]:
        return False
    if bm * bn > 4096 * warps:  # fp32 accumulator over 128 registers per thread spills
        return False
    # accumulator + half the operand tiles per thread; above ~240 registers the tile loop spills
    # (sm_90, the matmul task's persistent template: 128x128x128 with 4 warps spills, 128x128x64 does not)
    if (bm * bn + (bm * bk + bk * bn) // 2) > 240 * 32 * warps:
        return False
    # two programs per SM must both fit: shared memory, and 2 x 32*warps threads x ~230 registers <= 64K
    if params["NUM_SMS"] > 132 and (2 * smem > shape["SMEM_BYTES"] or warps > 4):
        return False
    return True


@triton.jit
def _bmm_persistent_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    BATCH,
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
    NUM_SMS: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    tiles_per_batch = num_pid_m * num_pid_n
    num_items = BATCH * tiles_per_batch
    num_pid_in_group = GROUP_M * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    offs_k = tl.arange(0, BLOCK_K)

    for item in range(start_pid, num_items, NUM_SMS):
        batch = (item // tiles_per_batch).to(tl.int64)
        tile_id = item % tiles_per_batch
        group_id = tile_id // num_pid_in_group
        first_pid_m = group_id * GROUP_M
        group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
        pid_m = first_pid_m + ((tile_id % num_pid_in_group) % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m

        a_base = a_ptr + batch * stride_ab
        b_base = b_ptr + batch * stride_bb
        offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(0, k_tiles):
            offs_kk = kt * BLOCK_K + offs_k
            a = tl.load(
                a_base + offs_am[:, None] * stride_am + offs_kk[None, :] * stride_ak,
                mask=offs_kk[None, :] < K,
                other=0.0,
            )
            b = tl.load(
                b_base + offs_kk[:, None] * stride_bk + offs_bn[None, :] * stride_bn,
                mask=offs_kk[:, None] < K,
                other=0.0,
            )
            acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)

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
    items = B * triton.cdiv(M, bm) * triton.cdiv(N, bn)
    grid = (min(params["NUM_SMS"], items),)
    _bmm_persistent_kernel[grid](
        a,
        b,
        c,
        B,
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
        NUM_SMS=params["NUM_SMS"],
        DOT_PRECISION=precision,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return c
