"""A linear layer, elementwise steps, a GroupNorm over the output's features, more steps; one fused kernel.

``y = post(group_norm(pre(x @ w.T + b), G) * gamma + beta)``: ``x`` is [M, K], ``w`` [N, K] (an ``nn.Linear``
weight), ``b``, ``gamma``, ``beta`` and ``p`` are [N]. Each output row of N features splits into G contiguous
groups of N / G; each (row, group) is normalized with its own mean and biased variance (``eps`` inside the
root), then scaled and shifted per feature by GroupNorm's affine ``gamma`` and ``beta``. ``pre`` and ``post``
are steps of kernels/fx_chain.py ``STEP_OPS`` (no row reductions) and ``PARAM_OPS`` (``y + p``, ``y * p``: a
per-feature parameter such as KernelBench's ``x + self.bias`` of [out_features]); a step after the norm reads no
``z``. Statistics and steps are fp32 (float64 for float64 inputs); the output is in x's dtype.

The templates take the chain as linear_chain's does (``OP1, A1, B1, ..., OP6, A6, B6``), the norm being the
step ``NORM_AT`` with the constants ``GROUPS`` and ``EPS``: the group count is the module's, read from it
at the probe (:func:`propose_members`); a problem's shapes keep it (kernels/kernelbench.py holds a size that
sizes no tensor at its file's value). A problem without a per-feature parameter, or without GroupNorm's
affine, is this task with them filled (:data:`FILL_INPUTS`).

Example::

    >>> from warpforge.kernels.tasks import linear_groupnorm
    >>> name, ref, constants = linear_groupnorm.member((("group_norm", 4, 1e-5), ("clamp", -2.0, 2.0)))
    >>> name, constants["NORM_AT"], constants["GROUPS"], constants["OP2"]
    ('group_norm(4,eps=1e-05)>clamp(-2.0,2.0)', 1, 4, 'clamp')
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from warpforge.kernels.fx_chain import MAX_STEPS, ROW_OPS, Step, apply_steps, checked, step_name
from warpforge.kernels.taskdef import Member

NAME = "linear_groupnorm"
KIND = "gemm"
DESCRIPTION = (
    "y = post(group_norm(pre(x @ w.T + b), G) * gamma + beta): a linear layer, elementwise steps "
    "(a per-feature parameter among them), a GroupNorm over G contiguous feature groups of each row "
    "and steps after it, fused; fp32 accumulation and statistics, output in the input dtype"
)

# KernelBench level 2's GEMM + GroupNorm problems: 1024 x 8192 -> 8192 (30, 62, 75, 88, 94) and
# 32768 x 1024 -> 4096 (37).
SHAPES: list[dict[str, int]] = [
    {"M": 1024, "N": 8192, "K": 8192},
    {"M": 32768, "N": 4096, "K": 1024},
]

# N a multiple of 16, the table's group count (as many as KernelBench's 30: at the benchmark shapes a group is
# 512 or 256 features, within the `grouped` template's tiles), with groups of 1, 7 and 13 features (not powers
# of two: the padded group lanes must stay out of the statistics); M and K hit 1 and primes.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "N": 16, "K": 1},
    {"M": 17, "N": 112, "K": 67},
    {"M": 67, "N": 208, "K": 129},
]

SMALL_SHAPES: list[dict[str, int]] = [{"M": 256, "N": 512, "K": 256}]

DTYPES: list[torch.dtype] = [torch.float32, torch.float16, torch.bfloat16]

# Without a per-feature parameter (input 5) the chain reads none; without GroupNorm's affine (inputs 3 and 4)
# the norm is scaled by 1 and shifted by 0, the values a GroupNorm is constructed with. The last inputs are left
# out first, so a problem passing (x, w, b, weight, bias) has its GroupNorm's affine where it belongs.
FILL_INPUTS = {3: 1.0, 4: 0.0, 5: 0.0}

NORM = "group_norm"


def _split(steps: tuple[Step, ...]) -> tuple[tuple[Step, ...], Step, tuple[Step, ...]]:
    """(the steps before the norm, the norm step, the steps after it); ValueError when no such chain."""
    at = [i for i, (op, _, _) in enumerate(steps) if op == NORM]
    if len(at) != 1 or not 1 <= len(steps) <= MAX_STEPS:
        raise ValueError(f"a chain of at most {MAX_STEPS} steps with one {NORM} step, got {steps}")
    pre, norm, post = steps[: at[0]], steps[at[0]], steps[at[0] + 1 :]
    for part in (pre, post):
        if part and (any(op in ROW_OPS or op == "spatial_mean" for op, _, _ in checked(part))):
            raise ValueError(f"no row reduction, softmax or pooling around the norm: {steps}")
    if any(op.endswith("_z") for op, _, _ in post):
        raise ValueError(f"a step after the norm reads no z (the GEMM's output): {steps}")
    groups, eps = norm[1], norm[2]
    if groups != int(groups) or groups < 1 or not eps > 0:
        raise ValueError(f"a group count >= 1 and eps > 0: {norm}")
    return pre, (NORM, float(int(groups)), float(eps)), post


def member(steps: tuple[Step, ...]) -> tuple[str, Callable[..., torch.Tensor], dict[str, str | float | int]]:
    """The family member computing ``steps`` (one ``("group_norm", groups, eps)`` among them) after the linear
    layer: (name, reference, template constants)."""
    pre, norm, post = _split(tuple((op, float(a), float(b)) for op, a, b in steps))
    groups, eps = int(norm[1]), norm[2]

    def reference(
        x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, p: torch.Tensor
    ) -> torch.Tensor:
        ct = torch.promote_types(x.dtype, torch.float32)
        z = F.linear(x.to(ct), w.to(ct), b.to(ct))
        y = apply_steps(z, pre, p.to(ct)) if pre else z
        # torch.group_norm: F.group_norm refuses a group of one value (torch agrees: its variance is 0)
        y = torch.group_norm(y, groups, gamma.to(ct), beta.to(ct), eps)
        if post:
            y = apply_steps(y, post, p.to(ct))
        return y.to(x.dtype)

    constants: dict[str, str | float | int] = {}
    chain = (*pre, norm, *post)
    for i in range(MAX_STEPS):
        op, a, bb = chain[i] if i < len(chain) else ("none", 0.0, 0.0)
        constants.update({f"OP{i + 1}": op, f"A{i + 1}": a, f"B{i + 1}": bb})
    constants.update({"NORM_AT": len(pre) + 1, "GROUPS": groups, "EPS": eps})
    names = [step_name(s) for s in pre] + [f"{NORM}({groups},eps={eps!r})"] + [step_name(s) for s in post]
    return ">".join(names), reference, constants


# The table: a GroupNorm right after the Linear, and one between an activation and a per-feature scale.
MEMBERS = [member(((NORM, 16, 1e-5),)), member((("silu", 0.0, 0.0), (NORM, 16, 1e-5), ("mul_p", 0.0, 0.0)))]
DEFAULT_MEMBER = MEMBERS[0][0]
reference = MEMBERS[0][1]


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    m, n, k = shape["M"], shape["N"], shape["K"]
    gen = torch.Generator().manual_seed(seed)
    # z = x @ w.T + b ~ N(0, 1.1) for any K (linear_chain's inputs) plus an offset of 2 (a mean the norm must
    # remove); gamma ~ 1 + N(0, 0.5^2) and beta ~ N(0, 0.5^2) (a dropped affine is ~50% off); p in +-[0.5, 1.5)
    # (safe to divide by)
    x = torch.randn(m, k, generator=gen)
    w = torch.randn(n, k, generator=gen) / math.sqrt(k)
    b = 2.0 + 0.5 * torch.randn(n, generator=gen)
    gamma = 1.0 + 0.5 * torch.randn(n, generator=gen)
    beta = 0.5 * torch.randn(n, generator=gen)
    sign = torch.where(torch.rand(n, generator=gen) < 0.5, -1.0, 1.0)
    p = sign * (0.5 + torch.rand(n, generator=gen))
    return tuple(t.to(dtype=dtype, device=device) for t in (x, w, b, gamma, beta, p))


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """``offset``: b + 100, where a variance taken as E[y^2] - E[y]^2 in fp32 cancels (1e4 against a variance
    of ~1: 6e-4 of it); ``large``: x and b times 1e4; ``tiny``: times 1e-4 (the variance near eps)."""
    x, w, b, *rest = make_inputs(shape, torch.float32, seed, "cpu")
    sets = {
        "offset": (x, w, b + 100.0, *rest),
        "large": (x * 1e4, w, b * 1e4, *rest),
        "tiny": (x * 1e-4, w, b * 1e-4, *rest),
    }
    return {name: tuple(t.to(dtype=dtype, device=device) for t in inputs) for name, inputs in sets.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # the GEMM, then per output the bias, the statistics (two adds, a multiply), the normalization and affine
    # (four) and a few per step
    m, n, k = shape["M"], shape["N"], shape["K"]
    return 2.0 * m * n * k + (8 + 4 * MAX_STEPS) * m * n


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # x, w and the four [N] vectors read once, y written once
    m, n, k = shape["M"], shape["N"], shape["K"]
    size = torch.tensor([], dtype=dtype).element_size()
    return float((m * k + n * k + 4 * n + m * n) * size)


def propose_members(model: torch.nn.Module) -> list[Member]:
    """The member the model's forward reads as (kernels/fx_chain.py): one Linear, steps, one GroupNorm, steps;
    none otherwise."""
    from warpforge.kernels.fx_chain import chain_steps

    steps = chain_steps(model)
    if steps is None or sum(op == NORM for op, _, _ in steps) != 1:
        return []
    return [Member(*member(steps))]
