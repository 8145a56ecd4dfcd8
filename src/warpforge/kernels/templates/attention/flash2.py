"""FlashAttention-2: forward with an online softmax per BLOCK_M query rows (one program per query block
and query head), saving the logsumexp; backward in three kernels without atomics: delta = rowsum(dO * O),
dK/dV per BWD_BLOCK_N key block and KV head (looping over the query heads of its GQA group and the query
blocks), and dQ per BWD_BLOCK_M query block (looping over key blocks). P and dS are rounded to the input
dtype before their tensor-core products; every accumulator is fp32."""

import math

import torch
import triton
import triton.language as tl

TASK = "attention"

SPACE = {
    "BLOCK_M": [64, 128],
    "BLOCK_N": [32, 64, 128],
    "BWD_BLOCK_M": [16, 32, 64],
    "BWD_BLOCK_N": [32, 64, 128],
    "num_warps": [4, 8],
    "num_stages": [1, 2, 3],
}

LOG2E = 1.4426950408889634


def constraints(params, shape):
    d = triton.next_power_of_2(shape["D"])
    bm, bn, warps, stages = params["BLOCK_M"], params["BLOCK_N"], params["num_warps"], params["num_stages"]
    bbm, bbn = params["BWD_BLOCK_M"], params["BWD_BLOCK_N"]
    # forward: q tile resident, K and V tiles pipelined num_stages deep (2-byte dtypes)
    if (bm * d + 2 * stages * bn * d) * 2 > shape["SMEM_BYTES"]:
        return False
    # forward registers: fp32 accumulator (BLOCK_M x D) and score tile (BLOCK_M x BLOCK_N) per thread
    if (bm * d + bm * bn) // (32 * warps) > 192:
        return False
    # dK/dV: two fp32 accumulators and the resident K, V (BWD_BLOCK_N x D), the transposed scores
    if (2 * bbn * d + 2 * bbn * bbm) // (32 * warps) > 192:
        return False
    return (2 * bbn * d + 2 * stages * bbm * d) * 2 <= shape["SMEM_BYTES"]


