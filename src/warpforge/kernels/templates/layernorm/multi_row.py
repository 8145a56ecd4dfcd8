"""LayerNorm, several rows per program as one 2D block [ROWS, BLOCK_N], BLOCK_N = next_power_of_2(N)
and ROWS = TILE // BLOCK_N: for short rows a one-row program leaves lanes idle; a 2D tile keeps every
warp busy, issues one wide load and reuses one load of w and b for ROWS rows. Mean and centred variance
reduce along axis 1."""

import torch
import triton
import triton.language as tl

TASK = "layernorm"

SPACE = {
    # Elements per program; ROWS = TILE // BLOCK_N rows (at least 1), so one configuration adapts to
    # every row length: a 4096-wide row with TILE 16384 gives 4 rows per program, a 32768-wide row 1.
    "TILE": [1024, 2048, 4096, 8192, 16384, 32768],
    "num_warps": [1, 2, 4, 8, 16, 32],
    # No loop to software-pipeline: a single stage is the only meaningful value.
    "num_stages": [1],
}

EPS = 1e-5
MAX_BLOCK = 65536
# ROWS * BLOCK_N fp32 values live in registers; above 128 per thread they spill.
MAX_ELEMS_PER_THREAD = 128


def _rows(tile, m, n):
    # Powers of two throughout (tl.arange needs them); never more rows than the matrix has.
    return max(1, min(tile // triton.next_power_of_2(n), triton.next_power_of_2(m)))


def constraints(params, shape):
    block_n = triton.next_power_of_2(shape["N"])
    if block_n > MAX_BLOCK:
        return False
    rows = _rows(params["TILE"], shape["M"], shape["N"])
    return rows * block_n // (32 * params["num_warps"]) <= MAX_ELEMS_PER_THREAD


@triton.jit
def _layernorm_2d_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    M,
    N,
    stride_x,
    stride_y,
    eps,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    mask = (rows[:, None] < M) & col_mask[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    # Shifted by each row's first element before summing: a constant row is then exactly 0, as torch's is (the
    # raw sum over N put it ~6e-5 off), and rows far from 0 keep their precision.
    shift = tl.load(x_ptr + tl.minimum(rows, M - 1) * stride_x).to(tl.float32)
    xs = tl.where(mask, x - shift[:, None], 0.0)
    mean = tl.sum(xs, axis=1) / N
    xc = tl.where(mask, xs - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=1) / N + eps)
    y = xc * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, w, b, **params):
    n = x.shape[-1]
    x2 = x.contiguous().view(-1, n)
    w = w.contiguous()
    b = b.contiguous()
    m = x2.shape[0]
    y = torch.empty_like(x2)
    rows = _rows(params["TILE"], m, n)
    grid = (triton.cdiv(m, rows),)
    _layernorm_2d_kernel[grid](
        x2,
        w,
        b,
        y,
        m,
        n,
        x2.stride(0),
        y.stride(0),
        EPS,
        ROWS=rows,
        BLOCK_N=triton.next_power_of_2(n),
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y.view(x.shape)
