"""The test task ``double`` (y = 2x + 1) with the smallest shapes: agent campaigns in the interpreter stay short."""

import torch

NAME = "double"
DESCRIPTION = "y = 2x + 1, elementwise (agent test task, tiny shapes)"
SHAPES = [{"N": 2048}]
CHECK_SHAPES = [{"N": 1}, {"N": 97}]
DTYPES = [torch.float32]


def reference(x):
    return (x.float() * 2 + 1).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape["N"], generator=g).to(dtype).to(device),)


def flops(shape, dtype):
    return 2.0 * shape["N"]


def bytes_moved(shape, dtype):
    return 2.0 * shape["N"] * torch.finfo(dtype).bits // 8
