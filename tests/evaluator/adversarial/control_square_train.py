"""Honest training control: y = x * x and dx = 2 x dy, each in one masked Triton kernel; saved = (x,)."""
import torch
import triton
import triton.language as tl

TASK = "square"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}


@triton.jit
def _square(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (x * x).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _square_bwd(x_ptr, dy_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    dy = tl.load(dy_ptr + offs, mask=mask).to(tl.float32)
    tl.store(dx_ptr + offs, (2 * x * dy).to(dx_ptr.dtype.element_ty), mask=mask)


def launch(x, BLOCK=256, num_warps=4):
    y = torch.empty_like(x)
    _square[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y


def launch_forward(x, BLOCK=256, num_warps=4):
    y = torch.empty_like(x)
    _square[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y, (x,)


def launch_backward(grad_out, saved, x, BLOCK=256, num_warps=4):
    (xs,) = saved
    dx = torch.empty_like(xs)
    _square_bwd[(triton.cdiv(xs.numel(), BLOCK),)](xs, grad_out, dx, xs.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return (dx,)
