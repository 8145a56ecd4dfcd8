"""LayerNorm, chunked over BLOCK_N with a per-lane Welford accumulator: pass 1 streams the row once,
each lane keeping its own count, mean and M2 (sum of squared deviations), updated without
E[x^2] - E[x]^2 cancellation; the lanes are then merged with Chan's parallel formula
(M2 = sum(M2_i) + sum(n_i * (mean_i - mean)^2)). Pass 2 streams the row again and writes
(x - mean) * rstd * w + b. Registers are bounded by BLOCK_N, so any hidden size works; the second read
of a row mostly hits L2 (an 8192-wide bf16 row is 16 KiB, H100/H200 L2 is 50 MiB)."""

import torch
import triton
import triton.language as tl

TASK = "layernorm"

SPACE = {
    "BLOCK_N": [256, 512, 1024, 2048, 4096, 8192],
    "num_warps": [1, 2, 4, 8, 16],
    "num_stages": [1, 2, 3, 4],
}

EPS = 1e-5
# Chunk plus three fp32 Welford accumulators, double-buffered by the pipeliner: above 32 chunk values
# per thread the register budget spills.
MAX_ELEMS_PER_THREAD = 32


def constraints(params, shape):
    # Only a register bound: one configuration serves every benchmark shape, so a chunk longer than
    # some row is legal (masked), merely wasteful there.
    return params["BLOCK_N"] // (32 * params["num_warps"]) <= MAX_ELEMS_PER_THREAD


@triton.jit
def _layernorm_welford_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    N,
    stride_x,
    stride_y,
    eps,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    offs = tl.arange(0, BLOCK_N)
    count = tl.zeros([BLOCK_N], dtype=tl.float32)
    mean_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    m2_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    # Statistics of the row shifted by its first element: a constant row is then exactly 0 (torch's output;
    # the lanes' merge of unshifted means left it ~6e-5 off), and rows far from 0 keep their precision.
    shift = tl.load(x_row).to(tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32) - shift
        count += tl.where(mask, 1.0, 0.0)
        delta = tl.where(mask, x - mean_acc, 0.0)
        mean_acc += delta / tl.maximum(count, 1.0)
        m2_acc += delta * (x - mean_acc)
    # Chan et al. merge of the per-lane statistics (lanes that saw no column have count 0).
    mean = tl.sum(count * mean_acc, axis=0) / N
    dev = mean_acc - mean
    m2 = tl.sum(m2_acc, axis=0) + tl.sum(count * dev * dev, axis=0)
    rstd = 1.0 / tl.sqrt(m2 / N + eps)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32) - shift
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, w, b, **params):
    n = x.shape[-1]
    x2 = x.contiguous().view(-1, n)
    w = w.contiguous()
    b = b.contiguous()
    m = x2.shape[0]
    y = torch.empty_like(x2)
    _layernorm_welford_kernel[(m,)](
        x2,
        w,
        b,
        y,
        n,
        x2.stride(0),
        y.stride(0),
        EPS,
        BLOCK_N=params["BLOCK_N"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y.view(x.shape)
