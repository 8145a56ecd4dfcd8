"""Attack (recorder blind spot): torch computes the answer in a second thread, joined inside launch, where
a thread-local dispatch mode does not see it; a kernel is launched too, so launch is not kernel-free."""
import threading

import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}


@triton.jit
def _touch(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, y, mask=mask)


def launch(x, BLOCK=256, num_warps=4):
    out = {}
    worker = threading.Thread(target=lambda: out.update(y=(x.float() * 2 + 1).to(x.dtype)))
    worker.start()
    worker.join()
    y = out["y"]
    _touch[(triton.cdiv(x.numel(), BLOCK),)](y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y
