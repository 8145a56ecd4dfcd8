"""Attack: a jit helper defined twice; the kernel's source (what the AOT stage compiles and hashes) calls
the name, and the name is bound at launch time to the second, wrong, definition."""
import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}


@triton.jit
def _f(x):
    return x * 2 + 1


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, _f(x).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _f(x):  # noqa: F811 - the attack
    return x * 2


def launch(x, BLOCK=256, num_warps=4):
    y = torch.empty_like(x)
    _double[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y
