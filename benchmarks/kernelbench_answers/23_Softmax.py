import torch
import triton
import triton.language as tl

TASK = "23_Softmax"

SPACE = {"BLOCK": [1024, 4096], "num_warps": [4, 8]}


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        s = tl.where(m_new == float("-inf"), 0.0, s)
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(y_ptr + row * stride_y + cols, tl.exp(x - row_max) / total, mask=mask)


def launch(x, BLOCK=1024, num_warps=4):
    xc = x.contiguous()
    y = torch.empty_like(xc)
    _softmax_kernel[(xc.shape[0],)](xc, y, xc.shape[1], xc.stride(0), y.stride(0), BLOCK=BLOCK, num_warps=num_warps)
    return y
