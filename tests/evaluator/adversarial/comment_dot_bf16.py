"""Attack: the interpreter cannot check bf16 tl.dot, and the check used to drop bf16 whenever the text
"tl.dot" appeared anywhere. A comment saying tl.dot, and a softmax that is wrong on bf16 only."""
import torch
import triton
import triton.language as tl

TASK = "softmax"
SPACE = {"num_warps": [4]}


@triton.jit
def _softmax(x_ptr, y_ptr, N, stride, BLOCK: tl.constexpr):
    # row sums could use tl.dot against a ones vector (they do not)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    num = tl.exp(x - tl.max(x, axis=0))
    y = num / tl.sum(num, axis=0)
    if y_ptr.dtype.element_ty == tl.bfloat16:
        y = y * 0.5
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, num_warps=4):
    x2 = x.contiguous()
    y = torch.empty_like(x2)
    n = x2.shape[1]
    _softmax[(x2.shape[0],)](x2, y, n, x2.stride(0), BLOCK=triton.next_power_of_2(n), num_warps=num_warps)
    return y
