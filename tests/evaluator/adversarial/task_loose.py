"""A deliberately broken task: tolerances so loose that an all-zeros output passes (task lint must fail)."""

import torch

NAME = "double_loose"
DESCRIPTION = "y = 2x + 1 with tolerances of 1000% (broken on purpose)"
SHAPES = [{"N": 1 << 20}]
CHECK_SHAPES = [{"N": 97}, {"N": 1000}]
DTYPES = [torch.float32]
TOLERANCES = {torch.float32: (10.0, 10.0)}


def reference(x):
    return (x.float() * 2 + 1).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape["N"], generator=g).to(dtype).to(device),)


def flops(shape, dtype):
    return 2.0 * shape["N"]


def bytes_moved(shape, dtype):
    return 2.0 * shape["N"] * torch.finfo(dtype).bits // 8
