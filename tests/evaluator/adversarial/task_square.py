"""A tiny training test task for the adversarial fixtures: y = x * x, dx = 2 x dy (fast in the interpreter)."""

import torch

NAME = "square"
DESCRIPTION = "y = x * x, elementwise, with its gradient (test task)"
SHAPES = [{"N": 1 << 20}]
CHECK_SHAPES = [{"N": 1}, {"N": 97}, {"N": 1000}]
DTYPES = [torch.float32]
GRAD_INPUTS = (0,)


def reference(x):
    xf = x.float()
    return (xf * xf).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape["N"], generator=g).to(dtype).to(device),)


def flops(shape, dtype):
    return 1.0 * shape["N"]


def bytes_moved(shape, dtype):
    return 2.0 * shape["N"] * torch.finfo(dtype).bits // 8
