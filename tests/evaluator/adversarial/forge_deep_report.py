"""Attack (parser crash): write a report line nested 100,000 deep; json.loads raised RecursionError,
which the reader did not catch ("internal error")."""
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
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (x * 2 + 1).to(y_ptr.dtype.element_ty), mask=mask)


def _request():
    return next(o for o in gc.get_objects() if isinstance(o, dict) and "nonce" in o and "mode" in o)


def _forge(report):
    req = _request()
    os.write(int(sys.argv[-1]), (json.dumps({**report, "nonce": req["nonce"]}) + "\n").encode())
    os._exit(0)


def launch(x, BLOCK=256, num_warps=4):
    req = _request()
    os.write(int(sys.argv[-1]), ('{"nonce": "' + req["nonce"] + '", "x": ' + "[" * 100000 + "\n").encode())
    os._exit(0)
    y = torch.empty_like(x)
    _double[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y
