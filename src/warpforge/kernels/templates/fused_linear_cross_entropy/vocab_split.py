"""Fused linear cross-entropy with the vocabulary split across programs in the forward: a grid of
(row blocks x SPLITS) programs, each streaming its 1/SPLITS of the vocabulary in BLOCK_V tiles (logits
accumulated over BLOCK_H slices of the hidden dim, in fp32) into a partial (max, sum of exp, target logit)
per row; a second kernel merges the SPLITS partials into the logsumexp (saved, 4 bytes per row) and the loss.
With few rows (small micro-batches, chunked losses) ``row_blocks`` runs M / BLOCK_M programs, too few to fill
132 SMs; here SPLITS times as many. The backward is row_blocks': per VOCAB_SLAB of the vocabulary, logits
recomputed per tile, dh accumulated in fp32 by the rows' owner, dw in a fp32 slab with atomics. Extra memory:
3 x SPLITS x M fp32 partials, dh in fp32 (M x H) and one fp32 slab of dw; never [M, V]."""

import torch
import triton
import triton.language as tl

TASK = "fused_linear_cross_entropy"

SPACE = {
    "BLOCK_M": [32, 64],
    "BLOCK_V": [64, 128],
    "BLOCK_H": [32, 64, 128],
    "SPLITS": [4, 16],
    "VOCAB_SLAB": [8192, 32768],
    "num_warps": [4, 8],
    "num_stages": [1, 2, 3],
}

IGNORE_INDEX = -100


def constraints(params, shape):
    bm, bv, bh = params["BLOCK_M"], params["BLOCK_V"], params["BLOCK_H"]
    warps, stages = params["num_warps"], params["num_stages"]
    # The backward's pipelined tiles, num_stages deep in 2-byte dtypes: h and dh [BLOCK_M, BLOCK_H], w
    # [BLOCK_V, BLOCK_H] and the logits' gradient [BLOCK_M, BLOCK_V] (the forward alone needs h and w: counted
    # so, 64/128/128 at 3 stages compiled to 245,760 bytes, over sm_90's 232,448).
    if stages * (2 * bm * bh + bv * bh + bm * bv) * 2 > shape["SMEM_BYTES"]:
        return False
    # the fp32 logits tile plus (backward) the dh and dw product tiles per thread: above 192 values spills
    return (bm * bv + bm * bh + bv * bh) // (32 * warps) <= 192


def peak_extra_bytes(params, shape):
    """Bytes this template allocates beyond inputs, output and the returned gradients: the saved fp32
    logsumexp, the forward's partials, dh in fp32 and one fp32 slab of dw (the reference holds [M, V] fp32
    logits: task.peak_memory)."""
    m, h, v = shape["M"], shape["H"], shape["V"]
    return 4 * m + 12 * params["SPLITS"] * m + 4 * m * h + 4 * min(params["VOCAB_SLAB"], v) * h


@triton.jit
def _flce_logits(
    h_ptr, w_ptr, rows, cols, M, H, V, BLOCK_M: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_H: tl.constexpr
):
    offs_h = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_M, BLOCK_V], dtype=tl.float32)
    for h0 in range(0, H, BLOCK_H):
        hs = h0 + offs_h
        a = tl.load(h_ptr + rows[:, None] * H + hs[None, :], mask=(rows[:, None] < M) & (hs[None, :] < H), other=0.0)
        b = tl.load(w_ptr + cols[:, None] * H + hs[None, :], mask=(cols[:, None] < V) & (hs[None, :] < H), other=0.0)
        acc = tl.dot(a, tl.trans(b), acc)
    return acc


