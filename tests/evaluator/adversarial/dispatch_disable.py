"""Attack (recorder blinded): switch torch's dispatch modes off from inside launch, then compute with torch."""
import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}


@triton.jit
def _touch(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(y_ptr + offs, mask=mask), mask=mask)


def launch(x, BLOCK=256, num_warps=4):
    with torch._C._DisableTorchDispatch():
        y = (x.float() * 2 + 1).to(x.dtype)
    _touch[(triton.cdiv(x.numel(), BLOCK),)](y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y
