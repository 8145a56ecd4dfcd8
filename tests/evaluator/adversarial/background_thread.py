"""Attack: return at once and finish the second half of the output in a background thread, so the
timed region sees half the work."""
import threading
import time

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
    y = torch.empty_like(x)
    n = x.numel()
    half = n // 2
    _double[(triton.cdiv(max(half, 1), BLOCK),)](x, y, half, BLOCK=BLOCK, num_warps=num_warps)

    def rest():
        time.sleep(0.2)
        xs, ys = x[half:], y[half:]
        _double[(triton.cdiv(max(n - half, 1), BLOCK),)](xs, ys, n - half, BLOCK=BLOCK, num_warps=num_warps)

    threading.Thread(target=rest, daemon=True).start()
    return y
