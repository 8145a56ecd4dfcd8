"""Inputs a prediction depends on that the user did not give: the value taken, why, and the spread.

Published tables (and users) rarely state the micro-batch, the pipeline schedule or the recompute policy,
and the predicted step time moves with each (a 32B model at TP 8: MFU 0.33 at micro-batch 1, 0.43 at 4).
``DEFAULTS`` says what the planner takes for each and why; ``spread`` predicts the plan again over every
plausible value of the inputs left unsaid (valid for the model and the batch, and fitting in memory) and
reports the range, so a reader sees how much the answer rests on the assumption.

Example::

    >>> from warpforge.parallel.specs import load_model, load_cluster, PlanConfig
    >>> m, c = load_model("llama3-8b"), load_cluster("dgx-h100")
    >>> s = spread(m, c, PlanConfig(tp=2, dp=4, global_batch=64), unsaid=("micro_batch",))
    >>> s.assumed[0].value, s.over["micro_batch"]  # micro-batch 4 and 8 do not fit in 80 GiB
    (1, [1, 2])
    >>> s.mfu[0] <= s.mfu[1]
    True
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from warpforge.parallel.errors import InvalidPlanError
from warpforge.parallel.specs import ClusterSpec, ModelSpec, PlanConfig

# input -> (value taken when unsaid, why, candidate values for the spread)
DEFAULTS: dict[str, tuple[Any, str, tuple[Any, ...]]] = {
    "micro_batch": (
        1,
        "Megatron-LM's and NVIDIA's recipes' usual micro-batch; larger ones run faster when they fit",
        (1, 2, 4, 8),
    ),
    "recompute": (
        "selective",
        "the planner's default; NVIDIA's Megatron-Bridge recipes run selective",
        ("none", "selective", "full"),
    ),
    "interleave": (1, "plain 1F1B, Megatron's schedule unless virtual stages are named", (1, 2, 3, 4, 6, 8)),
}


@dataclass(frozen=True)
class Assumed:
    input: str
    value: Any
    why: str

    def line(self) -> str:
        return f"{self.input.replace('_', '-')} not given: took {self.value} ({self.why})"


@dataclass(frozen=True)
class Spread:
    """The prediction over the plausible values of the inputs not given (plans that are valid and fit)."""

    assumed: list[Assumed]
    over: dict[str, list[Any]] = field(default_factory=dict)  # the values that ran, per input
    plans: int = 0
    step_time_s: tuple[float, float] = (0.0, 0.0)
    tokens_per_s: tuple[float, float] = (0.0, 0.0)
    mfu: tuple[float, float] = (0.0, 0.0)

    def as_json(self) -> dict[str, Any]:
        return {
            "assumed": [a.__dict__ for a in self.assumed],
            "range": {
                "over": self.over,
                "plans": self.plans,
                "step_time_s": list(self.step_time_s),
                "tokens_per_s": list(self.tokens_per_s),
                "mfu": list(self.mfu),
            },
        }

    def line(self) -> str:
        vals = "; ".join(f"{k.replace('_', '-')} {'/'.join(map(str, v))}" for k, v in self.over.items())
        return (
            f"over the inputs not given ({vals}): MFU {self.mfu[0]:.1%}-{self.mfu[1]:.1%}, "
            f"{self.tokens_per_s[0]:,.0f}-{self.tokens_per_s[1]:,.0f} tokens/s ({self.plans} plans that fit)"
        )


def relevant(plan: PlanConfig, unsaid: Sequence[str]) -> list[str]:
    """The unsaid inputs that matter for this plan (the schedule only with pipeline parallelism)."""
    return [k for k in unsaid if k in DEFAULTS and (k != "interleave" or plan.pp > 1)]


def spread(model: ModelSpec, cluster: ClusterSpec, plan: PlanConfig, unsaid: Sequence[str]) -> Spread:
    """``plan`` holds the values taken for ``unsaid``; every combination of their candidates is predicted."""
    from warpforge.parallel.simulator import predict

    keys = relevant(plan, unsaid)
    assumed = [Assumed(k, DEFAULTS[k][0], DEFAULTS[k][1]) for k in keys]
    if not keys:
        return Spread(assumed)
    preds, seen = [], {k: set() for k in keys}  # type: ignore[var-annotated]
    for combo in itertools.product(*(DEFAULTS[k][2] for k in keys)):
        cand = plan.model_copy(update=dict(zip(keys, combo)))
        try:
            p = predict(model, cluster, cand)
        except InvalidPlanError:
            continue
        if not p.fits:
            continue
        preds.append(p)
        for k, v in zip(keys, combo):
            seen[k].add(v)
    if not preds:
        return Spread(assumed)
    over = {k: sorted(v, key=DEFAULTS[k][2].index) for k, v in seen.items()}

    def lo_hi(xs: list[float]) -> tuple[float, float]:
        return (min(xs), max(xs))

    return Spread(
        assumed,
        over,
        len(preds),
        lo_hi([p.step_time_s for p in preds]),
        lo_hi([p.tokens_per_s for p in preds]),
        lo_hi([p.mfu for p in preds]),
    )
