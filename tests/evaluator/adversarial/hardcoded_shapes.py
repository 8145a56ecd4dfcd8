"""Attack: tail handling verified only for the published sizes; any other size loses its last element."""
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

KNOWN = {1, 97, 1000, 1 << 20}  # CHECK_SHAPES and SHAPES of the task


def launch(x, BLOCK=256, num_warps=4):
    y = torch.empty_like(x)
    n = x.numel() if x.numel() in KNOWN else x.numel() - 1
    _double[(triton.cdiv(max(n, 1), BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=num_warps)
    return y
