"""Rotary embedding, BLOCK_ROWS rows of the flattened [B*H*S, D] tensor per program: each row loads its two
halves and its position's cos/sin halves and writes both rotated halves. The backward is the same kernel
with the transposed rotation (SIGN = -1: out1 = g1*c1 + g2*s2, out2 = g2*c2 - g1*s1)."""

import torch
import triton
import triton.language as tl

TASK = "rotary"

SPACE = {
    "BLOCK_ROWS": [1, 2, 4, 8, 16, 32],
    "num_warps": [1, 2, 4, 8],
    "num_stages": [1, 2, 3],
}


def constraints(params, shape):
    # Four fp32 half-rows (x1, x2, cos, sin) of D/2 each per row: above 64 values per thread spills.
    half = max(shape["D"] // 2, 1)
    return 4 * params["BLOCK_ROWS"] * half // (32 * params["num_warps"]) <= 64


@triton.jit
def _rotary_rows_kernel(
    x_ptr,
    cos_ptr,
    sin_ptr,
    out_ptr,
    n_rows,
    S,
    HALF,
    SIGN: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, BLOCK_HALF)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < HALF)
    pos = rows % S
    d = 2 * HALF
    x_off = rows[:, None] * d + cols[None, :]
    t_off = pos[:, None] * d + cols[None, :]
    x1 = tl.load(x_ptr + x_off, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + x_off + HALF, mask=mask, other=0.0).to(tl.float32)
    c1 = tl.load(cos_ptr + t_off, mask=mask, other=0.0).to(tl.float32)
    c2 = tl.load(cos_ptr + t_off + HALF, mask=mask, other=0.0).to(tl.float32)
    s1 = tl.load(sin_ptr + t_off, mask=mask, other=0.0).to(tl.float32)
    s2 = tl.load(sin_ptr + t_off + HALF, mask=mask, other=0.0).to(tl.float32)
    if SIGN > 0:  # forward: out = x*cos + cat(-x2, x1)*sin
        o1 = x1 * c1 - x2 * s1
        o2 = x2 * c2 + x1 * s2
    else:  # backward: dx = g*cos + cat(g2*s2, -g1*s1)
        o1 = x1 * c1 + x2 * s2
        o2 = x2 * c2 - x1 * s1
    tl.store(out_ptr + x_off, o1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_ptr + x_off + HALF, o2.to(out_ptr.dtype.element_ty), mask=mask)


def launch(x, cos, sin, **params):
    b, h, s, d = x.shape
    xc = x.contiguous()
    out = torch.empty_like(xc)
    n_rows = b * h * s
    grid = (triton.cdiv(n_rows, params["BLOCK_ROWS"]),)
    _rotary_rows_kernel[grid](
        xc,
        cos.contiguous(),
        sin.contiguous(),
        out,
        n_rows,
        s,
        d // 2,
        SIGN=1,
        BLOCK_ROWS=params["BLOCK_ROWS"],
        BLOCK_HALF=triton.next_power_of_2(d // 2),
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return out


def launch_forward(x, cos, sin, **params):
    b, h, s, d = x.shape
    xc = x.contiguous()
    out = torch.empty_like(xc)
    n_rows = b * h * s
    grid = (triton.cdiv(n_rows, params["BLOCK_ROWS"]),)
    _rotary_rows_kernel[grid](
        xc,
        cos.contiguous(),
        sin.contiguous(),
        out,
        n_rows,
        s,
        d // 2,
        SIGN=1,
        BLOCK_ROWS=params["BLOCK_ROWS"],
        BLOCK_HALF=triton.next_power_of_2(d // 2),
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return out, ()  # the backward needs only cos and sin, which are inputs


def launch_backward(grad_out, saved, x, cos, sin, **params):
    b, h, s, d = x.shape
    g = grad_out.contiguous()
    dx = torch.empty_like(g)
    n_rows = b * h * s
    grid = (triton.cdiv(n_rows, params["BLOCK_ROWS"]),)
    _rotary_rows_kernel[grid](
        g,
        cos.contiguous(),
        sin.contiguous(),
        dx,
        n_rows,
        s,
        d // 2,
        SIGN=-1,
        BLOCK_ROWS=params["BLOCK_ROWS"],
        BLOCK_HALF=triton.next_power_of_2(d // 2),
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return (dx,)
