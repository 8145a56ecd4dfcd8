"""Persistent matmul: a fixed grid of NUM_SMS programs, each looping over output tiles.

Program p computes tiles p, p + NUM_SMS, p + 2*NUM_SMS, ... (in GROUP_M-grouped order), so the
launch cost and the tail of a one-program-per-tile grid are paid once per SM instead of once per
tile, and the programs resident at any moment work on neighbouring tiles. NUM_SMS is a tunable
(H100 SXM / H200 have 132 SMs; 264 keeps two programs per SM when tiles are small enough).
"""

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
    "GROUP_M": [8],
    "NUM_SMS": [132, 264],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4, 5],
}


def constraints(params, shape):
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    warps, stages = params["num_warps"], params["num_stages"]
    smem = stages * (bm * bk + bk * bn) * shape.get("ELEM_BYTES", 2)  # 4 for fp32 inputs (ELEM_BYTES)
    if smem > shape["SMEM_BYTES"]:
        return False
    if bm * bn > 4096 * warps:  # fp32 accumulator over 128 registers per thread spills
        return False
    # accumulator + half the operand tiles per thread; above ~240 registers the tile loop spills
    # (sm_90 AOT: 128x128x128 and 64x256x128 with 4 warps spill, 128x128x64 with 4 warps does not)
    if (bm * bn + (bm * bk + bk * bn) // 2) > 240 * 32 * warps:
        return False
    # two programs per SM must both fit: shared memory, and 2 x 32*warps threads x ~230 registers <= 64K
    if params["NUM_SMS"] > 132 and (2 * smem > shape["SMEM_BYTES"] or warps > 4):
        return False
    return True


@triton.jit
def _matmul_persistent_kernel(
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
    NUM_SMS: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    TRI: tl.constexpr,
):
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
    offs_k = tl.arange(0, BLOCK_K)

    for tile_id in range(start_pid, num_tiles, NUM_SMS):
        group_id = tile_id // num_pid_in_group
        first_pid_m = group_id * GROUP_M
        group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
        pid_m = first_pid_m + ((tile_id % num_pid_in_group) % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m

        offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        k_tiles = tl.cdiv(K, BLOCK_K)
        # A triangular member: a tile wholly in the zeroed triangle runs no K step (half the tiles of a square C).
        if TRI == "upper":
            k_tiles = tl.where(pid_m * BLOCK_M > pid_n * BLOCK_N + BLOCK_N - 1, 0, k_tiles)
        elif TRI == "lower":
            k_tiles = tl.where(pid_m * BLOCK_M + BLOCK_M - 1 < pid_n * BLOCK_N, 0, k_tiles)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(0, k_tiles):
            offs_kk = kt * BLOCK_K + offs_k
            a = tl.load(
                a_ptr + offs_am[:, None] * stride_am + offs_kk[None, :] * stride_ak,
                mask=offs_kk[None, :] < K,
                other=0.0,
            )
            b = tl.load(
                b_ptr + offs_kk[:, None] * stride_bk + offs_bn[None, :] * stride_bn,
                mask=offs_kk[:, None] < K,
                other=0.0,
            )
            acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)

        offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
        c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
        if TRI == "upper":  # the zeroed triangle (torch.empty holds garbage there)
            acc = tl.where(offs_cm[:, None] <= offs_cn[None, :], acc, 0.0)
        elif TRI == "lower":
            acc = tl.where(offs_cm[:, None] >= offs_cn[None, :], acc, 0.0)
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
    num_tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    grid = (min(params["NUM_SMS"], num_tiles),)
    _matmul_persistent_kernel[grid](
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
        NUM_SMS=params["NUM_SMS"],
        DOT_PRECISION=precision,
        TRI=TRI,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return c
