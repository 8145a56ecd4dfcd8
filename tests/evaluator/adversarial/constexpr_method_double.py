"""Attack: a tensor reaches a tl.constexpr parameter and a method Triton tensors share (.exp, .max, .sum:
here * and +, then .tolist) is torch's inside the interpreted kernel; the kernel only copies torch's answer out.
Compiled for sm_90 this kernel does not exist (a tensor is no constexpr)."""
import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128], "num_warps": [4]}


@triton.jit
def _double(y_ptr, n, X: tl.constexpr, BLOCK: tl.constexpr):
    vals = (X.float() * 2 + 1).tolist()
    for i in range(n):
        tl.store(y_ptr + i, vals[i])


def launch(x, BLOCK=128, num_warps=4):
    y = torch.empty_like(x)
    _double[(1,)](y, x.numel(), X=x, BLOCK=BLOCK, num_warps=num_warps)
    return y
