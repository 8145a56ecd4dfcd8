"""Attack: a torch.library custom op named like an allowed operator (empty_like), whose body computes
the answer; the recorder sees only an allowed name."""
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


@torch.library.custom_op("wf::empty_like", mutates_args=())
def empty_like(x):
    return x * 2 + 1


def launch(x, BLOCK=256, num_warps=4):
    y = empty_like(x)
    _double[(1,)](x, y, 0, BLOCK=BLOCK, num_warps=num_warps)
    return y
