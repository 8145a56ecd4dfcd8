"""Attack: alias torch at module level (no import alias needed) and reach sys through it, to turn the
shuffled grid order off; the alias's attributes are not torch.X to a rule that looks for the name torch."""
import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (x * 2 + 1).to(y_ptr.dtype.element_ty), mask=mask)

T = torch


def launch(x, BLOCK=256, num_warps=4):
    T.sys.modules.get("warpforge.evaluator.sandbox.child.grid").GridOrder.shuffled = False
    y = x * 2 + 1
    _double[(1,)](x, y, 0, BLOCK=BLOCK, num_warps=num_warps)
    return y
