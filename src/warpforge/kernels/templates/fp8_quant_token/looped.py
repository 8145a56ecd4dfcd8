"""Per-token FP8 quantisation, one row per program in two passes over BLOCK_H chunks: pass 1 keeps a per-lane
running amax (one reduction at the end), pass 2 re-reads the row (mostly from L2) and writes q. Registers are
bounded by BLOCK_H, so any hidden size fits."""

import torch
import triton
import triton.language as tl

TASK = "fp8_quant_token"

SPACE = {
    "BLOCK_H": [512, 1024, 2048, 4096],
    "num_warps": [1, 2, 4, 8],
    "num_stages": [1, 2, 3],
}


def constraints(params, shape):
    # chunk and running amax in fp32, double-buffered: above 32 values per thread spills
    return params["BLOCK_H"] // (32 * params["num_warps"]) <= 32


@triton.jit
def _quant_token_looped(x_ptr, q_ptr, s_ptr, H, BLOCK_H: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_H)
    amax = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, H, BLOCK_H):
        cols = start + offs
        x = tl.load(x_ptr + row * H + cols, mask=cols < H, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.abs(x))
    scale = tl.maximum(tl.max(amax, 0), 1e-4) / 448.0
    for start in range(0, H, BLOCK_H):
        cols = start + offs
        x = tl.load(x_ptr + row * H + cols, mask=cols < H, other=0.0).to(tl.float32)
        q = tl.clamp(x / scale, -448.0, 448.0)
        tl.store(q_ptr + row * H + cols, q.to(q_ptr.dtype.element_ty), mask=cols < H)
    tl.store(s_ptr + row, scale)


def launch(x, **params):
    m, h = x.shape
    xc = x.contiguous()
    q = torch.empty((m, h), device=x.device, dtype=torch.float8_e4m3fn)
    scales = torch.empty((m,), device=x.device, dtype=torch.float32)
    _quant_token_looped[(m,)](
        xc, q, scales, h, BLOCK_H=params["BLOCK_H"], num_warps=params["num_warps"], num_stages=params["num_stages"]
    )
    return q, scales
