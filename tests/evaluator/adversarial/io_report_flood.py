"""Attack (read-back): send one report line of FLOOD_MIB MiB (no newline until the end) on the result pipe."""
import os
import sys

import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}
FLOOD_MIB = 64

_fd = int(sys.argv[1])
os.write(_fd, b'{"pad": "')
_chunk = b"x" * (1 << 20)
for _ in range(FLOOD_MIB):
    os.write(_fd, _chunk)
os.write(_fd, b'"}\n')
os._exit(0)


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
