"""RMSNorm, several rows per program as one 2D block [ROWS, BLOCK_N], BLOCK_N = next_power_of_2(N) and
ROWS = TILE // BLOCK_N: for short rows a one-row program leaves lanes idle; a 2D tile keeps every warp
busy, issues one wide load and reuses one weight load for ROWS rows. The sum of squares is reduced
along axis 1.

Training: the forward also stores rstd per row (fp32, [M]); the backward walks [ROWS, BLOCK_N] tiles the same
way, keeps a partial dw (fp32) over the tiles it owns and writes it to a [programs, N] buffer that a second
kernel sums over programs (Liger's scheme: no atomics, so dw is deterministic)."""

import torch
import triton
import triton.language as tl

TASK = "rmsnorm"

SPACE = {
    # Elements per program; ROWS = TILE // BLOCK_N rows (at least 1), so one configuration adapts to
    # every row length: a 4096-wide row with TILE 16384 gives 4 rows per program, a 32768-wide row 1.
    "TILE": [1024, 2048, 4096, 8192, 16384, 32768],
    "num_warps": [1, 2, 4, 8, 16, 32],
    # No loop to software-pipeline: a single stage is the only meaningful value.
    "num_stages": [1],
}

EPS = 1e-6
MAX_BLOCK = 65536
# ROWS * BLOCK_N fp32 values live in registers; above 128 per thread they spill.
MAX_ELEMS_PER_THREAD = 128
# Backward programs at most: ~8 per SM on an H100 (132 SMs) keeps every SM busy while the partial-dw buffer
# stays at 1024 x N fp32 (16 MiB at N = 4096) however many rows there are.
BWD_PROGRAMS = 1024
# Columns per program of the dw reduction over the partial buffer.
REDUCE_BLOCK_N = 256


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
def _rmsnorm_2d_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    rstd_ptr,
    M,
    N,
    stride_x,
    stride_y,
    eps,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    STORE_RSTD: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    mask = (rows[:, None] < M) & col_mask[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / N + eps)
    y = x * rstd[:, None] * w[None, :]
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    if STORE_RSTD:
        tl.store(rstd_ptr + rows, rstd, mask=rows < M)


@triton.jit
def _rmsnorm_2d_bwd_kernel(
    dy_ptr,
    x_ptr,
    w_ptr,
    rstd_ptr,
    dx_ptr,
    dw_part_ptr,
    M,
    N,
    stride_dy,
    stride_x,
    stride_dx,
    tiles_per_program,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # dx = rstd * (w*dy - x * rstd^2 * mean(x*w*dy)); dw = sum over rows of dy * x * rstd.
    pid = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)
    for t in range(0, tiles_per_program):
        rows = (pid * tiles_per_program + t) * ROWS + tl.arange(0, ROWS)
        mask = (rows[:, None] < M) & col_mask[None, :]
        x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + rows[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + rows, mask=rows < M, other=0.0)
        wdy = w[None, :] * dy
        c = tl.sum(x * wdy, axis=1) / N
        dx = rstd[:, None] * (wdy - x * (rstd * rstd * c)[:, None])
        tl.store(dx_ptr + rows[:, None] * stride_dx + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += tl.sum(dy * x * rstd[:, None], axis=0)
    tl.store(dw_part_ptr + pid * N + cols, dw, mask=col_mask)


@triton.jit
def _dw_reduce_kernel(part_ptr, dw_ptr, P, N, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for p in range(0, P):
        acc += tl.load(part_ptr + p * N + cols, mask=mask, other=0.0)
    tl.store(dw_ptr + cols, acc.to(dw_ptr.dtype.element_ty), mask=mask)


def launch(x, w, **params):
    n = x.shape[-1]
    x2 = x.contiguous().view(-1, n)
    w = w.contiguous()
    m = x2.shape[0]
    y = torch.empty_like(x2)
    rows = _rows(params["TILE"], m, n)
    _rmsnorm_2d_kernel[(triton.cdiv(m, rows),)](
        x2,
        w,
        y,
        y,
        m,
        n,
        x2.stride(0),
        y.stride(0),
        EPS,
        ROWS=rows,
        BLOCK_N=triton.next_power_of_2(n),
        STORE_RSTD=False,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y.view(x.shape)


def launch_forward(x, w, **params):
    # As launch, and rstd per row (fp32) saved for the backward.
    n = x.shape[-1]
    x2 = x.contiguous().view(-1, n)
    w = w.contiguous()
    m = x2.shape[0]
    y = torch.empty_like(x2)
    rstd = torch.empty((m,), device=x.device, dtype=torch.float32)
    rows = _rows(params["TILE"], m, n)
    _rmsnorm_2d_kernel[(triton.cdiv(m, rows),)](
        x2,
        w,
        y,
        rstd,
        m,
        n,
        x2.stride(0),
        y.stride(0),
        EPS,
        ROWS=rows,
        BLOCK_N=triton.next_power_of_2(n),
        STORE_RSTD=True,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y.view(x.shape), (rstd,)


def launch_backward(grad_out, saved, x, w, **params):
    (rstd,) = saved
    n = x.shape[-1]
    x2 = x.contiguous().view(-1, n)
    dy = grad_out.contiguous().view(-1, n)
    w = w.contiguous()
    m = x2.shape[0]
    dx = torch.empty_like(x2)
    rows = _rows(params["TILE"], m, n)
    tiles = triton.cdiv(m, rows)
    per_program = triton.cdiv(tiles, min(tiles, BWD_PROGRAMS))
    programs = triton.cdiv(tiles, per_program)
    part = torch.empty((programs, n), device=x.device, dtype=torch.float32)
    _rmsnorm_2d_bwd_kernel[(programs,)](
        dy,
        x2,
        w,
        rstd,
        dx,
        part,
        m,
        n,
        dy.stride(0),
        x2.stride(0),
        dx.stride(0),
        per_program,
        ROWS=rows,
        BLOCK_N=triton.next_power_of_2(n),
        num_warps=params["num_warps"],
    )
    dw = torch.empty_like(w)
    _dw_reduce_kernel[(triton.cdiv(n, REDUCE_BLOCK_N),)](part, dw, programs, n, BLOCK_N=REDUCE_BLOCK_N)
    return dx.view(x.shape), dw
