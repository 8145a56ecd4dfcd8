"""Binary elementwise operations, one family: ``y[i, j] = op(x[i, j], z[i % ZM, j % ZN])`` for every op of
:data:`MEMBERS`.

x is [M, N]; z is [ZM, ZN], and its rows and columns repeat over x's: ``ZM = M, ZN = N`` is the plain
elementwise op (a residual add ``x + f(x)``), ``ZM = 1`` adds one row to every row (a bias ``[1, N]``, or
``[N]`` read as one row), ``ZN = 1`` one value per row (a per-row scale ``[M, 1]``). Other sizes tile z over
x, which no model writes but which keeps the function defined at every shape the judge draws: its hidden
shapes change each key on its own (ZM = 13 with M = 11), and the templates must be right there too.

The family's members are the rows of :data:`_OPS`, each with the module constant ``OP`` that selects it in
the templates' ``_op``; adding an op is one row here and one branch there. ``reference`` is
:data:`DEFAULT_MEMBER`. Both inputs share one dtype; the output has it too, computed in fp32 (float64 for
the float64 reference) and rounded once, as torch computes half-precision elementwise ops on the CPU.

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import binary
    >>> x, z = binary.make_inputs({"M": 2, "N": 8, "ZM": 1, "ZN": 8}, torch.float32, seed=0, device="cpu")
    >>> tuple(z.shape), [name for name, _, _ in binary.MEMBERS][:3]
    ((1, 8), ['add', 'sub', 'mul'])
"""

from __future__ import annotations

from collections.abc import Callable

import torch

NAME = "binary"
KIND = "elementwise"
DESCRIPTION = (
    "Binary elementwise op y = op(x, z) on [M, N], z [ZM, ZN] same-shaped or broadcast along rows or "
    "columns (one family: add, sub, mul, div, maximum, minimum, x * sigmoid(z))."
)

# Memory-bound: 4096 x 16384 fp32 is 256 MiB per operand, past any L2; a residual add (same shapes), a bias
# row added to every row, a per-row value.
SHAPES: list[dict[str, int]] = [
    {"M": 4096, "N": 16384, "ZM": 4096, "ZN": 16384},
    {"M": 8192, "N": 8192, "ZM": 1, "ZN": 8192},
    {"M": 16384, "N": 4096, "ZM": 16384, "ZN": 1},
]

# Correctness-only: one element, primes and non-multiples of every block; each broadcast form once, and z
# tiled (4 of 12 rows, 5 of 35 columns) since hidden shapes draw such sizes anyway.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "N": 1, "ZM": 1, "ZN": 1},
    {"M": 13, "N": 67, "ZM": 13, "ZN": 67},
    {"M": 3, "N": 1031, "ZM": 1, "ZN": 1031},
    {"M": 130, "N": 127, "ZM": 130, "ZN": 1},
    {"M": 12, "N": 35, "ZM": 4, "ZN": 5},
]

DTYPES: list[torch.dtype] = [torch.float32, torch.float16, torch.bfloat16]


def tiled(z: torch.Tensor, m: int, n: int) -> torch.Tensor:
    """z's rows and columns repeated over [m, n] (row i is z's row i % ZM, column j its column j % ZN)."""
    # cut to at most [m, n] first, then repeat and slice: memory-speed copies of at most 4 m n elements. Two
    # index_selects cost ~0.18 s of CPU per [11, 16384] output, and matching KernelBench's 98_KLDivLoss calls this
    # 336 times: 62 s of CPU for that one problem's binary candidates, now 2 s.
    part = z[:m, :n]
    return part.repeat(-(-m // part.shape[0]), -(-n // part.shape[1]))[:m, :n]


# name -> (torch function of two float tensors of one shape, OP)
_OPS: list[tuple[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor], str]] = [
    ("add", torch.add, "add"),
    ("sub", torch.sub, "sub"),
    ("mul", torch.mul, "mul"),
    ("div", torch.div, "div"),
    ("maximum", torch.maximum, "maximum"),
    ("minimum", torch.minimum, "minimum"),
    ("mul_sigmoid", (lambda x, z: x * torch.sigmoid(z)), "mul_sigmoid"),
]


def _reference_of(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Callable[..., torch.Tensor]:
    def reference(x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        c = torch.promote_types(x.dtype, torch.float32)
        m, n = x.shape[0], x.shape[1]
        # z of x's shape, or a row or column of it: torch's own broadcasting, whose autograd (a patched
        # region's backward in a training step) is what the eager op's is; only a z that tiles x is indexed
        zc = z.to(c) if z.shape[0] in (1, m) and z.shape[1] in (1, n) else tiled(z.to(c), m, n)
        return fn(x.to(c), zc).to(x.dtype)

    return reference


MEMBERS = [(name, _reference_of(fn), {"OP": op}) for name, fn, op in _OPS]
DEFAULT_MEMBER = "add"
reference = next(ref for name, ref, _ in MEMBERS if name == DEFAULT_MEMBER)


def _draw(shape: dict[str, int], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape["M"], shape["N"], generator=gen, dtype=torch.float32) * 3.0
    # |z| in [0.5, 2.5], either sign: a denominator never near zero (x / 1e-7 is ~1e7 in float64 and inf in
    # fp16, a failure of the dtype, not of the kernel), and still crossing x (|x| ~ 3) often, so maximum and
    # minimum take both sides, and sigmoid(z) spans 0.08..0.92
    sign = torch.where(torch.rand(shape["ZM"], shape["ZN"], generator=gen) < 0.5, -1.0, 1.0)
    z = sign * (0.5 + 2.0 * torch.rand(shape["ZM"], shape["ZN"], generator=gen))
    return x, z


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    x, z = _draw(shape, seed)
    return x.to(dtype=dtype, device=device), z.to(dtype=dtype, device=device)


# The largest scale of both operands that keeps every member finite in the dtype: |x| <= ~15 and |z| <= 2.5
# on the check shapes, so x * z <= ~40 scaled by s^2; fp16's 65504 allows s = 16 (product <= ~10^4), fp32
# and bf16 (max ~3e38) s = 1e4.
_LARGE = {torch.float16: 16.0}


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """``ties``: x equal to its z in about half the elements (maximum and minimum must pick either, sub
    gives exact zeros, div exact ones: a kernel reading z at the wrong index is off there); ``large``: both
    scaled by 1e4 (16 in fp16), where sigmoid written as exp(z) / (1 + exp(z)) is inf / inf; ``tiny``: both
    by 1e-3, products near fp16's subnormals (the output is rounded once, as torch rounds)."""
    x, z = _draw(shape, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    same = torch.rand(x.shape, generator=gen) < 0.5
    ties = torch.where(same, tiled(z, shape["M"], shape["N"]), x)
    s = _LARGE.get(dtype, 1e4)
    cases = {"ties": (ties, z), "large": (x * s, z * s), "tiny": (x * 1e-3, z * 1e-3)}
    return {k: (a.to(dtype=dtype, device=device), b.to(dtype=dtype, device=device)) for k, (a, b) in cases.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # One operation per element (a few for x * sigmoid(z)): the roofline is bandwidth.
    return float(shape["M"] * shape["N"])


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # x read and y written once; z read once (a broadcast row or column stays in cache).
    return float((2 * shape["M"] * shape["N"] + shape["ZM"] * shape["ZN"]) * dtype.itemsize)
