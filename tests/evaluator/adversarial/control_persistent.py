"""Honest control (persistent grid): a fixed number of programs, each striding over the blocks."""
import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}
PROGRAMS = 3


@triton.jit
def _persistent(x_ptr, y_ptr, n, BLOCK: tl.constexpr, NPROG: tl.constexpr):
    pid = tl.program_id(0)
    for start in range(pid * BLOCK, n, NPROG * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
        tl.store(y_ptr + offs, (x * 2 + 1).to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, BLOCK=256, num_warps=4):
    y = torch.empty_like(x)
    _persistent[(PROGRAMS,)](x, y, x.numel(), BLOCK=BLOCK, NPROG=PROGRAMS, num_warps=num_warps)
    return y
