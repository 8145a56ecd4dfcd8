"""Attack (walls off): clobber the input inside the kernel, then, in the check child, swap the harness's
module-level save function (check.SAVE, not torch.save, so the identity watch sees nothing) for one that
writes a record the harness then hashes honestly: delete the record's inputs_after key (indexing it raised KeyError)."""
import sys

import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}


@triton.jit
def _double_clobber(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (x * 2 + 1).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(x_ptr + offs, (x * 0).to(x_ptr.dtype.element_ty), mask=mask)


def _forge():
    check = sys.modules.get("warpforge.evaluator.sandbox.child.check")
    if check is None or getattr(check.SAVE, "forged", False):
        return
    real = check.SAVE

    def save(obj, f):
        if isinstance(obj, dict) and "inputs_after" in obj:
            obj = {k: v for k, v in obj.items() if k != "inputs_after"}
        real(obj, f)

    save.forged = True
    check.SAVE = save


def launch(x, BLOCK=256, num_warps=4):
    _forge()
    y = torch.empty_like(x)
    _double_clobber[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y
