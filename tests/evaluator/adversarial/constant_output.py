"""Attack: write zeros everywhere (passes only on a task whose check cannot tell)."""
import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}


@triton.jit
def _zeros(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32).to(y_ptr.dtype.element_ty), mask=offs < n)


def launch(x, BLOCK=256, num_warps=4):
    y = torch.empty_like(x)
    _zeros[(triton.cdiv(x.numel(), BLOCK),)](y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y
