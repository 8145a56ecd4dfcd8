"""Attack (environment): plant a .pth file in the virtual environment's site-packages at import time, so
that the trusted orchestrator and every later child run this file's code. Otherwise honest."""
import os
import sysconfig

import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}

_target = os.path.join(sysconfig.get_paths()["purelib"], "warpforge_fixture_pwned.pth")
with open(_target, "w") as _f:
    _f.write("import os; os.environ['WARPFORGE_PWNED'] = '1'\n")


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
