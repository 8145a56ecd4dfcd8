"""Scaling by a Python number ``y = x * s``: ``x`` is an ``[M, N]`` tensor, ``s`` a float passed at every call
(KernelBench's 5_Matrix_scalar_multiplication calls ``forward(A, 3.14)``), so the templates take it as a
runtime kernel argument, never a compiled constant.

The product is taken in fp32 and rounded once to ``x``'s dtype, as torch does (its fp32 ``A * s`` multiplies
by ``s`` rounded to fp32: 3.14 is then 1e-8 relative off the float64 reference, far inside the fp32
tolerance). Memory-bound: ``x`` read once, ``y`` written once.

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import scale
    >>> x, s = scale.make_inputs({"M": 2, "N": 3}, torch.float32, seed=0, device="cpu")
    >>> scale.reference(x, s).shape, type(s).__name__
    (torch.Size([2, 3]), 'float')
"""

from __future__ import annotations

import random

import torch

NAME = "scale"
KIND = "elementwise"
DESCRIPTION = "y = x * s: x [M, N], s a Python float given at every call; fp32 product, output in x's dtype"

# KernelBench level 1's 65536 x 16384 fp32 (4 GiB in, 4 GiB out), an 8192-square and long rows.
SHAPES: list[dict[str, int]] = [
    {"M": 65536, "N": 16384},
    {"M": 8192, "N": 8192},
    {"M": 1024, "N": 65537},
]

# One element; primes and non-multiples of every block (<= 17k elements).
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "N": 1},
    {"M": 13, "N": 67},
    {"M": 3, "N": 1031},
    {"M": 130, "N": 127},
]

DTYPES: list[torch.dtype] = [torch.float32, torch.float16, torch.bfloat16]


def reference(x: torch.Tensor, s: float) -> torch.Tensor:
    return (x.to(torch.promote_types(x.dtype, torch.float32)) * s).to(x.dtype)


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, float]:
    # x ~ N(0, 1); s drawn per seed in +-[1.5, 3.5), negative on odd seeds, never 1 or 0 (which an identity or
    # a zero fill would pass), so a kernel with a constant factor fails the second seed. s comes from Python's
    # own generator: the compile stage draws inputs as fake tensors, whose values cannot be read.
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape["M"], shape["N"], generator=gen, dtype=torch.float32)
    s = (1.5 + 2.0 * random.Random(seed).random()) * (-1.0 if seed % 2 else 1.0)
    return x.to(dtype=dtype, device=device), s


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, float]]:
    """``large``: x times 1e3 with a factor of 3.5 (products near fp16's 65504 stay finite only when rounded once
    from fp32); ``tiny``: x times 1e-4 (a kernel that flushes small values to zero is off by its whole size)."""
    x, s = make_inputs(shape, torch.float32, seed, "cpu")
    limit = 3e3 if dtype == torch.float16 else 1e3  # 5 x 3e3 x 3.5 = 52,500 < 65,504
    sets = {"large": (x.clamp(-5, 5) * limit, 3.5), "tiny": (x * 1e-4, s)}
    return {name: (t.to(dtype=dtype, device=device), f) for name, (t, f) in sets.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    return float(shape["M"] * shape["N"])


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    return 2.0 * shape["M"] * shape["N"] * dtype.itemsize
