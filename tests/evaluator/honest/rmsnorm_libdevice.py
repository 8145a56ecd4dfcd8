"""RMSNorm in Liger-Kernel's style: `from triton.language.extra.libdevice import rsqrt`, an annotated constexpr
module constant, a jit helper with a return annotation, next_power_of_2 through a module alias."""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language.extra.libdevice import rsqrt

_CASTING_MODE_LLAMA: tl.constexpr = tl.constexpr(0)
next_power_of_2 = triton.next_power_of_2


@triton.jit
def _mean_square(x, n_cols) -> tl.tensor:
    return tl.sum(x * x, axis=0) / n_cols


@triton.jit
def _rms_norm_forward_kernel(
    Y_ptr, Y_row_stride, X_ptr, X_row_stride, W_ptr, n_cols, eps, casting_mode: tl.constexpr, BLOCK_SIZE: tl.constexpr
):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    X_row = tl.load(X_ptr + row_idx * X_row_stride + col_offsets, mask=mask, other=0)
    W_row = tl.load(W_ptr + col_offsets, mask=mask, other=0)
    if casting_mode == _CASTING_MODE_LLAMA:
        X_row = X_row.to(tl.float32)
    rstd = rsqrt(_mean_square(X_row, n_cols) + eps)
    Y_row = X_row * rstd * W_row
    tl.store(Y_ptr + row_idx * Y_row_stride + col_offsets, Y_row, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = 1e-6

    def forward(self, x):
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        _rms_norm_forward_kernel[(n_rows,)](
            y,
            y.stride(0),
            x,
            x.stride(0),
            self.weight,
            n_cols,
            self.eps,
            casting_mode=0,
            BLOCK_SIZE=next_power_of_2(n_cols),
            num_warps=4,
        )
        return y
