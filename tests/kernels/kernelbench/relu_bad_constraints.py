import torch
import triton
import triton.language as tl

TASK = "relu"
SPACE = {"BLOCK": [256, 1024]}


def constraints(params, shape):
    return 1 // 0 == 0


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


def launch(x, BLOCK=1024):
    y = torch.empty_like(x)
    _relu[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK)
    return y
