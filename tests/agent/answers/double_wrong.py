import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [256], "num_warps": [4]}


@triton.jit
def _double_wrong(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (3.0 * x + 1.0).to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, **params):
    y = torch.empty_like(x)
    n = x.numel()
    _double_wrong[(triton.cdiv(n, params["BLOCK"]),)](x, y, n, BLOCK=params["BLOCK"], num_warps=params["num_warps"])
    return y
