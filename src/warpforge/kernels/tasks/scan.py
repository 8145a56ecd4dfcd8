"""Scans (prefix sums and products) along the middle dimension of an [M, L, N] tensor, one family:
``y = cumop(x, dim=1)``, the output the input's shape and dtype.

The members are :data:`MEMBERS` rows: cumsum and cumprod, each inclusive or exclusive (the first output is
the identity, 0 or 1, and every later one combines the inputs strictly before it, as
``cat(zeros, cumsum(x[:, :-1]))``) and forward or reverse (``flip(cumsum(flip(x)))``: each output combines
its input and every later one). A scan over dim 1 of a 3-D tensor is this task directly; over the last dim
of a 2-D one it is M rows, L = the scanned size and N = 1 (the matcher's reshape, evaluator/judge/matching.py).
The templates select the member by the constants ``OP``, ``REVERSE`` and ``EXCLUSIVE``.

Half inputs accumulate in fp32 and are rounded once per output, as torch's CPU cumsum does for float16 (bit
for bit on a 2000-long row; its cumprod is within one fp16 ulp of that, where a product kept in fp16 is 0.075
off after 2000 factors near 1).

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import scan
    >>> x = torch.tensor([[[1.0], [2.0], [3.0]]])
    >>> scan.reference(x).flatten().tolist()
    [1.0, 3.0, 6.0]
    >>> [ref for name, ref, _ in scan.MEMBERS if name == "cumsum_exclusive"][0](x).flatten().tolist()
    [0.0, 1.0, 3.0]
"""

from __future__ import annotations

from collections.abc import Callable

import torch

NAME = "scan"
KIND = "reduction"
DESCRIPTION = (
    "y = cumop(x, dim=1) of an [M, L, N] tensor: cumsum and cumprod, inclusive or exclusive, forward or "
    "reverse; fp32 accumulation."
)

# KernelBench's 32768 rows of 32768 (level 1, problems 89-92: a last-dim scan of a 2-D tensor, N = 1) and a
# scan along the sequence of [B, S, hidden] (a causal running sum), where the scanned elements are N apart.
SHAPES: list[dict[str, int]] = [
    {"M": 32768, "L": 32768, "N": 1},
    {"M": 16, "L": 4096, "N": 4096},
    {"M": 4096, "L": 64, "N": 1024},
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

_OPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sum": lambda x: torch.cumsum(x, dim=1),
    "prod": lambda x: torch.cumprod(x, dim=1),
}
_IDENTITY = {"sum": 0.0, "prod": 1.0}


def _reference_of(op: str, reverse: bool, exclusive: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    def reference(x: torch.Tensor) -> torch.Tensor:
        v = x.to(torch.promote_types(x.dtype, torch.float32))
        if reverse:
            v = v.flip(1)
        if exclusive:
            # The identity first, then the inputs shifted by one (the last one combines into no output).
            first = torch.full_like(v[:, :1], _IDENTITY[op])
            v = torch.cat((first, v[:, :-1]), dim=1)
        y = _OPS[op](v)
        if reverse:
            y = y.flip(1)
        return y.to(x.dtype)

    return reference


def _member_name(op: str, reverse: bool, exclusive: bool) -> str:
    return f"cum{op}" + ("_reverse" if reverse else "") + ("_exclusive" if exclusive else "")


MEMBERS = [
    (_member_name(op, rev, exc), _reference_of(op, rev, exc), {"OP": op, "REVERSE": rev, "EXCLUSIVE": exc})
    for op in _OPS
    for rev in (False, True)
    for exc in (False, True)
]
DEFAULT_MEMBER = "cumsum"
reference = next(ref for name, ref, _ in MEMBERS if name == DEFAULT_MEMBER)


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor]:
    # Values near 1 in magnitude with both signs: a product of a thousand stays within float range
    # (|x| in [0.95, 1.05): the log of the running product is a walk of steps ~0.03, ~1 after 1031 of them),
    # and the signs make a running sum wander through zero.
    gen = torch.Generator().manual_seed(seed)
    mag = 0.95 + 0.1 * torch.rand(shape["M"], shape["L"], shape["N"], generator=gen)
    sign = torch.where(torch.rand(mag.shape, generator=gen) < 0.5, -1.0, 1.0)
    return ((mag * sign).to(dtype=dtype, device=device),)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor]]:
    """``third``: 1/3 + 1e-3 randn, whose running sum grows steadily: accumulated in fp16 each addition to a
    partial sum between 256 and 512 (spacing 0.25) rounds 0.333 to 0.25: 14 off after L = 1031, against an
    allowance of 2.2 there (a running product underflows to 0 in fp32 past L ~ 90, where the float64 one is below
    atol); ``zeros``: one input in ten exactly 0, so a running product must stay 0 after it whatever follows
    (exp(cumsum(log|x|)) with a sign count does not)."""
    gen = torch.Generator().manual_seed(seed + 1)
    size = (shape["M"], shape["L"], shape["N"])
    third = 1.0 / 3.0 + 1e-3 * torch.randn(size, generator=gen)
    (base,) = make_inputs(shape, torch.float32, seed + 2, "cpu")
    zeros = torch.where(torch.rand(size, generator=gen) < 0.1, 0.0, base)
    return {"third": (third.to(dtype=dtype, device=device),), "zeros": (zeros.to(dtype=dtype, device=device),)}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # One combine an element (a work-efficient scan does about two; the floor counts one).
    return float(shape["M"] * shape["L"] * shape["N"])


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # x read once, y (same shape and dtype) written once.
    return float(2 * shape["M"] * shape["L"] * shape["N"] * dtype.itemsize)
