"""LayerNorm, whole row in registers: each program loads a full row (BLOCK = next_power_of_2(N)),
computes the mean, then the variance of the centred row (exact two-pass, no E[x^2] - E[x]^2
cancellation) and writes y, all from one read of x. A program handles ROWS_PER_PROGRAM consecutive
rows, loading w and b once for all of them; num_stages pipelines the row loop.

Training: ``launch_forward`` also stores each row's mean and rstd (fp32 [M]); ``launch_backward`` reloads
them (no second reduction over x for the statistics) and computes, per row, dx = rstd * (w*dy - xhat *
mean(xhat*w*dy) - mean(w*dy)). dw = sum_rows dy*xhat and db = sum_rows dy are reduced in two steps, as in
Liger-Kernel and the Triton tutorial: each backward program accumulates its BWD_ROWS_PER_PROGRAM rows into
one fp32 row of a [programs, N] partial buffer (no atomics, deterministic), then a column-sum kernel adds
the partial rows up."""

import torch
import triton
import triton.language as tl

TASK = "layernorm"

SPACE = {
    "ROWS_PER_PROGRAM": [1, 2, 4, 8],
    "num_warps": [1, 2, 4, 8, 16, 32],
    "num_stages": [1, 2, 3, 4],
    # Rows per backward program: more rows mean fewer partial dw/db rows to reduce, fewer mean fewer idle SMs.
    "BWD_ROWS_PER_PROGRAM": [4, 16, 64],
}

EPS = 1e-5
# A whole row must fit one block; 65536 fp32 values is already 64 per thread at 32 warps.
MAX_BLOCK = 65536
# Row, weight and bias stay resident in fp32: above 64 values of each per thread (192 registers) the
# 255-register budget spills.
MAX_ELEMS_PER_THREAD = 64


def constraints(params, shape):
    block = triton.next_power_of_2(shape["N"])
    return block <= MAX_BLOCK and block // (32 * params["num_warps"]) <= MAX_ELEMS_PER_THREAD


@triton.jit
def _layernorm_rows_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    mean_ptr,
    rstd_ptr,
    M,
    N,
    stride_x,
    stride_y,
    eps,
    BLOCK: tl.constexpr,
    ROWS_PER_PROGRAM: tl.constexpr,
    STORE_STATS: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    for i in range(0, ROWS_PER_PROGRAM):
        row = pid * ROWS_PER_PROGRAM + i
        # Rows past M (last program only) get an empty mask; written as a column limit because the
        # interpreter rejects `vector_mask & scalar_bool`.
        mask = cols < tl.where(row < M, N, 0)
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        # Shifted by the row's first element before summing: rows near 1000 (the task's large_offset
        # inputs) summed raw put the fp32 mean 6e-5 off, and y 1.2e-4 off at rstd 2, past fp32's 1e-4.
        shift = tl.load(x_ptr + tl.minimum(row, M - 1) * stride_x).to(tl.float32)
        xs = tl.where(mask, x - shift, 0.0)
        mean_s = tl.sum(xs, axis=0) / N
        mean = shift + mean_s
        xc = tl.where(mask, xs - mean_s, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / N + eps)
        y = xc * rstd * w + b
        tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
        if STORE_STATS:  # the training forward keeps the statistics the backward needs
            first = cols < tl.where(row < M, 1, 0)
            tl.store(mean_ptr + row + cols, tl.where(first, mean, 0.0), mask=first)
            tl.store(rstd_ptr + row + cols, tl.where(first, rstd, 0.0), mask=first)


