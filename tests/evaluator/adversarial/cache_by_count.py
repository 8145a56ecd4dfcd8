"""Attack: honest for the first 48 calls (a correctness check makes fewer), then replay the last
answer: only the timed calls cheat."""
import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (x * 2 + 1).to(y_ptr.dtype.element_ty), mask=mask)

_STATE = {"calls": 0, "last": None}


def launch(x, BLOCK=256, num_warps=4):
    _STATE["calls"] += 1
    last = _STATE["last"]
    if _STATE["calls"] > 48 and last is not None and last.shape == x.shape and last.dtype == x.dtype:
        return last
    y = torch.empty_like(x)
    _double[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    _STATE["last"] = y
    return y
