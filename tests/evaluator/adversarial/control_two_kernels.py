"""Honest control (several kernels): y = 2x in one kernel, then y += 1 in place by a second one."""
import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}


@triton.jit
def _scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, (tl.load(x_ptr + offs, mask=mask).to(tl.float32) * 2).to(y_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def _add_one(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (y + 1).to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, BLOCK=256, num_warps=4):
    y = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), BLOCK),)
    _scale[grid](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    _add_one[grid](y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y
