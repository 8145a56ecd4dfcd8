"""Scan along dim 1 of [M, L, N] in one pass: the whole of L (padded to a power of two) times BLOCK_N columns
is one tile, scanned along axis 0 by one ``tl.cumsum``/``tl.cumprod`` (an associative scan: a log-depth tree
in registers and, across warps, shared memory), with no loop and no carry: the fastest form while L fits in
registers. Reverse and exclusive members only remap rows: scan position p reads row p (L - 1 - p reversed),
an exclusive scan reads the position before it (the identity at p = 0) and writes where an inclusive one
would. The member (OP, REVERSE, EXCLUSIVE) is fixed at compile time; values accumulate in fp32."""

import torch
import triton
import triton.language as tl

TASK = "scan"
# The family member (kernels/tasks/scan.py MEMBERS): the matcher rewrites these three lines.
OP = "sum"
REVERSE = False
EXCLUSIVE = False

SPACE = {
    "BLOCK_N": [1, 2, 4, 8, 16, 32, 64],
    "num_warps": [1, 2, 4, 8, 16, 32],
    "num_stages": [1],
}

# The tile and its scanned copy: above 32 fp32 values per thread, registers spill. KernelBench's L = 32768
# fits at BLOCK_N = 1 with 32 warps (32 values a thread).
MAX_ELEMS_PER_THREAD = 32


def constraints(params, shape):
    tile = triton.next_power_of_2(shape["L"]) * params["BLOCK_N"]
    return tile // (32 * params["num_warps"]) <= MAX_ELEMS_PER_THREAD


@triton.jit
def _scan_kernel(
    x_ptr,
    y_ptr,
    L,
    N,
    sxm,
    sxl,
    sxn,
    OP: tl.constexpr,
    REVERSE: tl.constexpr,
    EXCLUSIVE: tl.constexpr,
    BLOCK_L: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    m = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    pos = tl.arange(0, BLOCK_L)
    col_ok = cols < N
    fill = 0.0 if OP == "sum" else 1.0
    # The input at scan position q: row q, or L - 1 - q reversed; an exclusive scan's position p takes q = p - 1.
    q = pos - 1 if EXCLUSIVE else pos
    src = (L - 1 - q) if REVERSE else q
    dst = (L - 1 - pos) if REVERSE else pos
    load_ok = ((q >= 0) & (q < L))[:, None] & col_ok[None, :]
    x = tl.load(x_ptr + m * sxm + src[:, None].to(tl.int64) * sxl + cols[None, :] * sxn, mask=load_ok, other=fill).to(
        tl.float32
    )
    if OP == "sum":
        y = tl.cumsum(x, axis=0)
    else:
        y = tl.cumprod(x, axis=0)
    out_ok = (pos < L)[:, None] & col_ok[None, :]
    tl.store(
        y_ptr + m * L * N + dst[:, None].to(tl.int64) * N + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=out_ok
    )


def launch(x, **params):
    m, length, n = x.shape
    y = torch.empty((m, length, n), dtype=x.dtype, device=x.device)
    grid = (m, triton.cdiv(n, params["BLOCK_N"]))
    _scan_kernel[grid](
        x,
        y,
        length,
        n,
        x.stride(0),
        x.stride(1),
        x.stride(2),
        OP=OP,
        REVERSE=REVERSE,
        EXCLUSIVE=EXCLUSIVE,
        BLOCK_L=triton.next_power_of_2(length),
        BLOCK_N=params["BLOCK_N"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
