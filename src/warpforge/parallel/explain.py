"""Why a plan ranks where it does: headline numbers, where its time goes, and what separates it from
its neighbour in the ranking (the plan settings that differ and the time components that moved).

Example::

    >>> from warpforge.parallel import load_model, load_cluster, PlanConfig, predict
    >>> m, c = load_model("llama3-8b"), load_cluster("dgx-h100")
    >>> a = predict(m, c, PlanConfig(tp=1, dp=8, recompute="none"))
    >>> b = predict(m, c, PlanConfig(tp=1, dp=8, recompute="full"))
    >>> explain(a, 1, b, 2)[2].startswith("beats #2")
    True
"""

from __future__ import annotations

from warpforge.parallel.prediction import Prediction

LABELS = {
    "compute": "compute",
    "memory_bound": "memory-bound kernels",
    "recompute": "recompute",
    "host_overhead": "host launch overhead",
    "tp_comm": "TP comm",
    "cp_comm": "CP comm",
    "ep_comm": "EP all-to-all",
    "pp_p2p": "pipeline p2p",
    "bubble": "pipeline bubble",
    "dp_comm": "exposed DP comm",
    "optimizer": "optimizer step",
}
PLAN_FIELDS = ("tp", "pp", "dp", "cp", "ep", "micro_batch", "interleave", "recompute", "zero")


def _fmt_s(x: float) -> str:
    return f"{x:.3g} s" if x >= 0.01 else f"{x * 1e3:.3g} ms"


def headline(p: Prediction) -> str:
    return (
        f"{_fmt_s(p.step_time_s)}/step, {p.tokens_per_s:,.0f} tokens/s, MFU {p.mfu:.1%}, "
        f"{p.peak_mem_gb:.1f} of {p.hbm_gb:g} GiB"
    )


def time_split(p: Prediction, n: int = 3) -> str:
    fr = sorted(p.time.fractions().items(), key=lambda kv: -kv[1])
    parts = [f"{LABELS[k]} {v:.0%}" for k, v in fr[:n] if v >= 0.005]
    return "time: " + ", ".join(parts)


def plan_diff(a: Prediction, b: Prediction) -> str:
    """Settings of ``a`` that differ from ``b``, e.g. ``pp 4 (vs 8), recompute none (vs full)``."""
    da, db = a.plan.model_dump(), b.plan.model_dump()
    parts = [f"{f} {da[f]} (vs {db[f]})" for f in PLAN_FIELDS if da[f] != db[f]]
    return ", ".join(parts) or "same settings"


def _moved(a: Prediction, b: Prediction, better: bool, n: int = 2) -> str:
    ta, tb = a.time.model_dump(), b.time.model_dump()
    deltas = sorted(((tb[k] - ta[k]) * (1 if better else -1), k) for k in ta)
    picks = [f"{LABELS[k]} {_fmt_s(ta[k])} vs {_fmt_s(tb[k])}" for d, k in reversed(deltas[-n:]) if d > 0]
    return "; ".join(picks)


def explain(p: Prediction, rank: int, other: Prediction | None = None, other_rank: int = 0) -> list[str]:
    """Reasons for ``p`` at 1-based ``rank``, contrasted with ``other`` (at ``other_rank``): for the
    winner, the runner-up it beats; for the others, the winner."""
    why = [headline(p), time_split(p)]
    if other is not None and rank < other_rank:
        gain = other.step_time_s / p.step_time_s - 1
        moved = _moved(p, other, True) or "a tie"
        why.append(f"beats #{other_rank} by {gain:.1%} with {plan_diff(p, other)}: {moved}")
    elif other is not None and rank > other_rank:
        loss = p.step_time_s / other.step_time_s - 1
        moved = _moved(p, other, False) or "a tie"
        why.append(f"{loss:.1%} slower than #{other_rank} with {plan_diff(p, other)}: {moved}")
    mem = p.memory
    biggest = max(("weights", "grads", "optimizer", "activations"), key=lambda k: getattr(mem, k))
    why.append(
        f"memory: {p.hbm_gb - p.peak_mem_gb:.1f} GiB headroom; largest share {biggest} "
        f"{getattr(mem, biggest):.1f} GiB (pipeline rank {mem.stage})"
    )
    return why
