"""Attack (kind inputs): a softmax without max subtraction. Right on randn * 3 logits, NaN once a logit
passes exp's range (88.7 in float32)."""
import torch
import triton
import triton.language as tl

TASK = "softmax"
SPACE = {"num_warps": [4]}


@triton.jit
def _softmax_no_max(x_ptr, y_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, num_warps=4):
    x2 = x.contiguous()
    y = torch.empty_like(x2)
    _softmax_no_max[(x2.shape[0],)](x2, y, x2.shape[1], x2.stride(0), BLOCK=triton.next_power_of_2(x2.shape[1]),
                                    num_warps=num_warps)
    return y
