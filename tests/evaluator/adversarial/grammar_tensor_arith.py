"""Attack (read the grammar): host arithmetic is allowed for shapes, so do the arithmetic on the tensor
itself (x * 2 + 1 is torch computing the answer), with a token kernel launch to look like a variant."""
import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}


@triton.jit
def _touch(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.load(x_ptr + offs, mask=offs < n)


def launch(x, BLOCK=256, num_warps=4):
    _touch[(1,)](x, 0, BLOCK=BLOCK, num_warps=num_warps)
    y = x.contiguous()
    return y * 2 + 1
