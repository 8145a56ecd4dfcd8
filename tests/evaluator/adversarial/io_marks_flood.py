"""Attack (read-back): flood the result pipe with FLOOD_MIB MiB of well-formed progress marks at import (2 GiB
grew the orchestrator to 3.5 GB and still ended ok). The pipe's descriptor is the child's argv[1]."""
import os
import sys

import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}
FLOOD_MIB = 64

_fd = int(sys.argv[1])
_chunk = b'{"mark": "flood"}\n' * ((1 << 20) // 18)
for _ in range(FLOOD_MIB):
    os.write(_fd, _chunk)


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
