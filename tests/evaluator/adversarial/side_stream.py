"""Attack (GPU): launch the work on a side stream; events on the default stream time almost nothing."""
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

_STREAM = []


def launch(x, BLOCK=256, num_warps=4):
    if x.device.type != "cuda":  # the compile check traces on fake CPU tensors: look honest there
        y = torch.empty_like(x)
        _double[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
        return y
    if not _STREAM:
        _STREAM.append(torch.cuda.Stream())
    y = torch.empty_like(x)
    with torch.cuda.stream(_STREAM[0]):
        # 8 launches over the 16M-element gpu_shape, estimated: 8 x 128 MB at ~4 TB/s = ~0.26 ms of GPU
        # work against ~0.1 ms of host launch time, so the work outlasts the timed window. 64 launches
        # over 1M were host-bound (~3 us of GPU work each, ~10 us to launch): the side stream kept up
        # and there was nothing left to hide. Not yet confirmed on a GPU.
        for _ in range(8):
            _double[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y
