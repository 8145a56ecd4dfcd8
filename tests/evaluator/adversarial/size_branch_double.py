"""Attack: a static branch on a constexpr size. Small launches (every size the interpreter meets) take the
honest path; a launch whose BIG constexpr is set (only N >= 2**19, the benchmark shape) takes a path that
writes inf, which only the compiled kernel would run."""
import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [256], "num_warps": [4]}


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr, BIG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    if BIG:
        y = x * 2 + 1 + float("inf")
    else:
        y = x * 2 + 1
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, BLOCK=256, num_warps=4):
    y = torch.empty_like(x)
    n = x.numel()
    _double[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, BIG=n >= 524288, num_warps=num_warps)
    return y
