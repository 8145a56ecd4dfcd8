"""Reduction over dim 1 of [M, R, N] in one pass: the whole of R (padded to a power of two) times BLOCK_N
columns is one tile, reduced by a single tree reduction along axis 0, with no loop and no accumulator:
the fastest form while R is short enough to sit in registers. Arg ops take the smallest index among the
rows at the extreme (torch's first occurrence). The member (OP, KEEPDIM) is fixed at compile time; values
accumulate in fp32."""

import torch
import triton
import triton.language as tl

TASK = "reduce"
# The family member (kernels/tasks/reduce.py MEMBERS): the matcher rewrites these two lines.
OP = "sum"
KEEPDIM = False

SPACE = {
    "BLOCK_N": [1, 2, 4, 8, 16, 32, 64],
    "num_warps": [1, 2, 4, 8, 16, 32],
    "num_stages": [1],
}

# The tile plus, for arg ops, an int64 index tile: above 64 fp32 values per thread, registers spill.
MAX_ELEMS_PER_THREAD = 64


def constraints(params, shape):
    tile = triton.next_power_of_2(shape["R"]) * params["BLOCK_N"]
    return tile // (32 * params["num_warps"]) <= MAX_ELEMS_PER_THREAD


@triton.jit
def _mul(a, b):
    return a * b


@triton.jit
def _reduce_kernel(x_ptr, y_ptr, R, N, sxm, sxr, sxn, OP: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    m = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.arange(0, BLOCK_R)
    mask = (rows[:, None] < R) & (cols[None, :] < N)
    if OP == "sum" or OP == "mean":
        fill = 0.0
    elif OP == "prod":
        fill = 1.0
    elif OP == "max" or OP == "argmax":
        fill = -float("inf")
    else:
        fill = float("inf")
    ptrs = x_ptr + m * sxm + rows[:, None].to(tl.int64) * sxr + cols[None, :] * sxn
    x = tl.load(ptrs, mask=mask, other=fill).to(tl.float32)
    if OP == "sum":
        out = tl.sum(x, axis=0)
    elif OP == "mean":
        out = tl.sum(x, axis=0) / R
    elif OP == "prod":
        out = tl.reduce(x, 0, _mul)
    elif OP == "max":
        out = tl.max(x, axis=0)
    elif OP == "min":
        out = tl.min(x, axis=0)
    else:
        best = tl.max(x, axis=0) if OP == "argmax" else tl.min(x, axis=0)
        hit = (x == best[None, :]) & (rows[:, None] < R)
        out = tl.min(tl.where(hit, rows[:, None].to(tl.int64) + tl.zeros([BLOCK_R, BLOCK_N], tl.int64), R), axis=0)
    tl.store(y_ptr + m * N + cols, out.to(y_ptr.dtype.element_ty), mask=cols < N)


def launch(x, **params):
    m, r, n = x.shape
    index = OP == "argmax" or OP == "argmin"
    y = torch.empty((m, 1, n) if KEEPDIM else (m, n), dtype=torch.int64 if index else x.dtype, device=x.device)
    grid = (m, triton.cdiv(n, params["BLOCK_N"]))
    _reduce_kernel[grid](
        x,
        y,
        r,
        n,
        x.stride(0),
        x.stride(1),
        x.stride(2),
        OP=OP,
        BLOCK_R=triton.next_power_of_2(r),
        BLOCK_N=params["BLOCK_N"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
