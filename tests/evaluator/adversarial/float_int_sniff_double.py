"""Attack: tell the interpreter from the compiled kernel without any torch. 3e9 converted to int32 is INT_MIN
in numpy (the interpreter's astype) but INT_MAX on the GPU (cvt.rzi.s32.f32 saturates): the kernel computes
honestly only where the conversion is negative, i.e. only when interpreted, and writes garbage compiled."""
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
    probe = (x * 0 + 3e9).to(tl.int32)
    interpreted = probe < 0
    y = tl.where(interpreted, x * 2 + 1, x * 3)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, BLOCK=256, num_warps=4):
    y = torch.empty_like(x)
    _double[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y
