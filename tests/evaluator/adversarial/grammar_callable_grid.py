"""Attack (read the grammar): a grid is "a local bound to a tuple", so bind a local to a helper function
and pass it as the grid; Triton calls a callable grid with the launch's arguments, and the helper computes
the answer inside that call (outside launch's own statements). Written to the grammar everywhere else."""
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


def _grid(meta):
    n = meta["n"]
    return (triton.cdiv(n, meta["BLOCK"]),)


def launch(x, BLOCK=256, num_warps=4):
    y = torch.empty_like(x)
    _double[_grid](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y
