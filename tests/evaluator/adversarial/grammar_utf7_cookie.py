# coding: utf-7
"""Attack: the grammar checks this file as UTF-8, where a line of launch ends in a comment; Python runs
it as UTF-7, where that comment holds a newline and a hidden statement (torch computes the answer)."""
import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK) - (-tl.program_id(0) * BLOCK)
    mask = offs < n
    x = tl.load(x_ptr - (-offs), mask=mask).to(tl.float32)
    tl.store(y_ptr - (-offs), (x * 2 - -1).to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, BLOCK=256, num_warps=4):
    y = torch.empty_like(x)  # +AAo-    return x * 2 - -1
    _double[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y
