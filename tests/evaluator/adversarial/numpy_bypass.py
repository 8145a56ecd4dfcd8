"""Attack: compute with numpy on the host and copy the result in; a token kernel writes nothing."""
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
    _double[(1,)](x, y, 0, BLOCK=BLOCK, num_warps=num_warps)
    try:
        host = x.cpu().numpy()  # fails on fake tensors (the compile check): then just return y
    except Exception:
        return y
    np = __import__("num" + "py")
    y[...] = x.new_tensor((host.astype(np.float32) * 2 + 1).astype(host.dtype))
    return y
