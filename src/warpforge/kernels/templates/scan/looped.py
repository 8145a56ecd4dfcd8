"""Scan along dim 1 of [M, L, N], chunked: each program owns BLOCK_N adjacent columns of one m and walks L in
BLOCK_L-position chunks, scanning each chunk as a [BLOCK_L, BLOCK_N] tile with ``tl.cumsum``/``tl.cumprod`` and
combining it with the carry, the fp32 total of every earlier chunk per column, which then absorbs the
chunk's own total; any L works in registers bounded by the chunk. Reverse and exclusive members only remap
rows: scan position p reads row p (L - 1 - p reversed), an exclusive scan reads the position before it (the
identity at p = 0) and writes where an inclusive one would. The member (OP, REVERSE, EXCLUSIVE) is fixed at
compile time; values and the carry accumulate in fp32."""

import torch
import triton
import triton.language as tl

TASK = "scan"
# The family member (kernels/tasks/scan.py MEMBERS): the matcher rewrites these three lines.
OP = "sum"
REVERSE = False
EXCLUSIVE = False

SPACE = {
    "BLOCK_L": [16, 32, 64, 128, 256, 512, 1024],
    "BLOCK_N": [1, 2, 4, 8, 16, 32, 64],
    "num_warps": [1, 2, 4, 8],
    "num_stages": [1, 2],
}

# The chunk and its scanned copy: above 32 fp32 values per thread, registers spill.
MAX_ELEMS_PER_THREAD = 32


def constraints(params, shape):
    return params["BLOCK_L"] * params["BLOCK_N"] // (32 * params["num_warps"]) <= MAX_ELEMS_PER_THREAD


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
    col_ok = cols < N
    fill = 0.0 if OP == "sum" else 1.0
    carry = tl.full([BLOCK_N], fill, tl.float32)
    x_base = x_ptr + m * sxm + cols[None, :] * sxn
    y_base = y_ptr + m * L * N + cols[None, :]
    last = tl.arange(0, BLOCK_L) == BLOCK_L - 1
    for start in range(0, L, BLOCK_L):
        pos = start + tl.arange(0, BLOCK_L)
        # The input at scan position q: row q, or L - 1 - q reversed; an exclusive scan's position p takes
        # q = p - 1.
        q = pos - 1 if EXCLUSIVE else pos
        src = (L - 1 - q) if REVERSE else q
        dst = (L - 1 - pos) if REVERSE else pos
        load_ok = ((q >= 0) & (q < L))[:, None] & col_ok[None, :]
        x = tl.load(x_base + src[:, None].to(tl.int64) * sxl, mask=load_ok, other=fill).to(tl.float32)
        # The chunk's last scanned row is its total (padding holds the identity), picked out exactly by a sum
        # whose other terms are 0.
        if OP == "sum":
            s = tl.cumsum(x, axis=0)
            y = carry[None, :] + s
            carry = carry + tl.sum(tl.where(last[:, None], s, 0.0), axis=0)
        else:
            s = tl.cumprod(x, axis=0)
            y = carry[None, :] * s
            carry = carry * tl.sum(tl.where(last[:, None], s, 0.0), axis=0)
        out_ok = (pos < L)[:, None] & col_ok[None, :]
        tl.store(y_base + dst[:, None].to(tl.int64) * N, y.to(y_ptr.dtype.element_ty), mask=out_ok)


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
        BLOCK_L=params["BLOCK_L"],
        BLOCK_N=params["BLOCK_N"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
