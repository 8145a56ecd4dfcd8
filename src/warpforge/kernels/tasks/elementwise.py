"""Unary elementwise operations on an [M, N] tensor, one family: ``y = op(x)`` for every op of :data:`OPS`.

The family's members are the rows of :data:`OPS` (activations, clamps, maps that KernelBench and model
code use), each with the module constants that select it in the family's templates (``OP``, ``OP_A``,
``OP_B``: the op's name and up to two scalar arguments such as LeakyReLU's slope). Adding an op is one
row here and one branch in the templates' ``_op``; tests/kernels/test_elementwise.py runs every row on
every template. ``reference`` is :data:`DEFAULT_MEMBER`, the op the shipped templates name.

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import elementwise
    >>> (x,) = elementwise.make_inputs({"M": 2, "N": 8}, torch.float32, seed=0, device="cpu")
    >>> [name for name, _, _ in elementwise.MEMBERS][:3]
    ['relu', 'leaky_relu(0.01)', 'leaky_relu(0.05)']
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

NAME = "elementwise"
KIND = "activation"
DESCRIPTION = "Unary elementwise op y = op(x) on an [M, N] tensor (one family: ReLU, GELU, SELU, Softplus, ...)."

# Memory-bound: 4096 x 16384 fp32 is 256 MiB in and out, past any L2; the 8192-square and the long-row
# shapes are KernelBench's and LLM activations' (M tokens x N hidden).
SHAPES: list[dict[str, int]] = [
    {"M": 4096, "N": 16384},
    {"M": 8192, "N": 8192},
    {"M": 1024, "N": 65537},
]

# Correctness-only: one element, primes and non-multiples of every block size (<= 17k elements each).
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "N": 1},
    {"M": 13, "N": 67},
    {"M": 3, "N": 1031},
    {"M": 130, "N": 127},
]

DTYPES: list[torch.dtype] = [torch.float32, torch.float16, torch.bfloat16]


# No plain exp: the judge's float64 reference of exp(300) is finite where every float32 kernel overflows.
# name -> (torch function of a float tensor, OP, OP_A, OP_B). Scalar arguments are the values models use;
# the matcher picks the row that agrees numerically, so a LeakyReLU with slope 0.3 is no match for 0.2.
_OPS: list[tuple[str, Callable[[torch.Tensor], torch.Tensor], str, float, float]] = [
    ("relu", torch.relu, "relu", 0.0, 0.0),
    *[
        (f"leaky_relu({s})", (lambda x, s=s: F.leaky_relu(x, s)), "leaky_relu", s, 0.0)
        for s in (0.01, 0.05, 0.1, 0.2, 0.3)
    ],
    ("sigmoid", torch.sigmoid, "sigmoid", 0.0, 0.0),
    ("tanh", torch.tanh, "tanh", 0.0, 0.0),
    ("gelu", F.gelu, "gelu", 0.0, 0.0),
    # F.gelu(x, approximate="tanh") as x * sigmoid(2u), the same function: torch's 0.5 * x * (1 + tanh(u))
    # cancels to exactly 0 in float64 below x ~ -7 (tanh(-19.25) rounds to -1), where the value is -1.4e-16
    # and a kernel that computes it was judged wrong against that 0 on a one-element check shape
    (
        "gelu_tanh",
        (lambda x: x * torch.sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x))),
        "gelu_tanh",
        0.0,
        0.0,
    ),
    ("selu", torch.selu, "selu", 0.0, 0.0),
    *[(f"elu({a})", (lambda x, a=a: F.elu(x, a)), "elu", a, 0.0) for a in (1.0, 0.5, 2.0)],
    ("hardsigmoid", F.hardsigmoid, "hardsigmoid", 0.0, 0.0),
    ("hardswish", F.hardswish, "hardswish", 0.0, 0.0),
    *[
        (f"hardtanh({lo},{hi})", (lambda x, lo=lo, hi=hi: F.hardtanh(x, lo, hi)), "hardtanh", lo, hi)
        for lo, hi in ((-1.0, 1.0), (0.0, 6.0))
    ],
    ("softplus", F.softplus, "softplus", 0.0, 0.0),
    ("softsign", F.softsign, "softsign", 0.0, 0.0),
    ("silu", F.silu, "silu", 0.0, 0.0),
    ("mish", F.mish, "mish", 0.0, 0.0),
    ("abs", torch.abs, "abs", 0.0, 0.0),
]


def _reference_of(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    def reference(x: torch.Tensor) -> torch.Tensor:
        return fn(x.to(torch.promote_types(x.dtype, torch.float32))).to(x.dtype)

    return reference


MEMBERS = [(name, _reference_of(fn), {"OP": op, "OP_A": a, "OP_B": b}) for name, fn, op, a, b in _OPS]
DEFAULT_MEMBER = "gelu"
reference = next(ref for name, ref, _ in MEMBERS if name == DEFAULT_MEMBER)


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor]:
    # Both signs and |x| up to ~10: every branch of every op (hardtanh's clamps at +-1 and 6 included).
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape["M"], shape["N"], generator=gen, dtype=torch.float32) * 3.0
    return (x.to(dtype=dtype, device=device),)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor]]:
    """``tiny``: |x| ~ 1e-4, where exp(x) - 1 and 1 - exp(-2x) cancel (an ELU or tanh written that way loses
    ~3e-4 relative); ``large``: |x| ~ 300, where exp overflows float32 (a softplus or sigmoid without the
    stable form gives inf or NaN)."""
    (x,) = make_inputs(shape, torch.float32, seed, "cpu")
    return {
        "tiny": ((x * 3e-5).to(dtype=dtype, device=device),),
        "large": ((x * 100.0).to(dtype=dtype, device=device),),
    }


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # A few operations per element whatever the op: the roofline is bandwidth.
    return 4.0 * shape["M"] * shape["N"]


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    return 2.0 * shape["M"] * shape["N"] * dtype.itemsize
