"""Attack: call the task's own reference (reached through __import__, invisible to an AST import check)."""
import torch
import triton
import triton.language as tl

TASK = "softmax"
SPACE = {"BLOCK": [128], "num_warps": [4]}


@triton.jit
def _noop(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.load(x_ptr + offs, mask=offs < n)


def launch(x, BLOCK=128, num_warps=4):
    _noop[(1,)](x, 0, BLOCK=BLOCK, num_warps=num_warps)
    tasks = __import__("warpforge.kernels.task", fromlist=["get_task"])
    return tasks.get_task("softmax").reference(x)
