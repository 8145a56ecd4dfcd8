"""Cross-entropy in two stages, splitting each row's vocabulary across several programs.

Stage 1: grid (M, splits); program (i, j) reduces vocabulary slice j of row i to a partial
(max, sum of exp(x - max)) in fp32 buffers [M, splits]. Stage 2: one program per ROWS rows merges
the partials (sum_j s_j * exp(m_j - m)), gathers the target logit and writes
loss = m + log(s) - logits[target]. With few rows and a 128k vocabulary this keeps every SM busy,
where one program per row would leave most of them idle.
"""

import torch
import triton
import triton.language as tl

TASK = "cross_entropy"

SPACE = {
    "NUM_SPLITS": [2, 4, 8, 16, 32, 64],
    "BLOCK_V": [1024, 2048, 4096, 8192],
    "num_warps": [4, 8, 16],
    "num_stages": [1, 2],
}

_COMBINE_ROWS = 32


def constraints(params, shape):
    per_thread = params["BLOCK_V"] // (32 * params["num_warps"])
    return 2 <= per_thread <= 64


@triton.jit
def _ce_partial_kernel(
    logits_ptr,
    pmax_ptr,
    psum_ptr,
    V,
    stride_row,
    slice_len,
    num_splits,
    BLOCK_V: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    row_ptr = logits_ptr + row * stride_row
    cols = tl.arange(0, BLOCK_V)
    v_start = split * slice_len
    v_end = tl.minimum(v_start + slice_len, V)
    m = tl.full((), -3.0e38, tl.float32)
    s = tl.full((), 0.0, tl.float32)
    for start in range(v_start, v_end, BLOCK_V):
        idx = start + cols
        x = tl.load(row_ptr + idx, mask=idx < v_end, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    tl.store(pmax_ptr + row * num_splits + split, m)
    tl.store(psum_ptr + row * num_splits + split, s)


@triton.jit
def _ce_combine_kernel(
    logits_ptr,
    targets_ptr,
    pmax_ptr,
    psum_ptr,
    loss_ptr,
    M,
    V,
    stride_row,
    stride_t,
    num_splits,
    ROWS: tl.constexpr,
    SPLITS_P2: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < M
    rows64 = rows.to(tl.int64)
    sp = tl.arange(0, SPLITS_P2)
    mask = row_mask[:, None] & (sp[None, :] < num_splits)
    offs = rows64[:, None] * num_splits + sp[None, :]
    pm = tl.load(pmax_ptr + offs, mask=mask, other=-3.0e38)
    ps = tl.load(psum_ptr + offs, mask=mask, other=0.0)
    m = tl.max(pm, axis=1)
    s = tl.sum(ps * tl.exp(pm - m[:, None]), axis=1)
    s = tl.where(row_mask, s, 1.0)  # rows past M: keep log() finite (they are not stored)
    target = tl.load(targets_ptr + rows64 * stride_t, mask=row_mask, other=0)
    valid = row_mask & (target >= 0) & (target < V)
    x_t = tl.load(logits_ptr + rows64 * stride_row + target, mask=valid, other=float("nan")).to(tl.float32)
    tl.store(loss_ptr + rows, m + tl.log(s) - x_t, mask=row_mask)


def launch(logits, targets, **params):
    M, V = logits.shape
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    block_v = params["BLOCK_V"]
    # each split covers a whole number of BLOCK_V chunks and no split is empty
    v_blocks = triton.cdiv(V, block_v)
    blocks_per_split = triton.cdiv(v_blocks, min(params["NUM_SPLITS"], v_blocks))
    slice_len = blocks_per_split * block_v
    splits = triton.cdiv(V, slice_len)
    pmax = torch.empty((M, splits), device=logits.device, dtype=torch.float32)
    psum = torch.empty((M, splits), device=logits.device, dtype=torch.float32)
    loss = torch.empty((M,), device=logits.device, dtype=torch.float32)
    _ce_partial_kernel[(M, splits)](
        logits,
        pmax,
        psum,
        V,
        logits.stride(0),
        slice_len,
        splits,
        BLOCK_V=block_v,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    _ce_combine_kernel[(triton.cdiv(M, _COMBINE_ROWS),)](
        logits,
        targets,
        pmax,
        psum,
        loss,
        M,
        V,
        logits.stride(0),
        targets.stride(0),
        splits,
        ROWS=_COMBINE_ROWS,
        SPLITS_P2=triton.next_power_of_2(splits),
        num_warps=4,
        num_stages=1,
    )
    return loss
