"""Reductions over the middle dimension of an [M, R, N] tensor, one family: ``y = op(x, dim=1)``.

The members are :data:`MEMBERS` rows: sum, mean, max, min, prod (output in the input dtype) and argmax,
argmin (int64, the first index of the extreme, as torch), each with ``keepdim`` False ([M, N]) or True
([M, 1, N]). A reduction over dim 1 of a 3-D tensor is this task directly; over the last dim of a 2-D one
it is M rows, R = the reduced size and N = 1 (the matcher's reshape, evaluator/judge/matching.py). The templates
select the member by the constants ``OP`` and ``KEEPDIM``.

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import reduce
    >>> (x,) = reduce.make_inputs({"M": 2, "R": 5, "N": 3}, torch.float32, seed=0, device="cpu")
    >>> reduce.reference(x).shape
    torch.Size([2, 3])
"""

from __future__ import annotations

from collections.abc import Callable

import torch

NAME = "reduce"
KIND = "reduction"
DESCRIPTION = "y = op(x, dim=1) of an [M, R, N] tensor: sum, mean, max, min, prod, argmax, argmin (keepdim or not)."

# KernelBench's 128 x 4096 x 4095 and model shapes: a reduction over sequence (R) of [B, S, hidden].
SHAPES: list[dict[str, int]] = [
    {"M": 128, "R": 4096, "N": 4095},
    {"M": 16, "R": 8192, "N": 4096},
    {"M": 4096, "R": 64, "N": 1024},
]

# Correctness-only (<= 17k elements): singletons, primes, R past every chunk size (1031) and N = 1.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "R": 1, "N": 1},
    {"M": 3, "R": 13, "N": 67},
    {"M": 2, "R": 1031, "N": 5},
    {"M": 13, "R": 67, "N": 1},
]

DTYPES: list[torch.dtype] = [torch.float32, torch.float16, torch.bfloat16]

# fp32 sums of 1031 terms: the order of accumulation differs from torch's by ~sqrt(R) ulp of the partial sum.
TOLERANCES = {torch.float32: (1e-4, 1e-4)}


_VALUE_OPS: dict[str, Callable[[torch.Tensor, bool], torch.Tensor]] = {
    "sum": lambda x, k: torch.sum(x, dim=1, keepdim=k),
    "mean": lambda x, k: torch.mean(x, dim=1, keepdim=k),
    "max": lambda x, k: torch.amax(x, dim=1, keepdim=k),
    "min": lambda x, k: torch.amin(x, dim=1, keepdim=k),
    "prod": lambda x, k: torch.prod(x, dim=1, keepdim=k),
}
_INDEX_OPS: dict[str, Callable[[torch.Tensor, bool], torch.Tensor]] = {
    "argmax": lambda x, k: torch.argmax(x, dim=1, keepdim=k),
    "argmin": lambda x, k: torch.argmin(x, dim=1, keepdim=k),
}


def _reference_of(op: str, keepdim: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    def reference(x: torch.Tensor) -> torch.Tensor:
        if op in _INDEX_OPS:
            return _INDEX_OPS[op](x, keepdim)
        return _VALUE_OPS[op](x.to(torch.promote_types(x.dtype, torch.float32)), keepdim).to(x.dtype)

    return reference


MEMBERS = [
    (f"{op}{'_keepdim' if keep else ''}", _reference_of(op, keep), {"OP": op, "KEEPDIM": keep})
    for op in (*_VALUE_OPS, *_INDEX_OPS)
    for keep in (False, True)
]
DEFAULT_MEMBER = "sum"
reference = next(ref for name, ref, _ in MEMBERS if name == DEFAULT_MEMBER)


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor]:
    # Values near 1 in magnitude with both signs: a product of a thousand stays within float range
    # (|x| in [0.9, 1.1): 1.1^1031 ~ 1e42 overflows fp32 only past R ~ 930 at the bound, rare at random).
    gen = torch.Generator().manual_seed(seed)
    mag = 0.95 + 0.1 * torch.rand(shape["M"], shape["R"], shape["N"], generator=gen)
    sign = torch.where(torch.rand(mag.shape, generator=gen) < 0.5, -1.0, 1.0)
    return ((mag * sign).to(dtype=dtype, device=device),)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor]]:
    """``ties``: values from {-1, 0, 1} (argmax/argmin must return the first index of the extreme, max/min of
    all-equal columns the value); ``near_one``: 1 + 0.01 randn, whose sum over R = 1031 (about 1031, where
    the fp16 spacing is 1) loses every deviation when accumulated in fp16 (an offset of 1000 would be the
    sharper test, but its product overflows float32 where the float64 ground truth stays finite)."""
    gen = torch.Generator().manual_seed(seed + 1)
    size = (shape["M"], shape["R"], shape["N"])
    ties = torch.randint(-1, 2, size, generator=gen).float()
    near_one = 1.0 + 0.01 * torch.randn(size, generator=gen)
    return {"ties": (ties.to(dtype=dtype, device=device),), "near_one": (near_one.to(dtype=dtype, device=device),)}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    return float(shape["M"] * shape["R"] * shape["N"])


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # x read once; the output ([M, N], int64 for an index) written once.
    return float(shape["M"] * shape["N"] * (shape["R"] * dtype.itemsize + 8))
