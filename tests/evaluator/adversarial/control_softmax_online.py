"""Honest control (custom reduction): an online softmax that walks each row in chunks, carrying a running
max and a rescaled running sum, then writes in a second pass; masked (-inf) elements are handled."""
import torch
import triton
import triton.language as tl

TASK = "softmax"
SPACE = {"BLOCK": [256, 1024], "num_warps": [4]}


@triton.jit
def _online_softmax(x_ptr, y_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - safe) + tl.exp(x - safe)
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - row_max) / total
        tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=cols < N)


def launch(x, BLOCK=256, num_warps=4):
    x2 = x.contiguous()
    y = torch.empty_like(x2)
    _online_softmax[(x2.shape[0],)](x2, y, x2.shape[1], x2.stride(0), BLOCK=BLOCK, num_warps=num_warps)
    return y
