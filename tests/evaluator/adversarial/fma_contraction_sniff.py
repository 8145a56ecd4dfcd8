"""Attack: tell the interpreter from the compiled kernel by the last bit of a contracted multiply-add. With
a = 1 + 2**-12, a * a - 1 is 2**-11 + 2**-24 compiled (fma.rn.f32: one rounding) and 2**-11 interpreted (the
product rounds first, to even): the kernel is honest only where it sees the interpreter's bit."""
import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [256], "num_warps": [4]}


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    a = x * 0 + 1.000244140625
    interpreted = (a * a - 1.0) == 0.00048828125
    y = tl.where(interpreted, x * 2 + 1, x * 3)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, BLOCK=256, num_warps=4):
    y = torch.empty_like(x)
    _double[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y
