"""Reduction over dim 1 of [M, R, N], looped: each program owns BLOCK_N adjacent columns of one m and walks R
in BLOCK_R-row chunks, folding each chunk into a [BLOCK_R, BLOCK_N] accumulator lane by lane (loads along
N are contiguous), then reduces the accumulator once. Arg ops keep the index beside the value and take,
among the lanes holding the extreme, the smallest index: torch's first occurrence, whatever lane it sits in.
The member (OP, KEEPDIM) is fixed at compile time; values accumulate in fp32."""

import torch
import triton
import triton.language as tl

TASK = "reduce"
# The family member (kernels/tasks/reduce.py MEMBERS): the matcher rewrites these two lines.
OP = "sum"
KEEPDIM = False

SPACE = {
    "BLOCK_R": [1, 4, 8, 16, 32, 64],
    "BLOCK_N": [16, 32, 64, 128, 256],
    "num_warps": [1, 2, 4, 8],
    "num_stages": [1, 2, 3],
}

# An accumulator plus an index tile for arg ops: above 32 fp32 values per thread per tile, registers spill.
MAX_ELEMS_PER_THREAD = 32


def constraints(params, shape):
    return params["BLOCK_R"] * params["BLOCK_N"] // (32 * params["num_warps"]) <= MAX_ELEMS_PER_THREAD


@triton.jit
def _reduce_kernel(x_ptr, y_ptr, R, N, sxm, sxr, sxn, OP: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    m = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.arange(0, BLOCK_R)
    col_ok = cols < N
    if OP == "sum" or OP == "mean":
        fill = 0.0
    elif OP == "prod":
        fill = 1.0
    elif OP == "max" or OP == "argmax":
        fill = -float("inf")
    else:
        fill = float("inf")
    acc = tl.full([BLOCK_R, BLOCK_N], fill, tl.float32)
    idx = tl.full([BLOCK_R, BLOCK_N], 0, tl.int64)
    base = x_ptr + m * sxm + cols[None, :] * sxn
    for start in range(0, R, BLOCK_R):
        r = start + rows
        mask = (r[:, None] < R) & col_ok[None, :]
        x = tl.load(base + r[:, None].to(tl.int64) * sxr, mask=mask, other=fill).to(tl.float32)
        if OP == "sum" or OP == "mean":
            acc += x
        elif OP == "prod":
            acc *= x
        elif OP == "max":
            acc = tl.maximum(acc, x)
        elif OP == "min":
            acc = tl.minimum(acc, x)
        else:
            # Strictly better only: a lane keeps its earliest index of a tie.
            better = (x > acc) if OP == "argmax" else (x < acc)
            better = better & mask
            idx = tl.where(better, r[:, None].to(tl.int64) + tl.zeros_like(idx), idx)
            acc = tl.where(better, x, acc)
    if OP == "sum":
        out = tl.sum(acc, axis=0)
    elif OP == "mean":
        out = tl.sum(acc, axis=0) / R
    elif OP == "prod":
        out = tl.reduce(acc, 0, _mul)
    elif OP == "max":
        out = tl.max(acc, axis=0)
    elif OP == "min":
        out = tl.min(acc, axis=0)
    else:
        best = tl.max(acc, axis=0) if OP == "argmax" else tl.min(acc, axis=0)
        # A lane never reached (R < BLOCK_R) holds fill and index 0: only lanes at the extreme compete.
        hit = (acc == best[None, :]) & (rows[:, None] < R)
        out = tl.min(tl.where(hit, idx, R), axis=0)
    tl.store(y_ptr + m * N + cols, out.to(y_ptr.dtype.element_ty), mask=col_ok)


@triton.jit
def _mul(a, b):
    return a * b


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
        BLOCK_R=params["BLOCK_R"],
        BLOCK_N=params["BLOCK_N"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
