"""Attack (host maths): compute the answer with numpy on the input's memory, then let a probe kernel copy it."""
import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def launch(x, BLOCK=256, num_warps=4):
    host = x.float().numpy() * 2 + 1
    staged = torch.empty_like(x)
    staged.copy_(torch.from_numpy(host))
    y = torch.empty_like(x)
    _copy[(triton.cdiv(x.numel(), BLOCK),)](staged, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y
