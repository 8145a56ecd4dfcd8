"""Row scaling over a 2-D grid of BLOCK_M x BLOCK_N tiles: each program loads its BLOCK_M factors once and
broadcasts them across its tile, so ``s`` is read cdiv(N, BLOCK_N) times in all (1/BLOCK_N of x's traffic).
The product is taken in fp32 and rounded once."""

import triton
import triton.language as tl

TASK = "row_scale"

SPACE = {
    "BLOCK_M": [1, 4, 16, 64],
    "BLOCK_N": [256, 512, 1024, 2048],
    "num_warps": [2, 4, 8],
    # No loop to pipeline.
    "num_stages": [1],
}

# 4-16 fp32 values per thread vectorize into 128-bit accesses; past 32 the tile only adds registers.
MAX_ELEMS_PER_THREAD = 32


def constraints(params, shape):
    per_thread = params["BLOCK_M"] * params["BLOCK_N"] // (32 * params["num_warps"])
    return 4 <= per_thread <= MAX_ELEMS_PER_THREAD


@triton.jit
def _row_scale_tiles_kernel(
    s_ptr, x_ptr, y_ptr, M, N, stride_xm, stride_xn, stride_ym, stride_yn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    mask = row_ok[:, None] & (cols[None, :] < N)
    s = tl.load(s_ptr + rows, mask=row_ok, other=0.0).to(tl.float32)
    rows64 = rows.to(tl.int64)
    x = tl.load(x_ptr + rows64[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0)
    y = s[:, None] * x.to(tl.float32)
    tl.store(y_ptr + rows64[:, None] * stride_ym + cols[None, :] * stride_yn, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(s, x, **params):
    M, N = x.shape
    assert s.shape == (M,), f"s is {tuple(s.shape)}, x is {tuple(x.shape)}: one factor per row of x"
    s = s.contiguous()
    y = x.new_empty((M, N))
    bm, bn = params["BLOCK_M"], params["BLOCK_N"]
    # rows on axis 0 (up to 2^31 programs), column blocks on axis 1 (65535 at most: N < 2^25 with 512)
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    _row_scale_tiles_kernel[grid](
        s,
        x,
        y,
        M,
        N,
        x.stride(0),
        x.stride(1),
        y.stride(0),
        y.stride(1),
        BLOCK_M=bm,
        BLOCK_N=bn,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
