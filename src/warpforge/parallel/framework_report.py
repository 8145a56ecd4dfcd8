"""The per-framework part of the validation report: torchtitan's published H100 runs and PyTorch's own
memory tracker.

* ``torchtitan_report(table)``: every row of ``presets/torchtitan_h100_runs.yaml`` predicted as a user
  would type it (``framework="torchtitan"``), throughput and peak reserved memory per GPU against the
  published values, rows marked train / held-out; the two constants fitted on the train rows are refitted
  here and compared with the packaged ones. Targets on held-out rows: throughput MAPE <= 12%, memory MAPE
  <= 8%, and every run predicted to fit (a run that ran did fit).
* ``tracker_report(table)``: the planner's live-tensor peak under torchtitan's accounting against
  ``memcheck.measure`` (torch's FSDPMemTracker, FakeTensorMode, fake process group) on small Llama
  configurations: no published number involved. Target: within 10% on every configuration.

Example::

    >>> from warpforge.parallel.framework_report import TRACKER_GRID
    >>> len(TRACKER_GRID) >= 6
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from warpforge.parallel.calibration import calibration_for
from warpforge.parallel.memory_fsdp import RESERVED_RATIO, fsdp_live
from warpforge.parallel.specs import ModelSpec, PlanConfig
from warpforge.parallel.torchtitan_runs import (
    SOURCE,
    Scored,
    fit_gemm_scale,
    fit_reserved_ratio,
    load_runs,
    score,
)
from warpforge.parallel.validation import mape, spearman

Table = Callable[[list[str], list[list[str]]], str]
TPS_TARGET, MEM_TARGET, TRACKER_TARGET = 0.10, 0.08, 0.10

_BASE = dict(layers=2, hidden=256, heads=4, kv_heads=2, ffn=688, vocab=2048, seq=256, activation="swiglu")
# (label, model fields over _BASE, plan fields): FSDP with and without resharding, no recompute and full,
# GQA and MHA, small and large vocabulary, state-bound and activation-bound.
TRACKER_GRID: list[tuple[str, dict[str, object], dict[str, object]]] = [
    ("gqa mb2 dp4 z3 none", {}, dict(dp=4, micro_batch=2, recompute="none", zero=3)),
    ("gqa mb2 dp4 z3 full", {}, dict(dp=4, micro_batch=2, recompute="full", zero=3)),
    ("vocab 8192 z3 full", dict(vocab=8192), dict(dp=4, micro_batch=2, recompute="full", zero=3)),
    (
        "mha h512 L4 dp2 z3 none",
        dict(layers=4, hidden=512, heads=8, kv_heads=8, ffn=1376),
        dict(dp=2, micro_batch=1, recompute="none", zero=3),
    ),
    (
        "mha h512 L4 dp2 z3 full",
        dict(layers=4, hidden=512, heads=8, kv_heads=8, ffn=1376),
        dict(dp=2, micro_batch=1, recompute="full", zero=3),
    ),
    ("L3 seq512 dp8 z2 none", dict(layers=3, seq=512), dict(dp=8, micro_batch=1, recompute="none", zero=2)),
    ("L3 seq512 dp8 z2 full", dict(layers=3, seq=512), dict(dp=8, micro_batch=1, recompute="full", zero=2)),
]


@dataclass
class FrameworkReport:
    lines: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    bands: dict[str, dict[str, object]] = field(default_factory=dict)
    summary: list[list[str]] = field(default_factory=list)  # rows for the per-framework summary table
    held_out: dict[str, tuple[int, float, float, float]] = field(default_factory=dict)  # qty: n, MAPE, rho, worst


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def tracker_cases() -> list[tuple[str, ModelSpec, PlanConfig]]:
    return [
        (label, ModelSpec(**{**_BASE, **m}), PlanConfig(**p, framework="torchtitan"))  # type: ignore[arg-type]
        for label, m, p in TRACKER_GRID
    ]


def tracker_rows() -> list[tuple[str, float, float]]:
    """(label, planner live MiB, tracker MiB) per configuration of ``TRACKER_GRID``."""
    from warpforge.parallel.memcheck import measure

    out = []
    for label, model, plan in tracker_cases():
        live, _ = fsdp_live(model, plan, dense_layers=model.layers, embed=True, head=True, in_flight_microbatches=1)
        out.append((label, live / 2**20, measure(model, plan).total / 2**20))
    return out


def tracker_report(table: Table) -> FrameworkReport:
    rep = FrameworkReport()
    rows, errs = [], []
    for label, pred, meas in tracker_rows():
        e = pred / meas - 1
        errs.append(abs(e))
        rows.append([label, f"{meas:.2f}", f"{pred:.2f}", _pct(e), "met" if abs(e) <= TRACKER_TARGET else "MISSED"])
        if abs(e) > TRACKER_TARGET:
            rep.failures.append(f"tracker check {label}: planner {pred:.2f} MiB vs tracker {meas:.2f} ({e:+.1%})")
    rep.lines.append(
        "Memory vs PyTorch's own measurement (torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker, "
        "FakeTensorMode, fake process group;\ntorchtitan-style Llama, bf16 compute / fp32 reduce, AdamW; "
        "peak live MiB per rank of the second step; no published number)"
    )
    rep.lines.append(table(["configuration", "tracker MiB", "planner MiB", "error", "<= 10%"], rows))
    m = sum(errs) / len(errs)
    rep.summary.append(
        [
            "torchtitan",
            "memory (live) vs torch tracker",
            "memcheck grid (ground truth)",
            "all",
            str(len(errs)),
            f"{m:.1%}",
            "n/a",
            f"{max(errs):.1%}",
        ]
    )
    return rep


def _subsets(scored: list[Scored]) -> list[list[str]]:
    kinds: list[tuple[str, Callable[[Scored], bool]]] = [
        ("context parallel (CP > 1)", lambda s: s.run.plan.cp > 1),
        ("torch.compile", lambda s: s.run.plan.compiled),
        ("eager", lambda s: not s.run.plan.compiled),
        ("Float8", lambda s: s.run.plan.precision == "fp8"),
        ("async TP", lambda s: s.run.plan.overlap_tp_comm),
        ("pipeline (PP > 1)", lambda s: s.run.plan.pp > 1),
        ("FSDP only (no TP / PP / CP)", lambda s: s.run.plan.tp == s.run.plan.pp == s.run.plan.cp == 1),
    ]
    rows = []
    for label, pick in kinds:
        errs = [s.tps_per_gpu / s.run.tps_per_gpu - 1 for s in scored if not s.run.train and pick(s)]
        if errs:
            rows.append(
                [
                    label,
                    str(len(errs)),
                    f"{sum(map(abs, errs)) / len(errs):.1%}",
                    _pct(sum(errs) / len(errs)),
                    f"{max(map(abs, errs)):.1%}",
                ]
            )
    return rows


def torchtitan_report(table: Table) -> FrameworkReport:
    rep = FrameworkReport()
    runs = load_runs()
    scale, ratio = fit_gemm_scale(runs), fit_reserved_ratio(runs)
    packaged = calibration_for(runs[0].cluster).torchtitan_gemm_scale
    rep.lines.append(f"torchtitan (PyTorch FSDP2) published H100 runs: {SOURCE}")
    rep.lines.append(
        f"fitted on the {sum(r.train for r in runs)} train rows only: torchtitan_gemm_scale "
        f"{scale:.4f} (packaged {packaged:.4f}), allocator reserved/live {ratio:.4f} "
        f"(packaged {RESERVED_RATIO:.4f})"
    )
    if abs(scale - packaged) > 0.01 or abs(ratio - RESERVED_RATIO) > 0.01:
        rep.failures.append("torchtitan constants differ from this fit (update calibration.yaml / memory_fsdp.py)")
    rows, scored = [], []
    for r in runs:
        s = score(r)
        scored.append(s)
        fit = {"yes": "fits", "no": "DOES NOT FIT", "uncertain": "uncertain"}[s.verdict]
        rows.append(
            [
                r.id,
                "train" if r.train else "held-out",
                r.plan.short(),
                f"{r.tps_per_gpu:,.0f}",
                f"{s.tps_per_gpu:,.0f}",
                _pct(s.tps_per_gpu / r.tps_per_gpu - 1),
                f"{r.memory_gib:.1f}",
                f"{s.memory_gib:.1f}",
                _pct(s.memory_gib / r.memory_gib - 1),
                fit,
            ]
        )
    rep.lines.append(
        table(["run", "split", "plan", "TPS/GPU meas", "pred", "err", "GiB meas", "pred", "err", "verdict"], rows)
    )
    out = []
    for split in ("train", "held-out"):
        sel = [s for s in scored if s.run.train == (split == "train")]
        for qty, pred, meas, target in (
            ("throughput", [s.tps_per_gpu for s in sel], [s.run.tps_per_gpu for s in sel], TPS_TARGET),
            ("peak memory", [s.memory_gib for s in sel], [s.run.memory_gib for s in sel], MEM_TARGET),
        ):
            m, rho = mape(pred, meas), spearman(pred, meas)
            worst = max(abs(p / q - 1) for p, q in zip(pred, meas))
            verdict = ""
            if split == "held-out":
                verdict = "met" if m <= target else f"MISSED (MAPE {m - target:+.1%} pt)"
                if m > target:
                    rep.failures.append(f"torchtitan held-out {qty} MAPE {m:.1%} > {target:.0%}")
            if split == "held-out":
                rep.held_out[qty] = (len(sel), m, rho, worst)
            out.append(
                [
                    qty,
                    split,
                    str(len(sel)),
                    f"{m:.1%}",
                    f"{rho:.3f}",
                    f"{worst:.1%}",
                    f"MAPE <= {target:.0%}" if split == "held-out" else "",
                    verdict,
                ]
            )
            rep.summary.append(
                [
                    "torchtitan",
                    f"{qty}",
                    "torchtitan H100 benchmark (Dec 2024)",
                    split,
                    str(len(sel)),
                    f"{m:.1%}",
                    f"{rho:.3f}",
                    f"{worst:.1%}",
                ]
            )
            if split == "held-out" and qty == "peak memory":
                rep.bands["memory/torchtitan"] = {
                    "mape": round(m, 4),
                    "worst": round(worst, 4),
                    "n": len(sel),
                    "source": "torchtitan H100 runs, held out (" + SOURCE + ")",
                }
    rep.lines.append(table(["quantity", "split", "n", "MAPE", "Spearman", "worst", "target", "verdict"], out))
    rep.lines.append("held-out throughput by what the run used (a run can be in several rows)")
    rep.lines.append(table(["subset", "n", "MAPE", "mean signed", "worst"], _subsets(scored)))
    missed = [s.run.id for s in scored if s.verdict == "no"]
    ok = not missed
    unsure = [s.run.id for s in scored if s.verdict == "uncertain"]
    rep.lines.append(
        f"fit verdicts: {len(scored) - len(unsure) - len(missed)} yes, {len(unsure)} uncertain, {len(missed)} no"
    )
    rep.lines.append(
        "no published run (all ran) predicted not to fit: " + ("met" if ok else "MISSED: " + ", ".join(missed))
    )
    if not ok:
        rep.failures.append("torchtitan runs predicted not to fit: " + ", ".join(missed))
    return rep
