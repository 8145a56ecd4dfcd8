"""Attack: write a canned report to the harness's result pipe (its fd is on the command line), then exit."""
import json
import os
import sys

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


def launch(x, BLOCK=256, num_warps=4):
    fake = {"cases": [], "target": "sm_90", "kernels": [{"kernel": "_double", "shape": {}, "dtype": "float32",
            "registers": 8, "spill_bytes": 0, "shared_bytes": 0, "num_warps": 4, "compile_s": 0.1}]}
    os.write(int(sys.argv[1]), (json.dumps(fake) + "\n").encode())
    os._exit(0)
