"""Block-scaled FP8 GEMM with split K: a grid of (output tiles x SPLIT_K) programs, split s taking the
128-wide K groups s, s + SPLIT_K, ...; each scales its fp8 products by the A and B scales of the group,
accumulates in fp32 and adds its partial tile into an fp32 buffer with atomics; a last kernel rounds the
buffer to bfloat16. For small M (decode, small micro-batches) the output has too few tiles to fill 132 SMs
and K is long (DeepSeek-V3: 7168-18432): SPLIT_K times more programs."""

import torch
import triton
import triton.language as tl

TASK = "fp8_gemm"

SPACE = {
    "BLOCK_M": [32, 64, 128],
    "BLOCK_N": [64, 128],
    "SPLIT_K": [2, 4, 8],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4],
}

SCALE_GROUP = 128


def constraints(params, shape):
    bm, bn = params["BLOCK_M"], params["BLOCK_N"]
    if params["num_stages"] * (bm + bn) * SCALE_GROUP > shape["SMEM_BYTES"]:
        return False
    return 2 * bm * bn // (32 * params["num_warps"]) <= 128


@triton.jit
def _fp8_gemm_split(
    a_ptr,
    as_ptr,
    b_ptr,
    bs_ptr,
    c32_ptr,
    M,
    N,
    K,
    KG,
    SPLIT_K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rows_in = rows % M
    cols_in = cols % N
    offs_k = tl.arange(0, BLOCK_K)
    b_block = (pid_n * BLOCK_N) // BLOCK_K
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(split, KG, SPLIT_K):
        ks = kb * BLOCK_K + offs_k
        a = tl.load(a_ptr + rows_in[:, None].to(tl.int64) * K + ks[None, :], mask=ks[None, :] < K, other=0.0)
        b = tl.load(b_ptr + cols_in[:, None].to(tl.int64) * K + ks[None, :], mask=ks[None, :] < K, other=0.0)
        a_s = tl.load(as_ptr + rows_in.to(tl.int64) * KG + kb)
        b_s = tl.load(bs_ptr + b_block * KG + kb)
        acc += tl.dot(a, tl.trans(b)) * (a_s[:, None] * b_s)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.atomic_add(c32_ptr + rows[:, None].to(tl.int64) * N + cols[None, :], acc, mask=mask)


@triton.jit
def _fp8_gemm_cast(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src_ptr + offs, mask=offs < n, other=0.0)
    tl.store(dst_ptr + offs, x.to(dst_ptr.dtype.element_ty), mask=offs < n)


def launch(a, a_scales, b, b_scales, **params):
    m, k = a.shape
    n = b.shape[0]
    kg = triton.cdiv(k, SCALE_GROUP)
    c32 = torch.zeros((m, n), device=a.device, dtype=torch.float32)
    grid = (triton.cdiv(m, params["BLOCK_M"]) * triton.cdiv(n, params["BLOCK_N"]), params["SPLIT_K"])
    _fp8_gemm_split[grid](
        a.contiguous(),
        a_scales.contiguous(),
        b.contiguous(),
        b_scales.contiguous(),
        c32,
        m,
        n,
        k,
        kg,
        params["SPLIT_K"],
        BLOCK_M=params["BLOCK_M"],
        BLOCK_N=params["BLOCK_N"],
        BLOCK_K=SCALE_GROUP,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    c = torch.empty((m, n), device=a.device, dtype=torch.bfloat16)
    _fp8_gemm_cast[(triton.cdiv(m * n, 1024),)](c32, c, m * n, BLOCK=1024, num_warps=4)
    return c
