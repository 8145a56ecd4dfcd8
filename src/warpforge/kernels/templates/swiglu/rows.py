"""SwiGLU with a row decomposition: each program owns BLOCK_M whole rows and walks across the
columns in [BLOCK_M, BLOCK_N] tiles. Rows are addressed through their strides, so a and b may be
row-strided views (e.g. the gate and up halves of a fused [M, 2N] projection) without a copy.

Training: nothing is saved (the forward's saved tuple is empty); the backward walks the same tiles, reads
a, b and dout once and recomputes sigmoid(a), which costs less than writing and re-reading it:
da = dout * b * s * (1 + a * (1 - s)), db = dout * a * s with s = sigmoid(a).
"""

import torch
import triton
import triton.language as tl

TASK = "swiglu"

SPACE = {
    "BLOCK_M": [1, 2, 4, 8, 16],
    "BLOCK_N": [256, 512, 1024, 2048, 4096],
    "num_warps": [2, 4, 8, 16],
    "num_stages": [1, 2],
}


def constraints(params, shape):
    warps = params["num_warps"]
    per_thread = params["BLOCK_M"] * params["BLOCK_N"] // (32 * warps)
    # about 2 registers per element plus row pointers; a block of 32*warps threads may use at most
    # 65536 / (32*warps) registers each (sm_90 AOT: 16x2048 with 16 warps spills at the 128 cap)
    return 2 <= per_thread <= 64 and 2 * per_thread + 16 <= min(255, 65536 // (32 * warps))


@triton.jit
def _swiglu_rows_kernel(
    a_ptr,
    b_ptr,
    out_ptr,
    M,
    N,
    stride_am,
    stride_bm,
    stride_om,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    rows64 = rows.to(tl.int64)
    a_row = a_ptr + rows64[:, None] * stride_am
    b_row = b_ptr + rows64[:, None] * stride_bm
    o_row = out_ptr + rows64[:, None] * stride_om
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = row_mask[:, None] & (cols[None, :] < N)
        a = tl.load(a_row + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_row + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        out = a / (1.0 + tl.exp(-a)) * b
        tl.store(o_row + cols[None, :], out.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _swiglu_rows_bwd_kernel(
    dout_ptr,
    a_ptr,
    b_ptr,
    da_ptr,
    db_ptr,
    M,
    N,
    stride_dm,
    stride_am,
    stride_bm,
    stride_dam,
    stride_dbm,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    rows64 = rows.to(tl.int64)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = row_mask[:, None] & (cols[None, :] < N)
        dout = tl.load(dout_ptr + rows64[:, None] * stride_dm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        a = tl.load(a_ptr + rows64[:, None] * stride_am + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + rows64[:, None] * stride_bm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        # 1 / (1 + exp(-a)): exp(-a) overflows to inf for a < -88.7 in fp32 and s becomes 0, the right limit.
        s = 1.0 / (1.0 + tl.exp(-a))
        da = dout * b * s * (1.0 + a * (1.0 - s))
        db = dout * a * s
        tl.store(da_ptr + rows64[:, None] * stride_dam + cols[None, :], da.to(da_ptr.dtype.element_ty), mask=mask)
        tl.store(db_ptr + rows64[:, None] * stride_dbm + cols[None, :], db.to(db_ptr.dtype.element_ty), mask=mask)


def launch(a, b, **params):
    assert a.shape == b.shape, f"a {tuple(a.shape)} and b {tuple(b.shape)} differ"
    n = a.shape[-1]
    a2 = a.reshape(-1, n)
    b2 = b.reshape(-1, n)
    if a2.stride(-1) != 1:
        a2 = a2.contiguous()
    if b2.stride(-1) != 1:
        b2 = b2.contiguous()
    m = a2.shape[0]
    out = torch.empty((m, n), device=a.device, dtype=a.dtype)
    block_m = params["BLOCK_M"]
    _swiglu_rows_kernel[(triton.cdiv(m, block_m),)](
        a2,
        b2,
        out,
        m,
        n,
        a2.stride(0),
        b2.stride(0),
        out.stride(0),
        BLOCK_M=block_m,
        BLOCK_N=params["BLOCK_N"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return out.view(a.shape)


def launch_forward(a, b, **params):
    assert a.shape == b.shape, f"a {tuple(a.shape)} and b {tuple(b.shape)} differ"
    n = a.shape[-1]
    a2 = a.reshape(-1, n)
    b2 = b.reshape(-1, n)
    if a2.stride(-1) != 1:
        a2 = a2.contiguous()
    if b2.stride(-1) != 1:
        b2 = b2.contiguous()
    m = a2.shape[0]
    out = torch.empty((m, n), device=a.device, dtype=a.dtype)
    block_m = params["BLOCK_M"]
    _swiglu_rows_kernel[(triton.cdiv(m, block_m),)](
        a2,
        b2,
        out,
        m,
        n,
        a2.stride(0),
        b2.stride(0),
        out.stride(0),
        BLOCK_M=block_m,
        BLOCK_N=params["BLOCK_N"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return out.view(a.shape), ()


def launch_backward(grad_out, saved, a, b, **params):
    n = a.shape[-1]
    a2 = a.reshape(-1, n)
    b2 = b.reshape(-1, n)
    d2 = grad_out.reshape(-1, n)
    if a2.stride(-1) != 1:
        a2 = a2.contiguous()
    if b2.stride(-1) != 1:
        b2 = b2.contiguous()
    if d2.stride(-1) != 1:
        d2 = d2.contiguous()
    m = a2.shape[0]
    da = torch.empty((m, n), device=a.device, dtype=a.dtype)
    db = torch.empty((m, n), device=b.device, dtype=b.dtype)
    block_m = params["BLOCK_M"]
    _swiglu_rows_bwd_kernel[(triton.cdiv(m, block_m),)](
        d2,
        a2,
        b2,
        da,
        db,
        m,
        n,
        d2.stride(0),
        a2.stride(0),
        b2.stride(0),
        da.stride(0),
        db.stride(0),
        BLOCK_M=block_m,
        BLOCK_N=params["BLOCK_N"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return da.view(a.shape), db.view(b.shape)
