"""What a campaign reports: progress events and per-task summaries (what ``warpforge run`` prints).

Example::

    >>> summary = run_campaign(spec)                                   # doctest: +SKIP
    >>> summary.tasks[0].best_params, summary.tasks[0].final[0].interval  # doctest: +SKIP
    ({'BLOCK': 1024}, 'p20-p80 range (no raw samples)')
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from warpforge.evaluator.result import EvalResult


@dataclass
class FinalEntry:
    """One of the top-k at the end of a campaign, re-measured where the backend measures live."""

    variant: str
    params: dict[str, Any]
    verdict: str
    ms: float | None
    speedup: float | None
    speedup_low: float | None
    speedup_high: float | None
    interval: str  # how the interval was obtained ("95% CI from 100 samples", "p20-p80 range ...")
    remeasured: bool  # fresh measurement (live) or the stored one (recorded times)
    chosen: bool = False  # the campaign's best


@dataclass
class Event:
    """A progress event for the CLI: one evaluation finished."""

    task: str
    variant: str
    done: int
    total: int
    result: EvalResult
    cached: bool
    best_ms: float | None
    best_label: str | None


@dataclass
class VariantSummary:
    variant: str
    source_hash: str
    feasible: int
    origin: str = "template"  # template | llm | user
    parents: list[str] = field(default_factory=list)  # source hashes of the variants it was derived from
    evaluated: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    best_params: dict[str, Any] | None = None
    best_ms: float | None = None


@dataclass
class TaskSummary:
    task: str
    backend: str
    evaluations: int
    measured: int
    timing: str  # honest statement of what was and was not measured
    variants: list[VariantSummary]
    best_variant: str | None = None
    best_params: dict[str, Any] | None = None
    best_ms: float | None = None
    best_speedup: float | None = None
    best_speedup_low: float | None = None
    best_speedup_high: float | None = None
    workers: str = ""  # how it was evaluated ("in-process, 1 worker", "Ray, 4 GPU workers + 4 CPU ...")
    acceptance: str = ""  # how the best was adopted (beyond noise, on what evidence)
    final: list[FinalEntry] = field(default_factory=list)  # the top-k re-benchmark
    reused: int = 0  # stored results reused instead of evaluated again (same source, params, software)
    notes: list[str] = field(default_factory=list)  # fallbacks that change what a number means (nothing silent)
    failure: str | None = None  # the proposer could not do what was asked (every LLM call failed): exit 1


@dataclass
class CampaignSummary:
    campaign: str
    db: str
    resumed: bool
    requeued: int
    tasks: list[TaskSummary]
    wall_s: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