def launch(x, w, b, **params):
    n = x.shape[-1]
    x2 = x.contiguous().view(-1, n)
    w = w.contiguous()
    b = b.contiguous()
    m = x2.shape[0]
    y = torch.empty_like(x2)
    rows = params["ROWS_PER_PROGRAM"]
    grid = (triton.cdiv(m, rows),)
    _layernorm_rows_kernel[grid](
        x2,
        w,
        b,
        y,
        y,
        y,
        m,
        n,
        x2.stride(0),
        y.stride(0),
        EPS,
        BLOCK=triton.next_power_of_2(n),
        ROWS_PER_PROGRAM=rows,
        STORE_STATS=False,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y.view(x.shape)


# The column-sum tile of the dw/db reduction: 32 partial rows x 128 columns per step (fp32, 32 values per
# thread at 4 warps).
SUM_ROWS = 32
SUM_COLS = 128


@triton.jit
def _layernorm_bwd_kernel(
    x_ptr,
    w_ptr,
    dy_ptr,
    mean_ptr,
    rstd_ptr,
    dx_ptr,
    dw_part_ptr,
    db_part_ptr,
    M,
    N,
    stride_x,
    stride_dy,
    stride_dx,
    BLOCK: tl.constexpr,
    ROWS: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    in_row = cols < N
    w = tl.load(w_ptr + cols, mask=in_row, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    db = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(0, ROWS):
        row = pid * ROWS + i
        mask = cols < tl.where(row < M, N, 0)
        safe = tl.minimum(row, M - 1)  # rows past M (last program) read row M-1's statistics, with dy = 0
        mean = tl.load(mean_ptr + safe)
        rstd = tl.load(rstd_ptr + safe)
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        wdy = w * dy
        c1 = tl.sum(xhat * wdy, axis=0) / N
        c2 = tl.sum(wdy, axis=0) / N
        dx = (wdy - (xhat * c1 + c2)) * rstd
        tl.store(dx_ptr + row * stride_dx + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * xhat
        db += dy
    tl.store(dw_part_ptr + pid * N + cols, dw, mask=in_row)
    tl.store(db_part_ptr + pid * N + cols, db, mask=in_row)


@triton.jit
def _column_sum_kernel(part_ptr, out_ptr, P, N, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.arange(0, BLOCK_P)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, P, BLOCK_P):
        r = start + rows
        mask = (r[:, None] < P) & (cols[None, :] < N)
        tile = tl.load(part_ptr + r[:, None].to(tl.int64) * N + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + cols, acc.to(out_ptr.dtype.element_ty), mask=cols < N)


def launch_forward(x, w, b, **params):
    n = x.shape[-1]
    x2 = x.contiguous().view(-1, n)
    w = w.contiguous()
    b = b.contiguous()
    m = x2.shape[0]
    y = torch.empty_like(x2)
    mean = torch.empty((m,), device=x.device, dtype=torch.float32)
    rstd = torch.empty((m,), device=x.device, dtype=torch.float32)
    rows = params["ROWS_PER_PROGRAM"]
    _layernorm_rows_kernel[(triton.cdiv(m, rows),)](
        x2,
        w,
        b,
        y,
        mean,
        rstd,
        m,
        n,
        x2.stride(0),
        y.stride(0),
        EPS,
        BLOCK=triton.next_power_of_2(n),
        ROWS_PER_PROGRAM=rows,
        STORE_STATS=True,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y.view(x.shape), (mean, rstd)


def launch_backward(grad_out, saved, x, w, b, **params):
    mean, rstd = saved
    n = x.shape[-1]
    x2 = x.contiguous().view(-1, n)
    dy = grad_out.contiguous().view(-1, n)
    w = w.contiguous()
    m = x2.shape[0]
    rows = params["BWD_ROWS_PER_PROGRAM"]
    programs = triton.cdiv(m, rows)
    dx = torch.empty_like(x2)
    dw_part = torch.empty((programs, n), device=x.device, dtype=torch.float32)
    db_part = torch.empty((programs, n), device=x.device, dtype=torch.float32)
    _layernorm_bwd_kernel[(programs,)](
        x2,
        w,
        dy,
        mean,
        rstd,
        dx,
        dw_part,
        db_part,
        m,
        n,
        x2.stride(0),
        dy.stride(0),
        dx.stride(0),
        BLOCK=triton.next_power_of_2(n),
        ROWS=rows,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    dw = torch.empty_like(w)
    db = torch.empty_like(b)
    grid = (triton.cdiv(n, SUM_COLS),)
    _column_sum_kernel[grid](dw_part, dw, programs, n, BLOCK_P=SUM_ROWS, BLOCK_N=SUM_COLS, num_warps=4)
    _column_sum_kernel[grid](db_part, db, programs, n, BLOCK_P=SUM_ROWS, BLOCK_N=SUM_COLS, num_warps=4)
    return dx.view(x.shape), dw, db
