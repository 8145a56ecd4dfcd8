"""A linear layer followed by a chain of elementwise steps, one fused kernel: ``y = chain(x @ w.T + b)``.

``x`` is [M, K], ``w`` is [N, K] (an ``nn.Linear`` weight), ``b`` is [N]; ``y`` is [M, N] in the inputs' dtype.
A step may also read ``p`` [N], a parameter per output column (``PARAM_OPS``: KernelBench 95's ``x +
self.add_value``); a problem without one is this task with ``p`` zero (:data:`FILL_INPUTS`), which a chain
without such a step never reads (the tiled and persistent templates load it only with ``PARAM_COLS``).
The chain is up to 6 steps, each an op of kernels/fx_chain.py ``STEP_OPS`` with up to two scalar arguments,
applied in order to the fp32 accumulator ``z = x @ w.T + b`` before the one rounding and store; a step may
read ``z`` itself besides the running value (a residual add ``y + z``). Steps of ``ROW_OPS`` see whole rows (a
reduction to one value per row, a softmax, a pooling of runs of k columns): only the `rows` template takes them,
through the constants ``RED_AT``, ``SOFTMAX_AT``, ``POOL_AT`` no other template has. The templates take the
chain as module constants ``OP1, A1, B1, ..., OP6, A6, B6`` (op name, arguments; ``"none"`` ends it), so one
template source serves every chain.

A family whose members are not only a table: :data:`MEMBERS` holds a few one-step chains (Linear + an
activation), and :func:`propose_members` builds the member a by-path problem computes by tracing its forward
(kernels/fx_chain.py; ``mul(2.0)>leaky_relu(0.1)`` for KernelBench's 12_Gemm_Multiply_LeakyReLU) with
:func:`member`; the numeric comparison decides, as for every member.

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import linear_chain
    >>> name, ref, constants = linear_chain.member((("mul", 2.0, 0.0), ("leaky_relu", 0.1, 0.0)))
    >>> name, constants["OP1"], constants["A2"], constants["OP3"]
    ('mul(2.0)>leaky_relu(0.1)', 'mul', 0.1, 'none')
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from warpforge.kernels.fx_chain import (
    MAX_STEPS,
    PARAM_OPS,
    REDUCE_OPS,
    Step,
    apply_steps,
    checked,
    step_constants,
    step_name,
)
from warpforge.kernels.taskdef import Member

NAME = "linear_chain"
KIND = "gemm"
DESCRIPTION = (
    "y = chain(x @ w.T + b, p): a linear layer (x [M, K], w [N, K], b [N]) and up to 6 elementwise steps "
    "(scale, shift, residual add, a per-column parameter p [N], ReLU, LeakyReLU, GELU, sigmoid, tanh, "
    "SiLU, Mish, clamp), a row "
    "reduction, softmax or 1-D pooling among them, fused into its epilogue; fp32 accumulation, output "
    "in the input dtype"
)

# KernelBench level 2's GEMM + activation problems (1024 x 8192 -> 8192 and 16384 x 4096 -> 4096) and an
# LLM FFN up-projection with its activation (4096 tokens, 4096 -> 14336).
SHAPES: list[dict[str, int]] = [
    {"M": 1024, "N": 8192, "K": 8192},
    {"M": 16384, "N": 4096, "K": 4096},
    {"M": 4096, "N": 14336, "K": 4096},
]

# Every dimension hits 1, a prime or a non-multiple of each tile size (16..256); all <= 130 so the Triton
# interpreter stays fast.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "N": 1, "K": 1},
    {"M": 17, "N": 31, "K": 67},
    {"M": 129, "N": 65, "K": 127},
    {"M": 67, "N": 3, "K": 129},
]

SMALL_SHAPES: list[dict[str, int]] = [{"M": 256, "N": 512, "K": 256}]

# fp32 first: KernelBench's problems run in fp32, which the templates multiply as tf32x3 (torch's fp32 GEMM is
# IEEE; plain TF32 is ~1e-3 off, 10x the fp32 tolerance).
DTYPES: list[torch.dtype] = [torch.float32, torch.float16, torch.bfloat16]

# A problem's Linear without bias (``x @ W.T``) is this task with b = 0; one without a per-column parameter, with
# a zero p that its chain never reads.
FILL_INPUTS = {2: 0.0, 3: 0.0}


# The `rows` template pools a column tile of BLOCK_N (>= 32) in registers, reshaped to [BLOCK_M, BLOCK_N / k, k]:
# k a power of two, at most half the widest tile (256).
MAX_POOL = 128


def _pool_kernel(k: float) -> int | None:
    """The pooling kernel as an int when the `rows` template can pool with it."""
    n = int(k)
    return n if n == k and 1 <= n <= MAX_POOL and n & (n - 1) == 0 else None


def member(steps: tuple[Step, ...]) -> tuple[str, Callable[..., torch.Tensor], dict[str, str | float | int]]:
    """The family member computing ``steps`` after the linear layer: (name, reference, template constants)."""
    steps = checked(steps)
    if any(op == "spatial_mean" for op, _, _ in steps):
        raise ValueError(f"a global average pooling follows a convolution, not a Linear's [M, N]: {steps}")
    param = any(op in PARAM_OPS for op, _, _ in steps)
    at = {
        kind: [i + 1 for i, (op, _, _) in enumerate(steps) if op in ops]
        for kind, ops in (
            ("RED_AT", REDUCE_OPS),
            ("SOFTMAX_AT", {"row_softmax"}),
            ("POOL_AT", {"row_pool_max", "row_pool_avg"}),
        )
    }
    first = min((i for spots in at.values() for i in spots), default=0)
    after = steps[first:] if first else ()
    if any(len(spots) > 1 for spots in at.values()) or any(op.endswith("_z") for op, _, _ in after):
        raise ValueError(
            f"a chain reduces, normalizes or pools its rows at most once each, and reads z only before: {steps}"
        )
    if at["SOFTMAX_AT"] and at["RED_AT"] or at["POOL_AT"] > (at["RED_AT"] or at["SOFTMAX_AT"] or [7]):
        raise ValueError(f"a chain pools before it reduces or normalizes its rows, and does not do both: {steps}")
    if param and first:
        raise ValueError(
            f"a chain reading the per-column parameter reduces, normalizes or pools no row (the "
            f"`rows` template, the only one that does, takes no parameter): {steps}"
        )
    if at["POOL_AT"] and _pool_kernel(steps[at["POOL_AT"][0] - 1][1]) is None:
        raise ValueError(f"a pooling's kernel is a power of two up to {MAX_POOL}: {steps}")
    reduce_at = at["RED_AT"]
    squeeze = bool(reduce_at) and steps[reduce_at[0] - 1][1] == 0.0

    def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        ct = torch.promote_types(x.dtype, torch.float32)
        z = F.linear(x.to(ct), w.to(ct), b.to(ct))
        y = apply_steps(z, steps, p.to(ct))
        return (y.squeeze(-1) if squeeze else y).to(x.dtype)

    constants: dict[str, str | float | int] = dict(step_constants(steps))
    for kind, spots in at.items():  # constants only the `rows` template has: the others cannot compute this member
        if spots:
            constants[kind] = spots[0]
    if param:  # a constant the `rows` template lacks: it is left out
        constants["PARAM_COLS"] = True
    return ">".join(step_name(s) for s in steps), reference, constants


# The table: Linear + one activation, matched on their numbers alone (a module fx cannot trace); any other
# chain is proposed by the matcher from the problem's own forward.
MEMBERS = [
    member(((op, a, b),))
    for op, a, b in (
        ("gelu", 0.0, 0.0),
        ("gelu_tanh", 0.0, 0.0),
        ("relu", 0.0, 0.0),
        ("silu", 0.0, 0.0),
        ("sigmoid", 0.0, 0.0),
        ("tanh", 0.0, 0.0),
        ("mish", 0.0, 0.0),
    )
]
DEFAULT_MEMBER = "gelu"
reference = next(ref for name, ref, _ in MEMBERS if name == DEFAULT_MEMBER)


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    m, n, k = shape["M"], shape["N"], shape["K"]
    gen = torch.Generator().manual_seed(seed)
    # x ~ N(0, 1), w ~ N(0, 1/K) and b ~ N(0, 0.5): z = x @ w.T + b is ~N(0, 1.1) for any K, so the chain's
    # steps see both signs and both sides of every clamp at +-1; a dropped bias is off by ~50% of z's RMS
    x = torch.randn(m, k, generator=gen, dtype=torch.float32)
    w = torch.randn(n, k, generator=gen, dtype=torch.float32) / math.sqrt(k)
    b = 0.5 * torch.randn(n, generator=gen, dtype=torch.float32)
    # p of either sign and 0.5 to 1.5 in size: a step adding it moves z by ~its RMS, one multiplying flips signs,
    # and one dividing by it stays finite
    p = (0.5 + torch.rand(n, generator=gen)) * torch.randn(n, generator=gen).sign()
    return tuple(t.to(dtype).to(device) for t in (x, w, b, p))


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """``large``: x and b times 100, z ~ +-100, where exp(-z) overflows fp32 (a sigmoid or softplus written
    without its stable form gives NaN); ``tiny``: times 1e-4, where tanh written as (1 - e^-2z) / (1 + e^-2z)
    cancels (~3e-4 relative)."""
    x, w, b, p = make_inputs(shape, torch.float32, seed, "cpu")
    sets = {"large": (x * 100.0, w, b * 100.0, p), "tiny": (x * 1e-4, w, b * 1e-4, p)}
    return {name: tuple(t.to(dtype=dtype, device=device) for t in inputs) for name, inputs in sets.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # the GEMM (a multiply and an add per term), the bias and a few operations per step and output
    m, n, k = shape["M"], shape["N"], shape["K"]
    return 2.0 * m * n * k + (1 + 4 * MAX_STEPS) * m * n


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # x, w, b and p read once, y written once: the chain costs no memory traffic, the point of fusing it
    m, n, k = shape["M"], shape["N"], shape["K"]
    size = torch.tensor([], dtype=dtype).element_size()
    return float((m * k + n * k + 2 * n + m * n) * size)


def propose_members(model: torch.nn.Module) -> list[Member]:
    """The member the model's forward reads as (kernels/fx_chain.py): one Linear and its steps; none otherwise."""
    from warpforge.kernels.fx_chain import chain_steps

    steps = chain_steps(model)
    return [] if steps is None else [Member(*member(steps))]
