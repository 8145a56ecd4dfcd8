"""The frozen rows the read layer (db/queries.py) returns: plain values, ``dict``/``tuple`` inside, no ORM.

Import them from ``warpforge.db.queries`` (re-exported there, the contract's home); they live here to keep
that module small. Nothing here imports more than the standard library.

Example::

    >>> page = Page(items=(1, 2), total=5, offset=0, limit=2)
    >>> page.has_more
    True
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def params_key(params: Mapping[str, Any]) -> str:
    """The canonical text of a parameter set (``wf_evaluations.params_key``): sorted keys, no spaces."""
    return json.dumps(dict(params), sort_keys=True, separators=(",", ":"))


def utc(value: datetime) -> datetime:
    """A stored time in UTC: SQLite hands back naive datetimes for ``DateTime(timezone=True)``, and every value
    was written in UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a longer list: ``items`` are rows ``offset .. offset+len(items)`` of ``total``
    (``next_cursor`` continues it where the reader offers cursors)."""

    items: tuple[T, ...]
    total: int
    offset: int  # 0 for a page read by cursor
    limit: int
    next_cursor: str | None = None  # evaluations(): pass it back as cursor= for the next page

    @property
    def has_more(self) -> bool:
        return self.next_cursor is not None or self.offset + len(self.items) < self.total


@dataclass(frozen=True)
class ShapeRow:
    """One benchmark shape's times (ms) of an evaluation or a decision's winner."""

    shape: Mapping[str, int]
    shape_key: str  # "M=4096,N=4096" (kernels.taskdef.shape_key)
    dtype: str
    p20_ms: float | None
    p50_ms: float | None
    p80_ms: float | None
    ref_p50_ms: float | None
    speedup: float | None
    roofline_pct: float | None


@dataclass(frozen=True)
class TopKEntry:
    """One of a decision's re-benchmarked top-k (search/summary.FinalEntry as stored)."""

    variant: str
    params: Mapping[str, Any]
    verdict: str
    ms: float | None
    speedup: float | None
    speedup_low: float | None
    speedup_high: float | None
    interval: str  # how the interval was obtained
    remeasured: bool  # fresh live measurement (True) or the stored one (recorded times)
    chosen: bool  # the campaign's winner


@dataclass(frozen=True)
class Decision:
    """A campaign's stored decision for one task. ``accepted`` False: no winner, ``note`` says why."""

    campaign: str
    task: str
    backend: str
    timing_source: str | None  # live | recorded | None (nothing was timed)
    gpu: str | None  # the GPU the times come from
    fingerprint: str
    variant_hash: str | None
    variant_name: str | None
    params: Mapping[str, Any] | None
    objective_ms: float | None
    speedup: float | None
    speedup_low: float | None
    speedup_high: float | None
    accepted: bool
    note: str
    top_k: tuple[TopKEntry, ...]
    shapes: tuple[ShapeRow, ...]
    created_at: datetime
    interval: str = ""  # how speedup_low/high were obtained
    evaluation_id: int | None = None  # the winner's search evaluation
    evaluations: int = 0  # search evaluations behind the decision
    measured: int = 0  # of which timed


@dataclass(frozen=True)
class Winner:
    """The accepted winner of a task on one GPU (and one shape when ``shape_key`` is set)."""

    task: str
    gpu: str | None
    fingerprint: str
    shape_key: str | None
    decision: Decision
    ms: float | None = None  # the decision's objective, or the shape's p50 when shape_key is set
    speedup: float | None = None


@dataclass(frozen=True)
class CampaignRow:
    name: str
    status: str  # running | finished | interrupted
    created_at: datetime
    updated_at: datetime
    tasks: tuple[str, ...]
    backend: str
    proposer: str
    sampler: str
    evaluations: int  # search evaluations (the final re-benchmark is not counted)
    verdicts: Mapping[str, int]
    decisions: tuple[Decision, ...]
    spec: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class EvaluationRow:
    id: int
    campaign: str | None
    task: str
    variant_hash: str
    variant_name: str
    params: Mapping[str, Any]
    backend: str
    verdict: str
    reason: str
    message: str
    device: str
    fingerprint: str
    timing_source: str | None
    timing_gpu: str | None
    objective_ms: float | None
    speedup: float | None
    compile_s: float | None
    wall_s: float | None
    final: bool  # part of the campaign's final top-k re-benchmark, not of the search
    trial_number: int | None
    created_at: datetime


@dataclass(frozen=True)
class EvaluationDetail:
    row: EvaluationRow
    shapes: tuple[ShapeRow, ...]
    resources: Mapping[str, Any] | None  # kernel name -> {target, registers, spill_bytes, shared_bytes, compile_s}
    versions: Mapping[str, str]  # torch / triton / warpforge
    result: Mapping[str, Any]  # the full stored EvalResult document


