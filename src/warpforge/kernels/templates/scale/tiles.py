"""Scaling by a runtime float over a 2-D grid of BLOCK_M x BLOCK_N tiles read through x's strides (a transposed
or sliced x is scaled where it lies, without the copy a flat kernel needs), each program walking TILES_N tiles
along its rows so a program moves enough bytes to hide its launch. Computes in fp32 and rounds once."""

import triton
import triton.language as tl

TASK = "scale"

SPACE = {
    "BLOCK_M": [1, 4, 16],
    "BLOCK_N": [256, 512, 1024, 2048],
    "TILES_N": [1, 4],
    "num_warps": [4, 8],
    "num_stages": [1, 2],
}

MAX_ELEMS_PER_THREAD = 32


def constraints(params, shape):
    per_thread = params["BLOCK_M"] * params["BLOCK_N"] // (32 * params["num_warps"])
    return 4 <= per_thread <= MAX_ELEMS_PER_THREAD


@triton.jit
def _scale_tiles_kernel(
    x_ptr,
    y_ptr,
    s,
    M,
    N,
    stride_xm,
    stride_xn,
    stride_ym,
    stride_yn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    TILES_N: tl.constexpr,
):
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    row_ok = rows < M
    col0 = tl.program_id(1).to(tl.int64) * (BLOCK_N * TILES_N)
    for t in range(TILES_N):
        cols = col0 + t * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = row_ok[:, None] & (cols[None, :] < N)
        x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0)
        y = x.to(tl.float32) * s
        tl.store(y_ptr + rows[:, None] * stride_ym + cols[None, :] * stride_yn, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, s, **params):
    M, N = x.shape
    y = x.new_empty((M, N))
    bm, bn, tiles = params["BLOCK_M"], params["BLOCK_N"], params["TILES_N"]
    # rows on axis 0 (up to 2^31 programs), column spans on axis 1 (65535 at most: N < 2^24 with 256 x 1)
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn * tiles))
    _scale_tiles_kernel[grid](
        x,
        y,
        s,
        M,
        N,
        x.stride(0),
        x.stride(1),
        y.stride(0),
        y.stride(1),
        BLOCK_M=bm,
        BLOCK_N=bn,
        TILES_N=tiles,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
