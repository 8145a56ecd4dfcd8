"""Attack (precompute at import): load every case's inputs from the scratch directory while being
imported, compute the answers then, and hand them back by content in launch (zeros when unknown)."""
import glob

import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}

_ANSWERS = {}
for _path in glob.glob("in_*.pt") + glob.glob("*/in_*.pt"):
    for _x in torch.load(_path):
        _ANSWERS[_x.numel()] = (_x.float() * 2 + 1).to(_x.dtype)


@triton.jit
def _zero(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32).to(y_ptr.dtype.element_ty), mask=offs < n)


def launch(x, BLOCK=256, num_warps=4):
    y = torch.empty_like(x)
    _zero[(triton.cdiv(x.numel(), BLOCK),)](y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    known = _ANSWERS.get(x.numel())
    return known if known is not None else y