@triton.jit
def _attn_fwd(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    lse_ptr,
    S,
    D,
    HQ,
    GROUP,
    qk_scale,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    kvh = (bh // HQ) * (HQ // GROUP) + (bh % HQ) // GROUP
    q_base = q_ptr + bh * S * D
    k_base = k_ptr + kvh * S * D
    v_base = v_ptr + kvh * S * D
    rows = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d[None, :] < D
    q = tl.load(q_base + rows[:, None] * D + offs_d[None, :], mask=(rows[:, None] < S) & d_ok, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    end = S
    if CAUSAL:
        end = tl.minimum(S, start_m + BLOCK_M)
    for start_n in range(0, end, BLOCK_N):
        cols = start_n + offs_n
        kv_mask = (cols[:, None] < S) & d_ok
        k = tl.load(k_base + cols[:, None] * D + offs_d[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale  # log2 units: exp2 below is exp of the scaled score
        valid = cols[None, :] < S
        if CAUSAL:
            valid = valid & (cols[None, :] <= rows[:, None])
        s = tl.where(valid, s, float("-inf"))
        # Column 0 of the first block is visible to every row, so m_new is finite from the first block on.
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + cols[:, None] * D + offs_d[None, :], mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(
        o_ptr + bh * S * D + rows[:, None] * D + offs_d[None, :],
        out.to(o_ptr.dtype.element_ty),
        mask=(rows[:, None] < S) & d_ok,
    )
    # natural-log logsumexp of the scaled scores, for the backward
    tl.store(lse_ptr + bh * S + rows, (m_i + tl.math.log2(l_i)) / 1.4426950408889634, mask=rows < S)


@triton.jit
def _attn_bwd_delta(o_ptr, do_ptr, delta_ptr, n_rows, D, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (rows[:, None] < n_rows) & (offs_d[None, :] < D)
    o = tl.load(o_ptr + rows[:, None] * D + offs_d[None, :], mask=mask, other=0.0).to(tl.float32)
    do = tl.load(do_ptr + rows[:, None] * D + offs_d[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(delta_ptr + rows, tl.sum(o * do, 1), mask=rows < n_rows)


@triton.jit
def _attn_bwd_dkdv(
    q_ptr,
    k_ptr,
    v_ptr,
    do_ptr,
    lse_ptr,
    delta_ptr,
    dk_ptr,
    dv_ptr,
    S,
    D,
    HQ,
    GROUP,
    sm_scale,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    start_n = tl.program_id(0) * BLOCK_N
    bkv = tl.program_id(1).to(tl.int64)
    hkv = HQ // GROUP
    b = bkv // hkv
    cols = start_n + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d[None, :] < D
    kv_off = bkv * S * D + cols[:, None] * D + offs_d[None, :]
    kv_mask = (cols[:, None] < S) & d_ok
    k = tl.load(k_ptr + kv_off, mask=kv_mask, other=0.0)
    v = tl.load(v_ptr + kv_off, mask=kv_mask, other=0.0)
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    first = 0
    if CAUSAL:
        first = (start_n // BLOCK_M) * BLOCK_M  # query rows above this key block see none of it
    for g in range(GROUP):
        bh = b * HQ + (bkv % hkv) * GROUP + g
        for start_m in range(first, S, BLOCK_M):
            rows = start_m + offs_m
            q_mask = (rows[:, None] < S) & d_ok
            q = tl.load(q_ptr + bh * S * D + rows[:, None] * D + offs_d[None, :], mask=q_mask, other=0.0)
            do = tl.load(do_ptr + bh * S * D + rows[:, None] * D + offs_d[None, :], mask=q_mask, other=0.0)
            lse = tl.load(lse_ptr + bh * S + rows, mask=rows < S, other=0.0)
            delta = tl.load(delta_ptr + bh * S + rows, mask=rows < S, other=0.0)
            s_t = tl.dot(k, tl.trans(q)) * (sm_scale * 1.4426950408889634)
            valid = rows[None, :] < S
            if CAUSAL:
                valid = valid & (cols[:, None] <= rows[None, :])
            p_t = tl.where(valid, tl.math.exp2(s_t - lse[None, :] * 1.4426950408889634), 0.0)
            dv += tl.dot(p_t.to(do.dtype), do)
            dp_t = tl.dot(v, tl.trans(do))
            ds_t = p_t * (dp_t - delta[None, :])
            dk += tl.dot(ds_t.to(q.dtype), q)
    tl.store(dk_ptr + kv_off, (dk * sm_scale).to(dk_ptr.dtype.element_ty), mask=kv_mask)
    tl.store(dv_ptr + kv_off, dv.to(dv_ptr.dtype.element_ty), mask=kv_mask)


@triton.jit
def _attn_bwd_dq(
    q_ptr,
    k_ptr,
    v_ptr,
    do_ptr,
    lse_ptr,
    delta_ptr,
    dq_ptr,
    S,
    D,
    HQ,
    GROUP,
    sm_scale,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    kvh = (bh // HQ) * (HQ // GROUP) + (bh % HQ) // GROUP
    rows = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d[None, :] < D
    q_off = bh * S * D + rows[:, None] * D + offs_d[None, :]
    q_mask = (rows[:, None] < S) & d_ok
    q = tl.load(q_ptr + q_off, mask=q_mask, other=0.0)
    do = tl.load(do_ptr + q_off, mask=q_mask, other=0.0)
    lse = tl.load(lse_ptr + bh * S + rows, mask=rows < S, other=0.0)
    delta = tl.load(delta_ptr + bh * S + rows, mask=rows < S, other=0.0)
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    end = S
    if CAUSAL:
        end = tl.minimum(S, start_m + BLOCK_M)
    for start_n in range(0, end, BLOCK_N):
        cols = start_n + offs_n
        kv_mask = (cols[:, None] < S) & d_ok
        k = tl.load(k_ptr + kvh * S * D + cols[:, None] * D + offs_d[None, :], mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + kvh * S * D + cols[:, None] * D + offs_d[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * (sm_scale * 1.4426950408889634)
        valid = (cols[None, :] < S) & (rows[:, None] < S)
        if CAUSAL:
            valid = valid & (cols[None, :] <= rows[:, None])
        p = tl.where(valid, tl.math.exp2(s - lse[:, None] * 1.4426950408889634), 0.0)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)
    tl.store(dq_ptr + q_off, (dq * sm_scale).to(dq_ptr.dtype.element_ty), mask=q_mask)


def launch(q, k, v, *, causal=True, **params):
    b, hq, s, d = q.shape
    qc, kc, vc = q.contiguous(), k.contiguous(), v.contiguous()
    out = torch.empty_like(qc)
    lse = torch.empty((b, hq, s), device=q.device, dtype=torch.float32)
    grid = (triton.cdiv(s, params["BLOCK_M"]), b * hq)
    _attn_fwd[grid](
        qc,
        kc,
        vc,
        out,
        lse,
        s,
        d,
        hq,
        hq // k.shape[1],
        LOG2E / math.sqrt(d),
        CAUSAL=causal,
        BLOCK_M=params["BLOCK_M"],
        BLOCK_N=params["BLOCK_N"],
        BLOCK_D=triton.next_power_of_2(d),
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return out


def launch_forward(q, k, v, *, causal=True, **params):
    b, hq, s, d = q.shape
    qc, kc, vc = q.contiguous(), k.contiguous(), v.contiguous()
    out = torch.empty_like(qc)
    lse = torch.empty((b, hq, s), device=q.device, dtype=torch.float32)
    grid = (triton.cdiv(s, params["BLOCK_M"]), b * hq)
    _attn_fwd[grid](
        qc,
        kc,
        vc,
        out,
        lse,
        s,
        d,
        hq,
        hq // k.shape[1],
        LOG2E / math.sqrt(d),
        CAUSAL=causal,
        BLOCK_M=params["BLOCK_M"],
        BLOCK_N=params["BLOCK_N"],
        BLOCK_D=triton.next_power_of_2(d),
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return out, (out, lse)


def launch_backward(grad_out, saved, q, k, v, *, causal=True, **params):
    out, lse = saved
    b, hq, s, d = q.shape
    hkv = k.shape[1]
    qc, kc, vc, do = q.contiguous(), k.contiguous(), v.contiguous(), grad_out.contiguous()
    block_d = triton.next_power_of_2(d)
    delta = torch.empty((b, hq, s), device=q.device, dtype=torch.float32)
    _attn_bwd_delta[(triton.cdiv(b * hq * s, 64),)](
        out, do, delta, b * hq * s, d, BLOCK_M=64, BLOCK_D=block_d, num_warps=4
    )
    dq = torch.empty_like(qc)
    dk = torch.empty_like(kc)
    dv = torch.empty_like(vc)
    sm_scale = 1.0 / math.sqrt(d)
    bbm, bbn = params["BWD_BLOCK_M"], params["BWD_BLOCK_N"]
    _attn_bwd_dkdv[(triton.cdiv(s, bbn), b * hkv)](
        qc,
        kc,
        vc,
        do,
        lse,
        delta,
        dk,
        dv,
        s,
        d,
        hq,
        hq // hkv,
        sm_scale,
        CAUSAL=causal,
        BLOCK_M=bbm,
        BLOCK_N=bbn,
        BLOCK_D=block_d,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    # dQ tiles its query rows by BWD_BLOCK_N and its key loop by BWD_BLOCK_M: the transposed roles of dK/dV
    _attn_bwd_dq[(triton.cdiv(s, bbn), b * hq)](
        qc,
        kc,
        vc,
        do,
        lse,
        delta,
        dq,
        s,
        d,
        hq,
        hq // hkv,
        sm_scale,
        CAUSAL=causal,
        BLOCK_M=bbn,
        BLOCK_N=bbm,
        BLOCK_D=block_d,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return dq, dk, dv
