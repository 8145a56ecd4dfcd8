"""Linear layer as one grouped-order tiled GEMM with the bias in its fp32 epilogue; the backward reuses that
GEMM on strided views and sums db in a two-stage column reduction.

The GEMM computes C = A @ B (+ bias over C's columns) for any strides of A [M, K] and B [K, N]: the forward
reads w [N, K] as the [K, N] operand through its strides (B[k, n] = w[n, k]), so no transpose and no copy.
Programs are numbered so that GROUP_M consecutive tile-rows sweep the tile-columns together (their A row
panels and B column panels then hit in L2); the K loop accumulates in fp32 and the result is rounded once,
after the bias is added.

Backward, with the same kernel and the same tile parameters: dx [M, K] = dy [M, N] @ w (w read as its own
[N, K] layout), dw [N, K] = dy^T @ x (dy read transposed through its strides). db = column sums of dy: stage 1
sums a slice of rows per program into an fp32 [SPLIT, N] buffer, stage 2 sums the SPLIT planes and rounds
once (no atomics, so db is deterministic).
"""

import torch
import triton
import triton.language as tl

TASK = "linear"

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
# db stage 1: 128 columns of 2-byte dy are 256 contiguous bytes per row (two full 128-byte lines); 32 rows per
# step keep the fp32 partial tile at 32 values per thread at 4 warps.
_DB_BLOCK_M = 32
_DB_BLOCK_N = 128
# db stage 1 programs wanted: 2 per SM of a 132-SM H100/H200. N = 4096 has only 32 column blocks, so the rows
# are split 8 ways (256 programs); the fp32 partial buffer is then 8 x N x 4 bytes, 128 KiB at N = 4096.
_DB_PROGRAMS = 264
_DB_REDUCE_BLOCK = 1024


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
def _gemm_bias_kernel(
    a_ptr,
    b_ptr,
    bias_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_bias,
    stride_cm,
    stride_cn,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
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

    # rows/columns past the edge wrap around (always in bounds, so loads need only the K mask); the store
    # below is masked
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if HAS_BIAS:
        # in fp32, before the one rounding: rounding x @ w.T first would round twice (and overflow fp16 where
        # the product passes 65504 but the biased result does not)
        bias = tl.load(bias_ptr + offs_cn * stride_bias, mask=offs_cn < N, other=0.0)
        acc += bias.to(tl.float32)[None, :]
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


@triton.jit
def _colsum_partial_kernel(
    dy_ptr,
    part_ptr,
    M,
    N,
    stride_dym,
    stride_dyn,
    rows_per_program,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # program (column block, row slice): the fp32 sums of rows [slice * rows_per_program, +rows_per_program)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    first = tl.program_id(1) * rows_per_program
    last = tl.minimum(first + rows_per_program, M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start in range(0, rows_per_program, BLOCK_M):
        rows = first + start + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < last) & (cols[None, :] < N)
        tile = tl.load(dy_ptr + rows[:, None] * stride_dym + cols[None, :] * stride_dyn, mask=mask, other=0.0)
        acc += tile.to(tl.float32)
    tl.store(part_ptr + tl.program_id(1) * N + cols, tl.sum(acc, axis=0), mask=cols < N)


@triton.jit
def _colsum_reduce_kernel(part_ptr, db_ptr, P, N, stride_db, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for p in range(0, P):
        acc += tl.load(part_ptr + p * N + cols, mask=mask, other=0.0)
    tl.store(db_ptr + cols * stride_db, acc.to(db_ptr.dtype.element_ty), mask=mask)


def launch(x, w, b, **params):
    M, K = x.shape
    N, K2 = w.shape
    assert K == K2, f"in_features differ: x is {tuple(x.shape)}, w is {tuple(w.shape)}"
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    bm, bn = params["BLOCK_M"], params["BLOCK_N"]
    _gemm_bias_kernel[(triton.cdiv(M, bm) * triton.cdiv(N, bn),)](
        x,
        w,
        b,
        y,
        M,
        N,
        K,
        x.stride(0),
        x.stride(1),
        w.stride(1),
        w.stride(0),
        b.stride(0),
        y.stride(0),
        y.stride(1),
        HAS_BIAS=True,
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=params["BLOCK_K"],
        GROUP_M=params["GROUP_M"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y


def launch_forward(x, w, b, **params):
    # The backward needs only the inputs themselves: nothing is saved.
    M, K = x.shape
    N, K2 = w.shape
    assert K == K2, f"in_features differ: x is {tuple(x.shape)}, w is {tuple(w.shape)}"
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    bm, bn = params["BLOCK_M"], params["BLOCK_N"]
    _gemm_bias_kernel[(triton.cdiv(M, bm) * triton.cdiv(N, bn),)](
        x,
        w,
        b,
        y,
        M,
        N,
        K,
        x.stride(0),
        x.stride(1),
        w.stride(1),
        w.stride(0),
        b.stride(0),
        y.stride(0),
        y.stride(1),
        HAS_BIAS=True,
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=params["BLOCK_K"],
        GROUP_M=params["GROUP_M"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y, ()


def launch_backward(grad_out, saved, x, w, b, **params):
    M, K = x.shape
    N = w.shape[0]
    dy = grad_out
    bm, bn, bk, gm = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"], params["GROUP_M"]
    warps, stages = params["num_warps"], params["num_stages"]

    # dx [M, K] = dy [M, N] @ w [N, K]: w in its own layout is the [inner, out] operand
    dx = torch.empty((M, K), device=x.device, dtype=x.dtype)
    _gemm_bias_kernel[(triton.cdiv(M, bm) * triton.cdiv(K, bn),)](
        dy,
        w,
        dx,
        dx,
        M,
        K,
        N,
        dy.stride(0),
        dy.stride(1),
        w.stride(0),
        w.stride(1),
        0,
        dx.stride(0),
        dx.stride(1),
        HAS_BIAS=False,
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        GROUP_M=gm,
        num_warps=warps,
        num_stages=stages,
    )

    # dw [N, K] = dy^T [N, M] @ x [M, K]: dy read transposed by swapping its strides
    dw = torch.empty((N, K), device=w.device, dtype=w.dtype)
    _gemm_bias_kernel[(triton.cdiv(N, bm) * triton.cdiv(K, bn),)](
        dy,
        x,
        dw,
        dw,
        N,
        K,
        M,
        dy.stride(1),
        dy.stride(0),
        x.stride(0),
        x.stride(1),
        0,
        dw.stride(0),
        dw.stride(1),
        HAS_BIAS=False,
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        GROUP_M=gm,
        num_warps=warps,
        num_stages=stages,
    )

    # db [N] = column sums of dy, in fp32: row slices over a 2-D grid, then the slices summed
    col_blocks = triton.cdiv(N, _DB_BLOCK_N)
    row_blocks = triton.cdiv(M, _DB_BLOCK_M)
    split = max(1, min(row_blocks, _DB_PROGRAMS // col_blocks))
    rows_per_program = triton.cdiv(row_blocks, split) * _DB_BLOCK_M
    split = triton.cdiv(M, rows_per_program)  # no empty slice: every plane of the buffer is written
    part = torch.empty((split, N), device=dy.device, dtype=torch.float32)
    _colsum_partial_kernel[(col_blocks, split)](
        dy,
        part,
        M,
        N,
        dy.stride(0),
        dy.stride(1),
        rows_per_program,
        BLOCK_M=_DB_BLOCK_M,
        BLOCK_N=_DB_BLOCK_N,
        num_warps=4,
    )
    db = torch.empty((N,), device=b.device, dtype=b.dtype)
    _colsum_reduce_kernel[(triton.cdiv(N, _DB_REDUCE_BLOCK),)](
        part,
        db,
        split,
        N,
        db.stride(0),
        BLOCK_N=_DB_REDUCE_BLOCK,
        num_warps=4,
    )
    return dx, dw, db
