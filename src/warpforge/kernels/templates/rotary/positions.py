"""Rotary embedding, one program per (BLOCK_S positions, batch): cos/sin of those positions are loaded once
and applied to every head in a loop (H reads of x per table read, instead of one table read per row as in
``rows``). The backward is the same kernel with the transposed rotation (SIGN = -1)."""

import torch
import triton
import triton.language as tl

TASK = "rotary"

SPACE = {
    "BLOCK_S": [1, 2, 4, 8, 16, 32],
    "num_warps": [1, 2, 4, 8],
    "num_stages": [1, 2, 3],
}


def constraints(params, shape):
    # cos and sin halves held across the head loop plus x's two halves: 6 fp32 tiles of BLOCK_S x D/2;
    # above 96 values per thread spills.
    half = max(shape["D"] // 2, 1)
    return 6 * params["BLOCK_S"] * half // (32 * params["num_warps"]) <= 96


@triton.jit
def _rotary_positions_kernel(
    x_ptr, cos_ptr, sin_ptr, out_ptr, H, S, HALF, SIGN: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_HALF: tl.constexpr
):
    pos = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    b = tl.program_id(1).to(tl.int64)
    cols = tl.arange(0, BLOCK_HALF)
    mask = (pos[:, None] < S) & (cols[None, :] < HALF)
    d = 2 * HALF
    t_off = pos[:, None] * d + cols[None, :]
    c1 = tl.load(cos_ptr + t_off, mask=mask, other=0.0).to(tl.float32)
    c2 = tl.load(cos_ptr + t_off + HALF, mask=mask, other=0.0).to(tl.float32)
    s1 = tl.load(sin_ptr + t_off, mask=mask, other=0.0).to(tl.float32)
    s2 = tl.load(sin_ptr + t_off + HALF, mask=mask, other=0.0).to(tl.float32)
    for h in range(H):
        x_off = ((b * H + h) * S + pos[:, None]) * d + cols[None, :]
        x1 = tl.load(x_ptr + x_off, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(x_ptr + x_off + HALF, mask=mask, other=0.0).to(tl.float32)
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
    grid = (triton.cdiv(s, params["BLOCK_S"]), b)
    _rotary_positions_kernel[grid](
        xc,
        cos.contiguous(),
        sin.contiguous(),
        out,
        h,
        s,
        d // 2,
        SIGN=1,
        BLOCK_S=params["BLOCK_S"],
        BLOCK_HALF=triton.next_power_of_2(d // 2),
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return out


def launch_forward(x, cos, sin, **params):
    b, h, s, d = x.shape
    xc = x.contiguous()
    out = torch.empty_like(xc)
    grid = (triton.cdiv(s, params["BLOCK_S"]), b)
    _rotary_positions_kernel[grid](
        xc,
        cos.contiguous(),
        sin.contiguous(),
        out,
        h,
        s,
        d // 2,
        SIGN=1,
        BLOCK_S=params["BLOCK_S"],
        BLOCK_HALF=triton.next_power_of_2(d // 2),
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return out, ()  # the backward needs only cos and sin, which are inputs


def launch_backward(grad_out, saved, x, cos, sin, **params):
    b, h, s, d = x.shape
    g = grad_out.contiguous()
    dx = torch.empty_like(g)
    grid = (triton.cdiv(s, params["BLOCK_S"]), b)
    _rotary_positions_kernel[grid](
        g,
        cos.contiguous(),
        sin.contiguous(),
        dx,
        h,
        s,
        d // 2,
        SIGN=-1,
        BLOCK_S=params["BLOCK_S"],
        BLOCK_HALF=triton.next_power_of_2(d // 2),
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return (dx,)
