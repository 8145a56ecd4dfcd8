"""Split-K matmul: SPLIT_K programs per output tile each reduce one slice of K, then a second kernel sums.

Stage 1 writes each slice's fp32 partial tile into its own plane of a [SPLIT_K, M, N] fp32 buffer (no
atomics: every element of the buffer is written exactly once, so the result is deterministic and the
buffer needs no zero fill). Stage 2 sums the planes in fp32 and rounds once to the output dtype.
Multiplies the parallelism by SPLIT_K: worthwhile when M x N has few tiles and K is long.
"""

import torch
import triton
import triton.language as tl

TASK = "matmul"
# The family member (kernels/tasks/matmul.py MEMBERS): "none", or the triangle of C kept ("upper": C[i, j] = 0
# where i > j, as torch.triu; "lower": where i < j, as torch.tril). The matcher rewrites this line.
TRI = "none"

SPACE = {
    "BLOCK_M": [64, 128],
    "BLOCK_N": [64, 128, 256],
    "BLOCK_K": [32, 64, 128],
    "SPLIT_K": [2, 4, 8, 16],
    "GROUP_M": [8],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4, 5],
}

_REDUCE_BLOCK = 1024


def constraints(params, shape):
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    warps, stages = params["num_warps"], params["num_stages"]
    # pipelined A/B tiles (4-byte elements for fp32 inputs, see ELEM_BYTES), or the fp32 partial tile staged
    # through shared memory on store
    if max(stages * (bm * bk + bk * bn) * shape.get("ELEM_BYTES", 2), bm * bn * 4) > shape["SMEM_BYTES"]:
        return False
    if bm * bn > 4096 * warps:  # fp32 accumulator over 128 registers per thread spills
        return False
    return True


@triton.jit
def _matmul_split_k_kernel(
    a_ptr,
    b_ptr,
    part_ptr,
    M,
    N,
    K,
    k_tiles_per_split,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    TRI: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    kt_start = pid_k * k_tiles_per_split
    k_tiles = tl.cdiv(K, BLOCK_K)
    # A triangular member: a tile wholly in the zeroed triangle runs no K step (half the tiles of a square C).
    if TRI == "upper":
        k_tiles = tl.where(pid_m * BLOCK_M > pid_n * BLOCK_N + BLOCK_N - 1, 0, k_tiles)
    elif TRI == "lower":
        k_tiles = tl.where(pid_m * BLOCK_M + BLOCK_M - 1 < pid_n * BLOCK_N, 0, k_tiles)
    kt_end = tl.minimum(kt_start + k_tiles_per_split, k_tiles)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(kt_start, kt_end):
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
    plane = part_ptr + pid_k.to(tl.int64) * M * N
    p_ptrs = plane + offs_cm[:, None].to(tl.int64) * N + offs_cn[None, :]
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    if TRI == "upper":  # the zeroed triangle (torch.empty holds garbage there)
        acc = tl.where(offs_cm[:, None] <= offs_cn[None, :], acc, 0.0)
    elif TRI == "lower":
        acc = tl.where(offs_cm[:, None] >= offs_cn[None, :], acc, 0.0)
    tl.store(p_ptrs, acc, mask=mask)


@triton.jit
def _split_k_reduce_kernel(part_ptr, c_ptr, MN, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(SPLIT_K):
        acc += tl.load(part_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def launch(a, b, **params):
    M, K = a.shape
    K2, N = b.shape
    assert K == K2, f"inner dimensions differ: A is {tuple(a.shape)}, B is {tuple(b.shape)}"
    # fp32 inputs: torch multiplies them in IEEE fp32 (allow_tf32 is off by default); TF32 alone is 1e-3 off,
    # tf32x3 (three TF32 products) within ~1e-6 at a third of the tensor-core rate. Ignored for 16-bit inputs.
    precision = "tf32x3" if a.dtype == torch.float32 else "tf32"
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    # never more slices than K tiles, and no empty slice: each slice gets k_per K tiles
    k_tiles = triton.cdiv(K, bk)
    k_per = triton.cdiv(k_tiles, min(params["SPLIT_K"], k_tiles))
    split = triton.cdiv(k_tiles, k_per)
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    part = torch.empty((split, M, N), device=a.device, dtype=torch.float32)
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), split)
    _matmul_split_k_kernel[grid](
        a,
        b,
        part,
        M,
        N,
        K,
        k_per,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        GROUP_M=params["GROUP_M"],
        DOT_PRECISION=precision,
        TRI=TRI,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    _split_k_reduce_kernel[(triton.cdiv(M * N, _REDUCE_BLOCK),)](
        part,
        c,
        M * N,
        SPLIT_K=split,
        BLOCK=_REDUCE_BLOCK,
        num_warps=4,
        num_stages=1,
    )
    return c
