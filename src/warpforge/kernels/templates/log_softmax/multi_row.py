"""Log-softmax (x - max - log(sum(exp(x - max))) per row), several rows per program as one 2D block
[ROWS, BLOCK_N], BLOCK_N = next_power_of_2(N) and ROWS = TILE // BLOCK_N: short rows would leave most lanes
of a one-row program idle; a 2D tile keeps every warp busy and issues one wide load per program. Reductions
run along axis 1, one result per row."""

import torch
import triton
import triton.language as tl

TASK = "log_softmax"

SPACE = {
    # Elements per program; ROWS = TILE // BLOCK_N rows (at least 1), so one configuration adapts to
    # every row length: a 4096-wide row with TILE 16384 gives 4 rows per program, a 32768-wide row 1.
    "TILE": [1024, 2048, 4096, 8192, 16384, 32768],
    "num_warps": [1, 2, 4, 8, 16, 32],
    # No loop to software-pipeline: a single stage is the only meaningful value.
    "num_stages": [1],
}

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
def _log_softmax_2d_kernel(
    x_ptr,
    y_ptr,
    M,
    N,
    stride_x,
    stride_y,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    row_max = tl.max(x, axis=1)
    # Rows past M are all -inf: give them a finite max so exp() sees no inf - inf.
    row_max = tl.where(rows < M, row_max, 0.0)
    num = tl.exp(x - row_max[:, None])
    den = tl.sum(num, axis=1)
    den = tl.where(rows < M, den, 1.0)
    y = x - row_max[:, None] - tl.log(den)[:, None]
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, **params):
    n = x.shape[-1]
    x2 = x.contiguous().view(-1, n)
    m = x2.shape[0]
    y = torch.empty_like(x2)
    rows = _rows(params["TILE"], m, n)
    grid = (triton.cdiv(m, rows),)
    _log_softmax_2d_kernel[grid](
        x2,
        y,
        m,
        n,
        x2.stride(0),
        y.stride(0),
        ROWS=rows,
        BLOCK_N=triton.next_power_of_2(n),
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y.view(x.shape)
