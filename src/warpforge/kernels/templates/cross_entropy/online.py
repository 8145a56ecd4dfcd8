"""Cross-entropy, one program per row: a single pass over the vocabulary in BLOCK_V chunks keeps an
online (running-max rescaled) sum of exponentials, then the target logit is gathered and
loss = max + log(sum) - logits[target]. Reads each logit exactly once; one exp per logit.

Training: ``launch_forward`` also stores each row's logsumexp (fp32 [M]), so ``launch_backward`` makes one
more pass per row, d logits = (exp(x - lse) - onehot(target)) * grad_loss[row], with no second reduction.
"""

import torch
import triton
import triton.language as tl

TASK = "cross_entropy"

SPACE = {
    "BLOCK_V": [1024, 2048, 4096, 8192, 16384, 32768],
    "num_warps": [4, 8, 16, 32],
    "num_stages": [1, 2, 3],
}


def constraints(params, shape):
    per_thread = params["BLOCK_V"] // (32 * params["num_warps"])
    return 2 <= per_thread <= 64


@triton.jit
def _ce_online_kernel(
    logits_ptr,
    targets_ptr,
    loss_ptr,
    lse_ptr,
    V,
    stride_row,
    stride_t,
    BLOCK_V: tl.constexpr,
    STORE_LSE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    row_ptr = logits_ptr + row * stride_row
    cols = tl.arange(0, BLOCK_V)
    # a finite floor instead of -inf keeps exp(m - m_new) defined before any real logit was seen
    m = tl.full((), -3.0e38, tl.float32)
    s = tl.full((), 0.0, tl.float32)
    for start in range(0, V, BLOCK_V):
        idx = start + cols
        x = tl.load(row_ptr + idx, mask=idx < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    target = tl.load(targets_ptr + row * stride_t)
    valid = (target >= 0) & (target < V)
    x_t = tl.load(row_ptr + target, mask=valid, other=float("nan")).to(tl.float32)
    lse = m + tl.log(s)
    tl.store(loss_ptr + row, lse - x_t)
    if STORE_LSE:  # the training forward keeps the statistic the backward needs
        tl.store(lse_ptr + row, lse)


def launch(logits, targets, **params):
    M, V = logits.shape
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    loss = torch.empty((M,), device=logits.device, dtype=torch.float32)
    _ce_online_kernel[(M,)](
        logits,
        targets,
        loss,
        loss,
        V,
        logits.stride(0),
        targets.stride(0),
        BLOCK_V=params["BLOCK_V"],
        STORE_LSE=False,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return loss


@triton.jit
def _ce_bwd_kernel(
    logits_ptr,
    targets_ptr,
    lse_ptr,
    dloss_ptr,
    dlogits_ptr,
    V,
    stride_row,
    stride_t,
    stride_d,
    stride_dl,
    BLOCK_V: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_V)
    lse = tl.load(lse_ptr + row)
    g = tl.load(dloss_ptr + row * stride_dl).to(tl.float32)
    target = tl.load(targets_ptr + row * stride_t)
    for start in range(0, V, BLOCK_V):
        idx = start + cols
        mask = idx < V
        x = tl.load(logits_ptr + row * stride_row + idx, mask=mask, other=0.0).to(tl.float32)
        p = tl.exp(x - lse) - tl.where(idx == target, 1.0, 0.0)
        tl.store(dlogits_ptr + row * stride_d + idx, (p * g).to(dlogits_ptr.dtype.element_ty), mask=mask)


def launch_forward(logits, targets, **params):
    M, V = logits.shape
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    loss = torch.empty((M,), device=logits.device, dtype=torch.float32)
    lse = torch.empty((M,), device=logits.device, dtype=torch.float32)
    _ce_online_kernel[(M,)](
        logits,
        targets,
        loss,
        lse,
        V,
        logits.stride(0),
        targets.stride(0),
        BLOCK_V=params["BLOCK_V"],
        STORE_LSE=True,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return loss, (lse,)


def launch_backward(grad_out, saved, logits, targets, **params):
    (lse,) = saved
    M, V = logits.shape
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    dlogits = torch.empty((M, V), device=logits.device, dtype=logits.dtype)
    _ce_bwd_kernel[(M,)](
        logits,
        targets,
        lse,
        grad_out,
        dlogits,
        V,
        logits.stride(0),
        targets.stride(0),
        dlogits.stride(0),
        grad_out.stride(0),
        BLOCK_V=params["BLOCK_V"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return (dlogits,)
