"""Attack (needs the core rules: the grammar has no sys): the racy kernel of grid_race, with the judge's
shuffled-grid switch turned off from inside launch and back on before it returns."""
import sys

import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}


@triton.jit
def _chained(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    if pid == 0:
        y = x * 2 + 1
    else:
        prev = offs - BLOCK
        y_prev = tl.load(y_ptr + prev).to(tl.float32)
        x_prev = tl.load(x_ptr + prev).to(tl.float32)
        y = y_prev - 2 * x_prev + 2 * x
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, BLOCK=256, num_warps=4):
    switch = sys.modules["warpforge.evaluator.sandbox.child.grid"].GridOrder
    was, switch.shuffled = switch.shuffled, False
    y = torch.empty_like(x)
    _chained[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    switch.shuffled = was
    return y
