"""Softmax, whole row in registers: each program loads a full row (BLOCK = next_power_of_2(N)), reduces
max and sum in registers and writes once, so x is read from memory exactly once. A program handles
ROWS_PER_PROGRAM consecutive rows in a loop that num_stages software-pipelines (the next row's load
overlaps the current row's math).

Training: ``launch_forward`` also stores each row's max and log of the sum of exponentials (fp32 [M]
each: kept apart, since max + log(sum) rounded to fp32 is 6e-5 off at logits near 1000, which the task's
large_offset inputs are), and ``launch_backward`` recomputes y = exp(x - max - log_sum) in fp32 from x (the
same bytes as reading a saved y) and computes dx = y * (dy - sum(dy * y)) per row. Saving y itself in
fp16/bf16 loses the gradient where dy - sum(dy * y) cancels: on near one-hot rows (the task's
large_magnitude inputs) a bf16 y put dx off by 300x its allowance."""

import torch
import triton
import triton.language as tl

TASK = "softmax"

SPACE = {
    "ROWS_PER_PROGRAM": [1, 2, 4, 8],
    "num_warps": [1, 2, 4, 8, 16, 32],
    "num_stages": [1, 2, 3, 4],
}

# A whole row must fit one block; 65536 fp32 values is already 64 per thread at 32 warps.
MAX_BLOCK = 65536
# More than 128 fp32 row values per thread exceeds the 255-register budget and spills to local memory.
MAX_ELEMS_PER_THREAD = 128


def constraints(params, shape):
    block = triton.next_power_of_2(shape["N"])
    return block <= MAX_BLOCK and block // (32 * params["num_warps"]) <= MAX_ELEMS_PER_THREAD


@triton.jit
def _softmax_rows_kernel(
    x_ptr,
    y_ptr,
    max_ptr,
    logsum_ptr,
    M,
    N,
    stride_x,
    stride_y,
    BLOCK: tl.constexpr,
    ROWS_PER_PROGRAM: tl.constexpr,
    STORE_LSE: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    for i in range(0, ROWS_PER_PROGRAM):
        row = pid * ROWS_PER_PROGRAM + i
        # Rows past M (last program only) get an empty mask; written as a column limit because the
        # interpreter rejects `vector_mask & scalar_bool`.
        mask = cols < tl.where(row < M, N, 0)
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
        # A row past M (last program only) is all -inf: a finite max keeps exp() free of inf - inf.
        row_max = tl.where(row < M, tl.max(x, axis=0), 0.0)
        num = tl.exp(x - row_max)
        inv_den = 1.0 / tl.maximum(tl.sum(num, axis=0), 1e-30)
        y = num * inv_den
        tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
        if STORE_LSE:  # the training forward keeps the statistic the backward needs
            first = cols < tl.where(row < M, 1, 0)
            log_sum = tl.log(tl.maximum(tl.sum(num, axis=0), 1e-30))
            tl.store(max_ptr + row + cols, tl.where(first, row_max, 0.0), mask=first)
            tl.store(logsum_ptr + row + cols, tl.where(first, log_sum, 0.0), mask=first)


def launch(x, **params):
    n = x.shape[-1]
    x2 = x.contiguous().view(-1, n)
    m = x2.shape[0]
    y = torch.empty_like(x2)
    rows = params["ROWS_PER_PROGRAM"]
    grid = (triton.cdiv(m, rows),)
    _softmax_rows_kernel[grid](
        x2,
        y,
        y,
        y,
        m,
        n,
        x2.stride(0),
        y.stride(0),
        BLOCK=triton.next_power_of_2(n),
        ROWS_PER_PROGRAM=rows,
        STORE_LSE=False,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y.view(x.shape)


@triton.jit
def _softmax_bwd_rows_kernel(
    x_ptr,
    max_ptr,
    logsum_ptr,
    dy_ptr,
    dx_ptr,
    M,
    N,
    stride_x,
    stride_dy,
    stride_dx,
    BLOCK: tl.constexpr,
    ROWS_PER_PROGRAM: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    for i in range(0, ROWS_PER_PROGRAM):
        row = pid * ROWS_PER_PROGRAM + i
        mask = cols < tl.where(row < M, N, 0)
        safe = tl.minimum(row, M - 1)  # rows past M (last program) read row M-1's statistics; nothing is stored
        row_max = tl.load(max_ptr + safe)
        log_sum = tl.load(logsum_ptr + safe)
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp((x - row_max) - log_sum)
        dy = tl.load(dy_ptr + row * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
        dx = y * (dy - tl.sum(y * dy, axis=0))
        tl.store(dx_ptr + row * stride_dx + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


def launch_forward(x, **params):
    n = x.shape[-1]
    x2 = x.contiguous().view(-1, n)
    m = x2.shape[0]
    y = torch.empty_like(x2)
    row_max = torch.empty((m,), device=x.device, dtype=torch.float32)
    log_sum = torch.empty((m,), device=x.device, dtype=torch.float32)
    rows = params["ROWS_PER_PROGRAM"]
    _softmax_rows_kernel[(triton.cdiv(m, rows),)](
        x2,
        y,
        row_max,
        log_sum,
        m,
        n,
        x2.stride(0),
        y.stride(0),
        BLOCK=triton.next_power_of_2(n),
        ROWS_PER_PROGRAM=rows,
        STORE_LSE=True,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y.view(x.shape), (row_max, log_sum)


def launch_backward(grad_out, saved, x, **params):
    row_max, log_sum = saved
    n = x.shape[-1]
    x2 = x.contiguous().view(-1, n)
    dy = grad_out.contiguous().view(-1, n)
    m = x2.shape[0]
    dx = torch.empty_like(x2)
    rows = params["ROWS_PER_PROGRAM"]
    _softmax_bwd_rows_kernel[(triton.cdiv(m, rows),)](
        x2,
        row_max,
        log_sum,
        dy,
        dx,
        m,
        n,
        x2.stride(0),
        dy.stride(0),
        dx.stride(0),
        BLOCK=triton.next_power_of_2(n),
        ROWS_PER_PROGRAM=rows,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return (dx.view(x.shape),)
