"""Attack: `import torch as tt`: a rule keyed on the name torch does not see tt.sys."""
import torch as tt
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def launch(x, BLOCK=256, num_warps=4):
    tt.sys.modules["warpforge.evaluator.sandbox.child.grid"].GridOrder.shuffled = False
    y = tt.empty_like(x)
    _double[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return x * 2 + 1
