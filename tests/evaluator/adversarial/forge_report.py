"""Attack (forged report): find the request (nonce) through the garbage collector, write a report with it
to the result pipe named on the command line, and leave before the harness reports."""
import gc
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
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def launch(x, BLOCK=256, num_warps=4):
    nonce = next(o["nonce"] for o in gc.get_objects() if isinstance(o, dict) and "nonce" in o)
    os.write(int(sys.argv[-1]), (json.dumps({"nonce": nonce, "cases": []}) + "\n").encode())
    os._exit(0)