@dataclass(frozen=True)
class VariantRow:
    source_hash: str
    task: str
    name: str
    origin: str  # template | llm | user
    proposer: str
    parents: tuple[str, ...]
    proposal_id: str | None
    rationale: str
    source: str
    space: Mapping[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class PlanRow:
    id: int
    campaign: str | None
    model_name: str
    cluster_name: str
    nodes: int
    plan: Mapping[str, Any]
    plan_key: str
    source: str  # search | enqueued | predict | llm (its stored why[0] says which call proposed it and why)
    fits: bool
    step_time_s: float | None
    mfu: float | None
    peak_mem_gb: float | None
    model_spec: Mapping[str, Any]
    cluster_spec: Mapping[str, Any]
    prediction: Mapping[str, Any]
    warpforge_version: str
    created_at: datetime


# --- warpforge optimize runs (wf_optimize_runs, migration 0006) -------------------------------------------
@dataclass(frozen=True)
class OptimizeRunRow:
    """One stored ``warpforge optimize`` run without its report (a list row)."""

    id: int
    target: str
    kind: str
    mode: str  # train | infer
    dtype: str
    gpu: str
    coverage: float
    speedup: float | None
    measured: bool  # False: ``speedup`` is the report's estimate, not a time ratio measured on a GPU
    regions: int
    patched: int
    created_at: datetime


@dataclass(frozen=True)
class OptimizeRunDetail:
    row: OptimizeRunRow
    report: Mapping[str, Any]  # the whole OptimizeReport document (optimize/report.py)


# --- the agent's LLM calls (wf_agent_calls / wf_agent_runs, migration 0003) -----------------------------
@dataclass(frozen=True)
class LLMCallRow:
    """One stored LLM call without its text (a list row); ``Reader.llm_call(id)`` adds the messages."""

    id: int
    campaign: str | None
    task: str
    call_key: str  # "r2.s0.a1": round, slot, attempt
    model: str
    outcome: str  # agent/parse.py OUTCOMES: accepted, no_code, parse_error, truncated, duplicate, ...
    message: str  # why the answer was not used ("" when accepted)
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_s: float
    variant_hash: str | None  # the variant the answer became (when it parsed into one)
    parents: tuple[str, ...]
    replayed: bool  # answered from a stored transcript (--llm-replay), not by the model
    created_at: datetime


@dataclass(frozen=True)
class LLMTranscript:
    """One call with what was sent and what came back (stored redacted: never a key)."""

    call: LLMCallRow
    messages: tuple[Mapping[str, str], ...]  # {"role", "content"}, in order (a re-ask holds the first answer)
    content: str  # the answer
    reasoning: str  # the model's reasoning, kept apart from the answer
    params: Mapping[str, Any]  # sampling parameters sent
    prompt_cut: tuple[str, ...]  # prompt sections the token budget dropped
    ast_hash: str | None = None  # normalized AST hash of the variant's source (the duplicate check's key)
    verdicts: Mapping[str, int] = field(default_factory=dict)  # the evaluator's verdicts of its variant, when read so


@dataclass(frozen=True)
class LLMUsage:
    """Calls, tokens and cost of one group (a campaign x model, a campaign, a model, or everything)."""

    campaign: str | None  # None: summed over campaigns (or calls of no campaign, see ``scope``)
    model: str | None  # None: summed over models
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_s: float  # summed over the calls
    outcomes: Mapping[str, int]  # outcome -> calls
    scope: str = "campaign x model"  # campaign x model | campaign | model | all


@dataclass(frozen=True)
class AgentRunRow:
    """The agent's totals for one (campaign, task) and the budget that stopped it."""

    campaign: str | None
    task: str
    stop_reason: str  # calls | tokens | cost | wall_time | speed_of_light | ... ("" while running)
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    wall_s: float
    outcomes: Mapping[str, int]
    updated_at: datetime
    settings: Mapping[str, Any] = field(default_factory=dict)  # the agent settings the run used (replay reuses them)


@dataclass(frozen=True)
class AgentPlanRow:
    """One plan the LLM plan agent proposed and what became of it (``wf_agent_plans``)."""

    task: str
    call_id: int | None
    call_key: str
    slot: int
    plan: Mapping[str, Any]  # as proposed
    plan_key: str | None
    outcome: str  # ranked | does_not_fit | invalid | duplicate
    message: str
    rationale: str
    rank: int | None = None
    step_time_s: float | None = None
    tokens_per_s: float | None = None
    peak_mem_gb: float | None = None
    replayed: bool = False
    id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
