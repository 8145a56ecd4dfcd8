"""Elementwise losses of a prediction and a target, reduced to one scalar, one family: ``y = red(loss(p, t))``.

``pred`` and ``target`` are ``[M, N]`` in the same dtype; the output is a 0-dim tensor in that dtype, the sum
accumulated in fp32 and rounded once. The members are :data:`MEMBERS` rows, an elementwise loss with its
reduction (``mean`` over all M * N elements, ``sum``, and for KL divergence ``batchmean``: the sum over M,
as ``F.kl_div`` defines it):

- ``mse``: ``(p - t)^2`` (``F.mse_loss``); ``l1``: ``|p - t|``;
- ``smooth_l1``: ``0.5 (p - t)^2`` where ``|p - t| < 1``, else ``|p - t| - 0.5`` (``F.smooth_l1_loss``, beta 1,
  which is ``F.huber_loss`` with delta 1);
- ``hinge``: ``clamp(1 - p * t, min=0)``;
- ``kl_div``: ``t (log t - log p)`` (``F.kl_div(torch.log(p), t)``: p holds probabilities, as KernelBench
  writes it); ``kl_div_log``: ``t (log t - p)`` (``F.kl_div(p, t)``: p already holds log-probabilities).

The templates select the member by the constants ``OP`` and ``REDUCTION``. A problem returning the mean of a
per-row loss (a cross-entropy over classes) is that task's through the matcher's reduction adapter
(evaluator/judge/match_adapters.py), not a member here.

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import loss
    >>> p, t = loss.make_inputs({"M": 2, "N": 5}, torch.float32, seed=0, device="cpu")
    >>> loss.reference(p, t).shape
    torch.Size([])
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

NAME = "loss"
KIND = "loss"
DESCRIPTION = (
    "Elementwise loss of pred and target [M, N] reduced to a scalar: mse, l1, smooth_l1, hinge, kl_div "
    "with mean, sum or batchmean (fp32 accumulation)."
)

# KernelBench's 32768 x 32768 (MSE, Huber, hinge) and 16384 x 16384 (KL), a distillation KL over a 32000-word
# vocabulary for 8192 tokens, and a 4096-square that fits in L2 of no GPU but is launch-bound on none.
SHAPES: list[dict[str, int]] = [
    {"M": 32768, "N": 32768},
    {"M": 16384, "N": 16384},
    {"M": 8192, "N": 32000},
    {"M": 4096, "N": 4096},
]

# Correctness-only (<= 17k elements): one element, primes, and element counts past one tile but not a multiple
# of any (3 * 1031 = 3093, 67 * 257 = 17219), so a dropped tail tile is a wrong answer.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "N": 1},
    {"M": 13, "N": 67},
    {"M": 3, "N": 1031},
    {"M": 67, "N": 257},
]

DTYPES: list[torch.dtype] = [torch.float32, torch.float16, torch.bfloat16]

# One scalar from an fp32 sum of up to 1G terms, rounded once to the dtype: the judge adds the reference's own
# rounding (half an ulp: 2^-11 in fp16) to these. fp16's default (4e-3) would accept a sum accumulated in fp16.
# bf16: the Triton interpreter rounds fp32 -> bf16 by truncation (compare.py round_to), up to one ulp (2^-7
# relative) where the reference rounds to nearest, so atol + rtol must reach 2^-7 (8e-3), not 2e-4.
TOLERANCES = {
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-4, 1e-4),
    torch.bfloat16: (4e-3, 4e-3),
}


# op -> the elementwise torch loss with reduction "none" (the reduction is applied by _reference_of).
_LOSSES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "mse": lambda p, t: F.mse_loss(p, t, reduction="none"),
    "l1": lambda p, t: F.l1_loss(p, t, reduction="none"),
    "smooth_l1": lambda p, t: F.smooth_l1_loss(p, t, reduction="none", beta=1.0),
    "hinge": lambda p, t: torch.clamp(1 - p * t, min=0),
    "kl_div": lambda p, t: F.kl_div(torch.log(p), t, reduction="none"),
    "kl_div_log": lambda p, t: F.kl_div(p, t, reduction="none"),
}
# The reductions each op is written with: batchmean is F.kl_div's own (the sum over the rows' count).
_REDUCTIONS = {
    "mse": ("mean", "sum"),
    "l1": ("mean", "sum"),
    "smooth_l1": ("mean", "sum"),
    "hinge": ("mean", "sum"),
    "kl_div": ("batchmean", "sum", "mean"),
    "kl_div_log": ("batchmean", "sum", "mean"),
}


def _reference_of(op: str, reduction: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def reference(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        ct = torch.promote_types(pred.dtype, torch.float32)
        elems = _LOSSES[op](pred.to(ct), target.to(ct))
        total = elems.sum()
        if reduction == "mean":
            total = total / elems.numel()
        elif reduction == "batchmean":
            total = total / pred.shape[0]
        return total.to(pred.dtype)

    return reference


# A loss of the prediction alone is the loss against zero targets (``x.pow(2).mean()`` is mse_mean): the
# matcher of ``warpforge optimize`` (optimize/match.py) feeds zeros for an absent target.
OPTIONAL_INPUTS = (1,)

MEMBERS = [
    (f"{op}_{red}", _reference_of(op, red), {"OP": op, "REDUCTION": red})
    for op, reds in _REDUCTIONS.items()
    for red in reds
]
DEFAULT_MEMBER = "mse_mean"
reference = next(ref for name, ref, _ in MEMBERS if name == DEFAULT_MEMBER)


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    # Positive values, so every member is defined on the same inputs (kl_div takes log p; the reference of a
    # negative p is NaN). pred in [0.05, 3) and target in [0.05, 2) reach both branches of smooth_l1
    # (|p - t| up to 3 against beta 1) and of hinge (p * t from 0.0025 to 6 against the margin 1).
    gen = torch.Generator().manual_seed(seed)
    size = (shape["M"], shape["N"])
    pred = 0.05 + 2.95 * torch.rand(size, generator=gen)
    target = 0.05 + 1.95 * torch.rand(size, generator=gen)
    return pred.to(dtype=dtype, device=device), target.to(dtype=dtype, device=device)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """``near_one``: every element's loss near one (mse 1.44, l1 1.2, smooth_l1 0.7, hinge 0.97) with
    deviations of a few percent, so a sum over thousands of elements accumulated in fp16 (spacing 2 to 16)
    misses the tolerance; ``tail``: p == t everywhere (zero loss for every member but kl_div_log) but the very
    last element, so a kernel that drops the last partial tile returns 0; ``large`` (not for fp16 inputs,
    whose own sum would overflow): p ~ 300, t ~ 1, a loss of ~300 per element (9e4 for mse), so an fp16
    accumulator (largest value 65504) overflows within a few hundred elements where fp32 holds the sum."""
    gen = torch.Generator().manual_seed(seed + 1)
    size = (shape["M"], shape["N"])
    t = 0.02 + 0.01 * torch.rand(size, generator=gen)
    p = t + 1.2 + 0.05 * torch.randn(size, generator=gen)
    tail_t = torch.full(size, 1.5)
    tail_p = tail_t.clone()
    tail_p[-1, -1] = 0.05
    sets = {"near_one": (p, t), "tail": (tail_p, tail_t)}
    if dtype != torch.float16:
        sets["large"] = (300.0 + torch.rand(size, generator=gen), 1.0 + 0.1 * torch.rand(size, generator=gen))
    return {name: (a.to(dtype=dtype, device=device), b.to(dtype=dtype, device=device)) for name, (a, b) in sets.items()}


# The judge checks fp16 and bf16 inputs on PRECISION_SHAPES with precision_inputs: the sum must be accumulated
# in fp32 (kernels/taskdef.Task.accumulation).
ACCUMULATION = torch.float32
# 16 x 1031 = 16496 elements: an mse sum near 24k, where the fp16 spacing is 16, and still below its 65504.
PRECISION_SHAPES: list[dict[str, int]] = [{"M": 16, "N": 1031}]


def precision_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``near_one`` of :func:`adversarial_inputs` at PRECISION_SHAPES: each term ~1.44 against a running sum
    of thousands, which an fp16 accumulator rounds away (an add below half its spacing of 8 to 16 is lost)."""
    sets = adversarial_inputs(shape, dtype, seed, device)
    return sets["near_one"]


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # A few operations per element whatever the loss (subtract, multiply, add): the roofline is bandwidth.
    return 4.0 * shape["M"] * shape["N"]


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # pred and target read once; the scalar written once.
    return float((2 * shape["M"] * shape["N"] + 1) * dtype.itemsize)
