import torch
import triton
import triton.language as tl

TASK = "19_ReLU"

SPACE = {"BLOCK": [512, 1024, 2048], "num_warps": [2, 4, 8]}


@triton.jit
def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


def launch(x, BLOCK=1024, num_warps=4):
    xc = x.contiguous()
    y = torch.empty_like(xc)
    n = xc.numel()
    _relu_kernel[(triton.cdiv(n, BLOCK),)](xc, y, n, BLOCK=BLOCK, num_warps=num_warps)
    return y
