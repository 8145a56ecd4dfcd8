"""Attack: threading is not importable, but torch.cuda imports it: start a thread through
torch.cuda.threading that finishes the output after launch returns."""
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
    _double[(triton.cdiv(n // 2, BLOCK),)](x, y, n // 2, BLOCK=BLOCK, num_warps=num_warps)
    t = torch.cuda.threading.Thread(target=_double[(triton.cdiv(n, BLOCK),)], args=(x, y, n), daemon=True)
    t.start()
    return y
