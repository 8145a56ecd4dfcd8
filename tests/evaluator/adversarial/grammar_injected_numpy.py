"""Attack: Triton's interpreter injects numpy as np into the module's globals at launch; use it in host
code after the first launch to compute the answer on the host."""
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
    _double[(1,)](x, y, 0, BLOCK=BLOCK, num_warps=num_warps)
    host = np.asarray(x)  # a view of x's memory, reached through the injected global
    y = torch.full_like(x, 0) + host * 2 + 1
    return y
