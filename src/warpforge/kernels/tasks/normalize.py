"""Normalization by a statistic over the middle dimension of an [M, R, N] tensor, one family:
``y = x / stat(x, dim=1)``, no weight.

The members are :data:`MEMBERS` rows: the L2 norm, the L1 norm (sum or mean of |x|) and the root mean square
plus eps (RMSNorm without a weight, eps 1e-5, 1e-6 or 1e-8). Through the matcher's reshapes
(evaluator/judge/match_adapters.py) a normalization over dim 1 of a 4-D tensor is [M, R, dim1 * dim2], over the
last dim of a 2-D tensor is [M, R, 1], and over the whole tensor (a Frobenius norm) is [1, R, 1]. The
templates select the member by the constants ``OP`` and ``EPS``.

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import normalize
    >>> (x,) = normalize.make_inputs({"M": 2, "R": 5, "N": 3}, torch.float32, seed=0, device="cpu")
    >>> normalize.reference(x).shape
    torch.Size([2, 5, 3])
"""

from __future__ import annotations

from collections.abc import Callable

import torch

NAME = "normalize"
KIND = "normalization"
DESCRIPTION = "y = x / stat(x over dim 1) of an [M, R, N] tensor: L2, L1 (sum or mean), RMS + eps; no weight."

# KernelBench's shapes: [112, 64, 512 * 512] (RMS over channels), [32768, 65535, 1] (a row norm).
SHAPES: list[dict[str, int]] = [
    {"M": 112, "R": 64, "N": 262144},
    {"M": 32768, "R": 65535, "N": 1},
    {"M": 4096, "R": 4096, "N": 1},
]

# Correctness-only (<= 17k elements): singletons, primes, R past every chunk size (1031) and N = 1.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "R": 1, "N": 1},
    {"M": 3, "R": 13, "N": 67},
    {"M": 2, "R": 1031, "N": 5},
    {"M": 13, "R": 67, "N": 1},
]

DTYPES: list[torch.dtype] = [torch.float32, torch.float16, torch.bfloat16]


def _stat(op: str, eps: float) -> Callable[[torch.Tensor], torch.Tensor]:
    stats: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "l2": lambda x: torch.linalg.vector_norm(x, 2, dim=1, keepdim=True),
        "l1": lambda x: torch.sum(torch.abs(x), dim=1, keepdim=True),
        "l1_mean": lambda x: torch.mean(torch.abs(x), dim=1, keepdim=True),
        "rms": lambda x: torch.sqrt(torch.mean(x * x, dim=1, keepdim=True) + eps),
    }
    return stats[op]


def _reference_of(op: str, eps: float) -> Callable[[torch.Tensor], torch.Tensor]:
    stat = _stat(op, eps)

    def reference(x: torch.Tensor) -> torch.Tensor:
        xf = x.to(torch.promote_types(x.dtype, torch.float32))
        return (xf / stat(xf)).to(x.dtype)

    return reference


_ROWS = [
    ("l2", "l2", 0.0),
    ("l1", "l1", 0.0),
    ("l1_mean", "l1_mean", 0.0),
    *[(f"rms({eps:g})", "rms", eps) for eps in (1e-5, 1e-6, 1e-8)],
]
MEMBERS = [(name, _reference_of(op, eps), {"OP": op, "EPS": eps}) for name, op, eps in _ROWS]
DEFAULT_MEMBER = "rms(1e-05)"
reference = next(ref for name, ref, _ in MEMBERS if name == DEFAULT_MEMBER)


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape["M"], shape["R"], shape["N"], generator=gen, dtype=torch.float32)
    return (x.to(dtype=dtype, device=device),)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor]]:
    """``large``: x * 1e3 (x^2 of 1e6 over a long R: a sum of squares in fp16 overflows at 65504);
    ``tiny``: x * 1e-3, where RMS's eps (1e-5 against a mean square of 1e-6) decides the result."""
    (x,) = make_inputs(shape, torch.float32, seed, "cpu")
    return {"large": ((x * 1e3).to(dtype=dtype, device=device),), "tiny": ((x * 1e-3).to(dtype=dtype, device=device),)}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # Square (or abs) and add per element for the statistic, one multiply per element for the output.
    return 3.0 * shape["M"] * shape["R"] * shape["N"]


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    return 2.0 * shape["M"] * shape["R"] * shape["N"] * dtype.itemsize
