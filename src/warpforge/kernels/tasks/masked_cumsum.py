"""Masked prefix sum along the middle dimension of an [M, L, N] tensor: ``y = cumsum(x * mask, dim=1)``, the
elements whose boolean ``mask`` is false counted as 0 (KernelBench's 93_masked_cumsum).

``x`` is floating, ``mask`` is ``torch.bool`` of the same shape; ``y`` has ``x``'s shape and dtype. As in the
``scan`` family (kernels/tasks/scan.py), a scan over the last dim of a 2-D tensor is M rows, L = the scanned
size and N = 1 through the matcher's reshape. Half inputs accumulate in fp32 and are rounded once per output.

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import masked_cumsum
    >>> x = torch.tensor([[[1.0], [2.0], [3.0]]])
    >>> mask = torch.tensor([[[True], [False], [True]]])
    >>> masked_cumsum.reference(x, mask).flatten().tolist()
    [1.0, 1.0, 4.0]
"""

from __future__ import annotations

import torch

NAME = "masked_cumsum"
KIND = "reduction"
DESCRIPTION = "y = cumsum(x * mask, dim=1) of an [M, L, N] tensor with a bool mask of its shape; fp32 accumulation."

# KernelBench's 32768 rows of 32768 (a last-dim scan of a 2-D tensor, N = 1) and a running masked sum along
# the sequence of [B, S, hidden] (padding tokens masked out).
SHAPES: list[dict[str, int]] = [
    {"M": 32768, "L": 32768, "N": 1},
    {"M": 16, "L": 4096, "N": 4096},
]

# Correctness-only (<= 17k elements): singletons, primes, L past every chunk size (1031) and N = 1.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "L": 1, "N": 1},
    {"M": 3, "L": 13, "N": 67},
    {"M": 2, "L": 1031, "N": 5},
    {"M": 13, "L": 67, "N": 1},
]

DTYPES: list[torch.dtype] = [torch.float32, torch.float16, torch.bfloat16]

# fp32 prefix sums of up to 1031 terms: a tree scan's order differs from torch's sequential one by ~sqrt(L)
# ulp of the partial sum, well inside 1e-4 of the output's RMS.
TOLERANCES = {torch.float32: (1e-4, 1e-4)}


def reference(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    ct = torch.promote_types(x.dtype, torch.float32)
    return torch.cumsum(x.to(ct) * mask, dim=1).to(x.dtype)


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    # x of both signs near magnitude 1 (a running sum that wanders through zero); the mask true with
    # probability 1/2, so a kernel that ignores it is off by O(sqrt(L)) and one that inverts it likewise.
    gen = torch.Generator().manual_seed(seed)
    size = (shape["M"], shape["L"], shape["N"])
    x = torch.randn(size, generator=gen, dtype=torch.float32)
    mask = torch.rand(size, generator=gen) < 0.5
    return x.to(dtype=dtype, device=device), mask.to(device)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """``none_kept``: the mask all false (the output exactly 0: a kernel that ignores the mask is off by the plain
    cumsum); ``all_kept``: all true; ``offset``: x + 10 with the mask kept (running sums grow to 10 L, where a
    half-precision carry drifts from the fp32 one)."""
    x, mask = make_inputs(shape, torch.float32, seed, "cpu")
    sets = {
        "none_kept": (x, torch.zeros_like(mask)),
        "all_kept": (x, torch.ones_like(mask)),
        "offset": (x + 10.0, mask),
    }
    return {name: (t.to(dtype=dtype, device=device), m.to(device)) for name, (t, m) in sets.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # One select and one add an element.
    return 2.0 * shape["M"] * shape["L"] * shape["N"]


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # x read once, the mask (one byte an element) read once, y written once.
    return float(shape["M"] * shape["L"] * shape["N"] * (2 * dtype.itemsize + 1))
