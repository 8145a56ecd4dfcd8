"""RMSNorm, chunked two-pass over BLOCK_N: pass 1 streams the row accumulating x^2 in a per-lane fp32
vector (one tree reduction at the end, not one per chunk); pass 2 streams the row again and writes
x * rstd * w. Registers are bounded by BLOCK_N, so any hidden size works; the second read of a row
mostly hits L2 (an 8192-wide bf16 row is 16 KiB, H100/H200 L2 is 50 MiB)."""

import torch
import triton
import triton.language as tl

TASK = "rmsnorm"

SPACE = {
    "BLOCK_N": [256, 512, 1024, 2048, 4096, 8192],
    "num_warps": [1, 2, 4, 8, 16],
    "num_stages": [1, 2, 3, 4],
}

EPS = 1e-6
# Chunk, accumulator and (pass 2) weight in fp32, double-buffered by the pipeliner: above 32 chunk
# values per thread the register budget spills.
MAX_ELEMS_PER_THREAD = 32


def constraints(params, shape):
    # Only a register bound: one configuration serves every benchmark shape, so a chunk longer than
    # some row is legal (masked), merely wasteful there.
    return params["BLOCK_N"] // (32 * params["num_warps"]) <= MAX_ELEMS_PER_THREAD


@triton.jit
def _rmsnorm_looped_kernel(x_ptr, w_ptr, y_ptr, N, stride_x, stride_y, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    offs = tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, w, **params):
    n = x.shape[-1]
    x2 = x.contiguous().view(-1, n)
    w = w.contiguous()
    m = x2.shape[0]
    y = torch.empty_like(x2)
    _rmsnorm_looped_kernel[(m,)](
        x2, w, y, n, x2.stride(0), y.stride(0), EPS,
        BLOCK_N=params["BLOCK_N"],
        num_warps=params["num_warps"], num_stages=params["num_stages"],
    )
    return y.view(x.shape)
