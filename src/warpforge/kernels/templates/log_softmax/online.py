"""Log-softmax, online (looped) over BLOCK_N chunks: pass 1 streams the row once keeping a running max m
and a running sum d rescaled by exp(m_old - m_new) whenever the max grows; pass 2 streams the row again
and writes x - m - log(d) (never log of a rounded probability: exp(x - m) / d underflows to 0 past a
spread of 88 where the log-probability is still finite). Register use is bounded by BLOCK_N, so any row
length works; the second read of a row mostly hits L2 (a 32k fp32 row is 128 KiB, H100/H200 L2 is 50 MiB)."""

import torch
import triton
import triton.language as tl

TASK = "log_softmax"

SPACE = {
    "BLOCK_N": [512, 1024, 2048, 4096, 8192, 16384],
    "num_warps": [2, 4, 8, 16, 32],
    "num_stages": [1, 2, 3, 4],
}

# More than 64 fp32 chunk values per thread (with the loop's double buffering) spills registers.
MAX_ELEMS_PER_THREAD = 64


def constraints(params, shape):
    # Only a register bound: one configuration serves every benchmark shape, so a chunk longer than
    # some row is legal (masked), merely wasteful there.
    return params["BLOCK_N"] // (32 * params["num_warps"]) <= MAX_ELEMS_PER_THREAD


@triton.jit
def _log_softmax_online_kernel(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    offs = tl.arange(0, BLOCK_N)
    # Every chunk holds at least one real column, so its max is finite and m is finite after chunk 1;
    # exp(-inf - finite) = 0 makes the first rescale of d = 0 harmless.
    m = tl.full([], -float("inf"), tl.float32)
    d = tl.full([], 0.0, tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    log_d = tl.log(d)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        y = x - m - log_d
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, **params):
    n = x.shape[-1]
    x2 = x.contiguous().view(-1, n)
    m = x2.shape[0]
    y = torch.empty_like(x2)
    _log_softmax_online_kernel[(m,)](
        x2,
        y,
        n,
        x2.stride(0),
        y.stride(0),
        BLOCK_N=params["BLOCK_N"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y.view(x.shape)
