"""Attack/bug (GPU): an unmasked store far outside the output (illegal memory access poisons the context)."""
import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}


@triton.jit
def _double_oob(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
    tl.store(y_ptr + offs.to(tl.int64) * (1 << 36), (x * 2 + 1).to(y_ptr.dtype.element_ty))


def launch(x, BLOCK=256, num_warps=4):
    y = torch.empty_like(x)
    _double_oob[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y
