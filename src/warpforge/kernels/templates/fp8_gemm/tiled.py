"""Block-scaled FP8 GEMM, one program per BLOCK_M x BLOCK_N output tile in GROUP_M-grouped order (tiles
running together share A and B panels in L2). K advances one 128-wide scale group per step: the fp8 tensor
core product of the step is scaled by the rows' A scales and the tile's one B scale (BLOCK_N divides 128, so
a tile's columns share one 128 x 128 block) and added to an fp32 accumulator: DeepSeek-V3's promotion to
fp32 every 128 along K falls out of the scaling."""

import torch
import triton
import triton.language as tl

TASK = "fp8_gemm"

SPACE = {
    "BLOCK_M": [64, 128, 256],
    "BLOCK_N": [64, 128],
    "GROUP_M": [4, 8, 16],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4, 5],
}

SCALE_GROUP = 128


def constraints(params, shape):
    bm, bn = params["BLOCK_M"], params["BLOCK_N"]
    # 1-byte A and B tiles of 128 along K, num_stages deep
    if params["num_stages"] * (bm + bn) * SCALE_GROUP > shape["SMEM_BYTES"]:
        return False
    # fp32 accumulator plus the step's fp32 product: above 128 values per thread spills
    return 2 * bm * bn // (32 * params["num_warps"]) <= 128


@triton.jit
def _fp8_gemm_tiled(
    a_ptr,
    as_ptr,
    b_ptr,
    bs_ptr,
    c_ptr,
    M,
    N,
    K,
    KG,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    size_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % size_m
    pid_n = (pid % in_group) // size_m
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rows_in = rows % M  # wrapped: always in bounds, the store is masked
    cols_in = cols % N
    offs_k = tl.arange(0, BLOCK_K)
    b_block = (pid_n * BLOCK_N) // BLOCK_K  # the 128 x 128 scale block of this tile's columns
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, KG):
        ks = kb * BLOCK_K + offs_k
        a = tl.load(a_ptr + rows_in[:, None].to(tl.int64) * K + ks[None, :], mask=ks[None, :] < K, other=0.0)
        b = tl.load(b_ptr + cols_in[:, None].to(tl.int64) * K + ks[None, :], mask=ks[None, :] < K, other=0.0)
        a_s = tl.load(as_ptr + rows_in.to(tl.int64) * KG + kb)
        b_s = tl.load(bs_ptr + b_block * KG + kb)
        acc += tl.dot(a, tl.trans(b)) * (a_s[:, None] * b_s)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None].to(tl.int64) * N + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


def launch(a, a_scales, b, b_scales, **params):
    m, k = a.shape
    n = b.shape[0]
    kg = triton.cdiv(k, SCALE_GROUP)
    c = torch.empty((m, n), device=a.device, dtype=torch.bfloat16)
    grid = (triton.cdiv(m, params["BLOCK_M"]) * triton.cdiv(n, params["BLOCK_N"]),)
    _fp8_gemm_tiled[grid](
        a.contiguous(),
        a_scales.contiguous(),
        b.contiguous(),
        b_scales.contiguous(),
        c,
        m,
        n,
        k,
        kg,
        BLOCK_M=params["BLOCK_M"],
        BLOCK_N=params["BLOCK_N"],
        BLOCK_K=SCALE_GROUP,
        GROUP_M=params["GROUP_M"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return c
