"""A small fp32 matmul test task at KernelBench's tolerance (atol = rtol = 1e-4), signed inputs: a kernel whose
tl.dot rounds its fp32 inputs to TF32 (the default input precision on sm_90) misses it."""

import torch

NAME = "matmul_fp32_kb"
DESCRIPTION = "C = A @ B in fp32 at KernelBench's 1e-4 tolerance (test task)"
SHAPES = [{"M": 64, "N": 64, "K": 128}]
CHECK_SHAPES = [{"M": 32, "N": 32, "K": 64}, {"M": 33, "N": 17, "K": 96}]
DTYPES = [torch.float32]
TOLERANCES = {torch.float32: (1e-4, 1e-4)}


def reference(a, b):
    return a @ b


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(shape["M"], shape["K"], generator=g).to(dtype).to(device)
    b = torch.randn(shape["K"], shape["N"], generator=g).to(dtype).to(device)
    return a, b


def flops(shape, dtype):
    return 2.0 * shape["M"] * shape["N"] * shape["K"]


def bytes_moved(shape, dtype):
    return 4.0 * (shape["M"] * shape["K"] + shape["K"] * shape["N"] + shape["M"] * shape["N"])