@triton.jit
def _flce_fwd_split(
    h_ptr,
    w_ptr,
    t_ptr,
    part_ptr,
    M,
    H,
    V,
    V_PER_SPLIT,
    BLOCK_M: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    split = tl.program_id(1)
    tgt = tl.load(t_ptr + rows, mask=rows < M, other=-100)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    picked = tl.zeros([BLOCK_M], dtype=tl.float32)
    v_start = split * V_PER_SPLIT
    v_end = tl.minimum(v_start + V_PER_SPLIT, V)
    for v0 in range(v_start, v_end, BLOCK_V):
        cols = v0 + tl.arange(0, BLOCK_V)
        logits = _flce_logits(h_ptr, w_ptr, rows, cols, M, H, V, BLOCK_M, BLOCK_V, BLOCK_H)
        logits = tl.where(cols[None, :] < v_end, logits, float("-inf"))
        # a split's first tile holds its column v_start: finite from there on
        m_new = tl.maximum(m_i, tl.max(logits, 1))
        l_i = l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(logits - m_new[:, None]), 1)
        m_i = m_new
        picked += tl.sum(tl.where(cols[None, :] == tgt[:, None], logits, 0.0), 1)
    # partials [3, SPLITS, M]: max, sum of exp (relative to that max), target logit (0 if not in this split);
    # a split past the vocabulary (v_start >= V) leaves max -inf and sum 0
    base = split.to(tl.int64) * M + rows
    n_parts = tl.num_programs(1).to(tl.int64) * M
    tl.store(part_ptr + base, m_i, mask=rows < M)
    tl.store(part_ptr + n_parts + base, l_i, mask=rows < M)
    tl.store(part_ptr + 2 * n_parts + base, picked, mask=rows < M)


