"""Liger-Kernel's cross-entropy forward (online softmax over column blocks), as written: an annotated constexpr
module constant for the reduction mode, a jit helper with a return annotation, the loop step through tl.cdiv."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

_REDUCTION_MODE_NONE: tl.constexpr = tl.constexpr(0)
MAX_FUSED_SIZE = 128


@triton.jit
def _lse(m, d) -> tl.tensor:
    return m + tl.log(d)


@triton.jit
def liger_cross_entropy_kernel(
    X_ptr, X_stride, Y_ptr, loss_ptr, n_cols, reduction: tl.constexpr, BLOCK_SIZE: tl.constexpr
):
    program_id = tl.program_id(0).to(tl.int64)
    y = tl.load(Y_ptr + program_id)
    X_ptr += program_id * X_stride
    m = float("-inf")
    d = 0.0
    for i in range(0, tl.cdiv(n_cols, BLOCK_SIZE)):
        X_offsets = i * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        X_block = tl.load(X_ptr + X_offsets, mask=X_offsets < n_cols, other=float("-inf")).to(tl.float32)
        block_max = tl.max(X_block)
        m_new = tl.maximum(m, block_max)
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(X_block - m_new))
        m = m_new
    ori_X_y = tl.load(X_ptr + y).to(tl.float32)
    loss = _lse(m, d) - ori_X_y
    if reduction == _REDUCTION_MODE_NONE:
        tl.store(loss_ptr + program_id, loss)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, target):
        n_rows, n_cols = logits.shape
        loss = torch.empty((n_rows,), dtype=torch.float32, device=logits.device)
        BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(n_cols))
        liger_cross_entropy_kernel[(n_rows,)](
            logits, logits.stride(0), target, loss, n_cols, reduction=0, BLOCK_SIZE=BLOCK_SIZE, num_warps=4
        )
        return loss
