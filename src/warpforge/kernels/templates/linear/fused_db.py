"""Linear layer as one grouped-order tiled GEMM with the bias in its fp32 epilogue; the backward's dw GEMM also
yields db, the row sums of the dy^T tiles it already loads, so dy is read twice (dx, dw) instead of three times.

The GEMM computes C = A @ B (+ bias over C's columns) for any strides of A [M, K] and B [K, N]: the forward
reads w [N, K] as the [K, N] operand through its strides (B[k, n] = w[n, k]), so no transpose and no copy.
Programs are numbered so that GROUP_M consecutive tile-rows sweep the tile-columns together; the K loop
accumulates in fp32 and the result is rounded once, after the bias is added.

Backward, with the same kernel and the same tile parameters: dx [M, K] = dy [M, N] @ w (w read as its own
[N, K] layout), dw [N, K] = dy^T @ x (dy read transposed through its strides). In the dw GEMM every program
of a tile-row loads the same dy^T panel [BLOCK_M of N, all of M]; each sums it along M in fp32 (one more
reduction per K step) and the programs of the first tile-column store it as db. Against the tiled template's
separate column-sum pass this saves one read of dy (M x N x 2 bytes: 32 MiB at 4096 x 4096) and two launches,
and costs that reduction in every dw program: which wins depends on the shape and the tiles.
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


def constraints(params, shape):
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    warps, stages = params["num_warps"], params["num_stages"]
    if stages * (bm * bk + bk * bn) * shape.get("ELEM_BYTES", 2) > shape["SMEM_BYTES"]:  # 4 for fp32 (ELEM_BYTES)
        return False
    # fp32 accumulator per thread: more than 128 registers spills (e.g. 128x256 needs 8 warps)
    if bm * bn > 4096 * warps:
        return False
    # the dw GEMM also sums its A tile in registers, as fp32: accumulator and A tile together past 160 values
    # per thread spill (64x256 with BLOCK_K 128 at 4 warps, 128 + 64 values, compiled to 255 registers and 80
    # bytes of spill for sm_90; 128x128 with BLOCK_K 32 at 4 warps is 128 + 32)
    if bm * (bn + bk) > 160 * 32 * warps:
        return False
    return True


@triton.jit
def _gemm_bias_kernel(
    a_ptr,
    b_ptr,
    bias_ptr,
    c_ptr,
    rowsum_ptr,
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
    stride_rowsum,
    HAS_BIAS: tl.constexpr,
    ROWSUM: tl.constexpr,
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
    rowsum = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        if ROWSUM:
            rowsum += tl.sum(a.to(tl.float32), axis=1)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if HAS_BIAS:
        # in fp32, before the one rounding: rounding x @ w.T first would round twice (and overflow fp16 where
        # the product passes 65504 but the biased result does not)
        bias = tl.load(bias_ptr + offs_cn * stride_bias, mask=offs_cn < N, other=0.0)
        acc += bias.to(tl.float32)[None, :]
    if ROWSUM:
        # every tile-column computed the same sums: the first one stores them (a column limit, not
        # `vector_mask & scalar_bool`, which the interpreter refuses)
        rows_limit = tl.where(pid_n == 0, M, 0)
        tl.store(
            rowsum_ptr + offs_cm * stride_rowsum, rowsum.to(rowsum_ptr.dtype.element_ty), mask=offs_cm < rows_limit
        )
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


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
        0,
        HAS_BIAS=True,
        ROWSUM=False,
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
        0,
        HAS_BIAS=True,
        ROWSUM=False,
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
        0,
        HAS_BIAS=False,
        ROWSUM=False,
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        GROUP_M=gm,
        num_warps=warps,
        num_stages=stages,
    )

    # dw [N, K] = dy^T [N, M] @ x [M, K]: dy read transposed by swapping its strides; db [N] = the row sums
    # of those dy^T tiles, in fp32
    dw = torch.empty((N, K), device=w.device, dtype=w.dtype)
    db = torch.empty((N,), device=b.device, dtype=b.dtype)
    _gemm_bias_kernel[(triton.cdiv(N, bm) * triton.cdiv(K, bn),)](
        dy,
        x,
        dw,
        dw,
        db,
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
        db.stride(0),
        HAS_BIAS=False,
        ROWSUM=True,
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        GROUP_M=gm,
        num_warps=warps,
        num_stages=stages,
    )
    return dx, dw, db
