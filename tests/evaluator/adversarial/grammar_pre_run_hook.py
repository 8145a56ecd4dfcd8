"""Attack: register a public pre-run hook on the kernel; the hook computes the answer with torch in
Triton's own launch path (where the operator recorder treats copies as the interpreter's)."""
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


def _hook(x, y, n, BLOCK):
    return None


def launch(x, BLOCK=256, num_warps=4):
    y = torch.empty_like(x)
    _double.add_pre_run_hook(_hook)
    _double[(1,)](x, y, 0, BLOCK=BLOCK, num_warps=num_warps)
    return y