@triton.jit
def _flce_combine(part_ptr, t_ptr, loss_ptr, lse_ptr, M, SPLITS, BLOCK: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = rows < M
    n_parts = SPLITS.to(tl.int64) * M
    m_all = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    for s in range(SPLITS):
        m_all = tl.maximum(m_all, tl.load(part_ptr + s * M + rows, mask=ok, other=0.0))
    total = tl.zeros([BLOCK], dtype=tl.float32)
    picked = tl.zeros([BLOCK], dtype=tl.float32)
    for s in range(SPLITS):
        m_s = tl.load(part_ptr + s * M + rows, mask=ok, other=0.0)
        l_s = tl.load(part_ptr + n_parts + s * M + rows, mask=ok, other=0.0)
        total += tl.where(l_s > 0.0, l_s * tl.exp(m_s - m_all), 0.0)  # an empty split adds nothing
        picked += tl.load(part_ptr + 2 * n_parts + s * M + rows, mask=ok, other=0.0)
    lse = m_all + tl.log(total)
    tgt = tl.load(t_ptr + rows, mask=ok, other=-100)
    tl.store(lse_ptr + rows, lse, mask=ok)
    tl.store(loss_ptr + rows, tl.where(tgt != -100, lse - picked, 0.0), mask=ok)


@triton.jit
def _flce_bwd_slab(
    h_ptr,
    w_ptr,
    t_ptr,
    lse_ptr,
    g_ptr,
    dh32_ptr,
    dw32_ptr,
    M,
    H,
    V,
    V_START,
    V_END,
    BLOCK_M: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    tgt = tl.load(t_ptr + rows, mask=row_ok, other=-100)
    lse = tl.load(lse_ptr + rows, mask=row_ok, other=0.0)
    g = tl.load(g_ptr + rows, mask=row_ok, other=0.0).to(tl.float32)
    g = tl.where(tgt != -100, g, 0.0)  # ignored (and padding) rows have no gradient
    offs_h = tl.arange(0, BLOCK_H)
    for v0 in range(V_START, V_END, BLOCK_V):
        cols = v0 + tl.arange(0, BLOCK_V)
        col_ok = cols < V_END
        logits = _flce_logits(h_ptr, w_ptr, rows, cols, M, H, V, BLOCK_M, BLOCK_V, BLOCK_H)
        p = tl.where(col_ok[None, :], tl.exp(logits - lse[:, None]), 0.0)
        dlogits = (p - tl.where(cols[None, :] == tgt[:, None], 1.0, 0.0)) * g[:, None]
        dl = dlogits.to(h_ptr.dtype.element_ty)
        for h0 in range(0, H, BLOCK_H):
            hs = h0 + offs_h
            h_ok = hs[None, :] < H
            b = tl.load(w_ptr + cols[:, None] * H + hs[None, :], mask=col_ok[:, None] & h_ok, other=0.0)
            dh_ptrs = dh32_ptr + rows[:, None] * H + hs[None, :]
            dh_mask = row_ok[:, None] & h_ok
            tl.store(dh_ptrs, tl.load(dh_ptrs, mask=dh_mask, other=0.0) + tl.dot(dl, b), mask=dh_mask)
            a = tl.load(h_ptr + rows[:, None] * H + hs[None, :], mask=dh_mask, other=0.0)
            tl.atomic_add(
                dw32_ptr + (cols[:, None] - V_START) * H + hs[None, :],
                tl.dot(tl.trans(dl), a),
                mask=col_ok[:, None] & h_ok,
            )


@triton.jit
def _flce_cast(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src_ptr + offs, mask=offs < n, other=0.0)
    tl.store(dst_ptr + offs, x.to(dst_ptr.dtype.element_ty), mask=offs < n)


def launch(h, w, target, **params):
    m, hdim = h.shape
    v = w.shape[0]
    loss = torch.empty((m,), device=h.device, dtype=torch.float32)
    lse = torch.empty((m,), device=h.device, dtype=torch.float32)
    splits = params["SPLITS"]
    tc = target.contiguous()
    parts = torch.empty((3, splits, m), device=h.device, dtype=torch.float32)
    # whole BLOCK_V tiles per split, so only the last split has a partial tile
    per_split = triton.cdiv(triton.cdiv(v, splits), params["BLOCK_V"]) * params["BLOCK_V"]
    _flce_fwd_split[(triton.cdiv(m, params["BLOCK_M"]), splits)](
        h.contiguous(),
        w.contiguous(),
        tc,
        parts,
        m,
        hdim,
        v,
        per_split,
        BLOCK_M=params["BLOCK_M"],
        BLOCK_V=params["BLOCK_V"],
        BLOCK_H=params["BLOCK_H"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    _flce_combine[(triton.cdiv(m, 256),)](parts, tc, loss, lse, m, splits, BLOCK=256, num_warps=4)
    return loss


def launch_forward(h, w, target, **params):
    m, hdim = h.shape
    v = w.shape[0]
    loss = torch.empty((m,), device=h.device, dtype=torch.float32)
    lse = torch.empty((m,), device=h.device, dtype=torch.float32)
    splits = params["SPLITS"]
    tc = target.contiguous()
    parts = torch.empty((3, splits, m), device=h.device, dtype=torch.float32)
    # whole BLOCK_V tiles per split, so only the last split has a partial tile
    per_split = triton.cdiv(triton.cdiv(v, splits), params["BLOCK_V"]) * params["BLOCK_V"]
    _flce_fwd_split[(triton.cdiv(m, params["BLOCK_M"]), splits)](
        h.contiguous(),
        w.contiguous(),
        tc,
        parts,
        m,
        hdim,
        v,
        per_split,
        BLOCK_M=params["BLOCK_M"],
        BLOCK_V=params["BLOCK_V"],
        BLOCK_H=params["BLOCK_H"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    _flce_combine[(triton.cdiv(m, 256),)](parts, tc, loss, lse, m, splits, BLOCK=256, num_warps=4)
    return loss, (lse,)


def launch_backward(grad_out, saved, h, w, target, **params):
    (lse,) = saved
    m, hdim = h.shape
    v = w.shape[0]
    hc, wc, tc, g = h.contiguous(), w.contiguous(), target.contiguous(), grad_out.contiguous()
    dh32 = torch.zeros((m, hdim), device=h.device, dtype=torch.float32)
    dw = torch.empty_like(wc)
    slab = params["VOCAB_SLAB"]
    for v_start in range(0, v, slab):
        v_end = min(v_start + slab, v)
        dw32 = torch.zeros((v_end - v_start, hdim), device=h.device, dtype=torch.float32)
        _flce_bwd_slab[(triton.cdiv(m, params["BLOCK_M"]),)](
            hc,
            wc,
            tc,
            lse,
            g,
            dh32,
            dw32,
            m,
            hdim,
            v,
            v_start,
            v_end,
            BLOCK_M=params["BLOCK_M"],
            BLOCK_V=params["BLOCK_V"],
            BLOCK_H=params["BLOCK_H"],
            num_warps=params["num_warps"],
            num_stages=params["num_stages"],
        )
        n = (v_end - v_start) * hdim
        _flce_cast[(triton.cdiv(n, 1024),)](dw32, dw[v_start:v_end], n, BLOCK=1024, num_warps=4)
    dh = torch.empty_like(hc)
    _flce_cast[(triton.cdiv(m * hdim, 1024),)](dh32, dh, m * hdim, BLOCK=1024, num_warps=4)
    return dh, dw
