"""SQLAlchemy 2 models. Every table carries the ``wf_`` prefix so Optuna's tables can share the URL.

No foreign key points into Optuna's tables: a study is referenced by name only (docs/design.md §3.5).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    event,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from warpforge.compile_facts import static_columns


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Campaign(Base):
    __tablename__ = "wf_campaigns"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)
    status: Mapped[str] = mapped_column(String(20), default="running")  # running | finished | interrupted
    spec: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    evaluations: Mapped[list[Evaluation]] = relationship(back_populates="campaign")


class TaskRecord(Base):
    """A task's identity: its name and the hash of the file that defined it."""

    __tablename__ = "wf_tasks"
    __table_args__ = (UniqueConstraint("name", "source_hash"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), index=True)
    source_hash: Mapped[str] = mapped_column(String(64))
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class VariantRecord(Base):
    """A variant, keyed by the content hash of its source (the same source is one row forever)."""

    __tablename__ = "wf_variants"

    id: Mapped[int] = mapped_column(primary_key=True)
    source_hash: Mapped[str] = mapped_column(String(64), unique=True)
    task: Mapped[str] = mapped_column(String(200), index=True)
    name: Mapped[str] = mapped_column(String(200))
    origin: Mapped[str] = mapped_column(String(20), default="template")  # template | llm | user
    source: Mapped[str] = mapped_column(Text)
    space: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # Lineage (revision 0002): who proposed it, from which parent sources, under which proposal id, and why.
    proposer: Mapped[str] = mapped_column(String(100), default="template", server_default="template")
    parents: Mapped[list[Any]] = mapped_column(JSON, default=list)  # source hashes of parent variants
    proposal_id: Mapped[str | None] = mapped_column(String(200))
    rationale: Mapped[str] = mapped_column(Text, default="", server_default="")


class Hardware(Base):
    """A hardware fingerprint: device name, compute capability, memory, driver (what makes times comparable)."""

    __tablename__ = "wf_hardware"

    fingerprint: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Evaluation(Base):
    """One evaluation of (variant, params) on one backend, with its verdict and measurements."""

    __tablename__ = "wf_evaluations"
    __table_args__ = (
        Index("ix_wf_eval_lookup", "variant_hash", "params_key", "backend", "fingerprint"),
        Index("ix_wf_eval_task", "task", "verdict"),
        # Revision 0002, for the read layer at 100,000 rows: a campaign's verdict counts come from the index
        # alone, and the filtered pages (campaign / task / variant, newest first) walk an index in id order.
        Index("ix_wf_eval_campaign_verdict", "campaign_id", "verdict", "final"),
        Index("ix_wf_eval_campaign_task", "campaign_id", "task", "id"),
        Index("ix_wf_eval_task_id", "task", "id"),
        Index("ix_wf_eval_variant_id", "variant_hash", "id"),
        # Sorted pages (db/paging.py): without them a page sorted 100,000 rows (65 ms on SQLite).
        Index("ix_wf_eval_objective", "objective_ms", "id"),
        Index("ix_wf_eval_speedup", "speedup", "id"),
        Index("ix_wf_eval_created", "created_at", "id"),
        Index("ix_wf_eval_task_objective", "task", "verdict", "objective_ms", "id"),
        # The static ranking reads wf_static_configs (revision 0007_static_summary), which dropped the
        # 12-column index revision 0005 kept for it here: one less index for every insert to write.
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("wf_campaigns.id"), index=True)
    task: Mapped[str] = mapped_column(String(200))
    task_hash: Mapped[str] = mapped_column(String(64), default="")
    variant_id: Mapped[int] = mapped_column(ForeignKey("wf_variants.id"))
    variant_hash: Mapped[str] = mapped_column(String(64))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    params_key: Mapped[str] = mapped_column(String(1000))  # canonical JSON of params
    backend: Mapped[str] = mapped_column(String(20))
    verdict: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(String(200), default="")
    message: Mapped[str] = mapped_column(Text, default="")
    device: Mapped[str] = mapped_column(String(200), default="")
    fingerprint: Mapped[str] = mapped_column(String(64), default="")
    torch_version: Mapped[str] = mapped_column(String(50), default="")
    triton_version: Mapped[str] = mapped_column(String(50), default="")
    warpforge_version: Mapped[str] = mapped_column(String(50), default="")
    timing_source: Mapped[str | None] = mapped_column(String(20))  # live | recorded | None (not measured)
    timing_gpu: Mapped[str | None] = mapped_column(String(200))
    objective_ms: Mapped[float | None] = mapped_column(Float)
    speedup: Mapped[float | None] = mapped_column(Float)
    compile_s: Mapped[float | None] = mapped_column(Float)
    wall_s: Mapped[float | None] = mapped_column(Float)
    study_name: Mapped[str | None] = mapped_column(String(400))
    # The campaign's final top-k re-benchmark (revision 0002; was a ":final" study_name suffix): not a search
    # evaluation, so counts, history and resume leave it out.
    final: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    trial_number: Mapped[int | None] = mapped_column(Integer)
    result: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # the full EvalResult
    # The worst compile facts over the result's kernels and shapes (compile_facts.static_columns), stored so
    # the static ranking orders rows in SQL; all None when the result holds no compile facts.
    static_target: Mapped[str | None] = mapped_column(String(100))
    static_spill: Mapped[float | None] = mapped_column(Float)
    static_occupancy: Mapped[float | None] = mapped_column(Float)
    static_registers: Mapped[float | None] = mapped_column(Float)
    static_shared: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    campaign: Mapped[Campaign | None] = relationship(back_populates="evaluations")
    variant: Mapped[VariantRecord] = relationship()
    measurements: Mapped[list[Measurement]] = relationship(back_populates="evaluation", cascade="all, delete-orphan")


@event.listens_for(Evaluation, "before_insert")
@event.listens_for(Evaluation, "before_update")
def _static_facts(mapper: Any, connection: Any, row: Evaluation) -> None:
    """The static columns follow the result document on every ORM write (``db/writer.py``'s Core inserts set
    them through ``store.evaluation_values``), so no writer can store facts the ranking does not see."""
    for name, value in static_columns((row.result or {}).get("resources")).items():
        setattr(row, name, value)


class StaticConfig(Base):
    """The static ranking's rows, kept by the database itself: per task and scope, each configuration
    (source, parameters) verified ``ok`` by a search evaluation, with its newest such evaluation and that
    evaluation's ranking key (``Reader._static_key``'s order).

    A trigger on ``wf_evaluations`` (revision 0007_static_summary) upserts the row in the inserting
    statement's own transaction, so a summary row cannot disagree with the evaluations: a crash loses both or
    neither, and every writer (the campaign's batches, ``store.save_evaluation``, a bulk insert) is covered.
    Reading it replaces a ``GROUP BY`` over every ok evaluation of a task per request (0.4-0.6 s for the
    leaderboard at 100,000 CPU evaluations, 0.75 s for ``best --static``; benchmarks/dashboard_routes.py).

    Never written by Python: only the trigger and the migration's backfill write it. Evaluations are
    append-only, so a row only ever moves to a newer evaluation.
    """

    __tablename__ = "wf_static_configs"
    __table_args__ = (
        # The first rows of one target's ranking are an index walk (ORDER BY the key LIMIT n), its count an
        # index range; variant_hash makes a variant's rows (the variant page) covered too.
        Index(
            "ix_wf_static_rank",
            "task",
            "scope",
            "target",
            "key_spill",
            "key_occupancy",
            "key_registers",
            "key_shared",
            "evaluation_id",
            "variant_hash",
        ),
    )

    task: Mapped[str] = mapped_column(String(200), primary_key=True)
    scope: Mapped[int] = mapped_column(Integer, primary_key=True)  # 0: every campaign; else one campaign's id
    variant_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    params_key: Mapped[str] = mapped_column(String(1000), primary_key=True)
    evaluation_id: Mapped[int] = mapped_column(Integer)  # the newest ok search evaluation (no FK: a summary)
    target: Mapped[str | None] = mapped_column(String(100))  # its static_target; None: stored without facts
    # The key, never NULL so that an index orders it: fewest spills, highest occupancy (stored negated), fewest
    # registers, least shared memory; an unknown fact is 1e30 (occupancy: 1), after every known value.
    key_spill: Mapped[float] = mapped_column(Float)
    key_occupancy: Mapped[float] = mapped_column(Float)
    key_registers: Mapped[float] = mapped_column(Float)
    key_shared: Mapped[float] = mapped_column(Float)


class StaticCount(Base):
    """How many configurations each target's static ranking holds, per task and scope: ``wf_static_configs``
    counted by triggers on that table as it changes (revision 0007_static_summary), so ``best --static`` and the
    pages print a ranking's size without counting 55,000 index entries per request (57 ms of a leaderboard's
    request at 100,000 CPU evaluations under load). Never written by Python."""

    __tablename__ = "wf_static_counts"

    task: Mapped[str] = mapped_column(String(200), primary_key=True)
    scope: Mapped[int] = mapped_column(Integer, primary_key=True)  # as wf_static_configs.scope
    target: Mapped[str] = mapped_column(String(100), primary_key=True)  # "": without facts (a key is not NULL)
    configs: Mapped[int] = mapped_column(Integer)  # 0 once its last configuration moved to another target


class Measurement(Base):
    """Per-shape times of one evaluation (p20/p50/p80 ms), candidate and reference measured alike."""

    __tablename__ = "wf_measurements"

    id: Mapped[int] = mapped_column(primary_key=True)
    evaluation_id: Mapped[int] = mapped_column(ForeignKey("wf_evaluations.id", ondelete="CASCADE"), index=True)
    shape_key: Mapped[str] = mapped_column(String(400))
    shape: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    dtype: Mapped[str] = mapped_column(String(20))
    p20_ms: Mapped[float | None] = mapped_column(Float)
    p50_ms: Mapped[float | None] = mapped_column(Float)
    p80_ms: Mapped[float | None] = mapped_column(Float)
    ref_p50_ms: Mapped[float | None] = mapped_column(Float)
    speedup: Mapped[float | None] = mapped_column(Float)
    roofline_pct: Mapped[float | None] = mapped_column(Float)

    evaluation: Mapped[Evaluation] = relationship(back_populates="measurements")


class Plan(Base):
    """A parallelism plan and its prediction (parallel/), stored like kernel results."""

    __tablename__ = "wf_plans"
    __table_args__ = (Index("ix_wf_plans_lookup", "model_name", "cluster_name", "nodes"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("wf_campaigns.id"), index=True)
    model_name: Mapped[str] = mapped_column(String(200))
    cluster_name: Mapped[str] = mapped_column(String(200))
    nodes: Mapped[int] = mapped_column(Integer)
    model_spec: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    cluster_spec: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    plan: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # tp, pp, dp, cp, ep, micro_batch, ...
    plan_key: Mapped[str] = mapped_column(String(400))  # canonical JSON of plan
    source: Mapped[str] = mapped_column(String(20), default="search")  # search | enqueued | predict
    fits: Mapped[bool] = mapped_column(default=True)
    step_time_s: Mapped[float | None] = mapped_column(Float)
    mfu: Mapped[float | None] = mapped_column(Float)
    peak_mem_gb: Mapped[float | None] = mapped_column(Float)
    prediction: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # full breakdown
    warpforge_version: Mapped[str] = mapped_column(String(50), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Decision(Base):
    """A campaign's decision for one task: the winner accepted beyond noise (or none, and why), its speedup
    interval, and the re-benchmarked top-k, stored as data so that no reader re-ranks raw times."""

    __tablename__ = "wf_decisions"
    __table_args__ = (
        UniqueConstraint("campaign_id", "task"),  # a resumed campaign replaces its decision
        Index("ix_wf_decisions_task_gpu", "task", "timing_gpu"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("wf_campaigns.id"))
    task: Mapped[str] = mapped_column(String(200))
    backend: Mapped[str] = mapped_column(String(20))
    timing_source: Mapped[str | None] = mapped_column(String(20))  # live | recorded | None (nothing timed)
    timing_gpu: Mapped[str | None] = mapped_column(String(200))
    fingerprint: Mapped[str] = mapped_column(String(64), default="")
    accepted: Mapped[bool] = mapped_column(Boolean, default=False)
    evaluation_id: Mapped[int | None] = mapped_column(Integer)  # the winner's search evaluation (no FK: informative)
    variant_hash: Mapped[str | None] = mapped_column(String(64))
    variant_name: Mapped[str | None] = mapped_column(String(200))
    params: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    objective_ms: Mapped[float | None] = mapped_column(Float)
    speedup: Mapped[float | None] = mapped_column(Float)
    speedup_low: Mapped[float | None] = mapped_column(Float)
    speedup_high: Mapped[float | None] = mapped_column(Float)
    interval: Mapped[str] = mapped_column(String(200), default="")  # how the interval was obtained
    evaluations: Mapped[int] = mapped_column(Integer, default=0)  # search evaluations behind the decision
    measured: Mapped[int] = mapped_column(Integer, default=0)
    top_k: Mapped[list[Any]] = mapped_column(JSON, default=list)  # the re-benchmarked top-k, fastest first
    shapes: Mapped[list[Any]] = mapped_column(JSON, default=list)  # the winner's per-shape times
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    campaign: Mapped[Campaign] = relationship()


# --- the agent (agent/, migration 0003_agent) -------------------------------------------------------
class AgentCall(Base):
    """One LLM call of the agent: what was asked, what came back, what it became (never a key)."""

    __tablename__ = "wf_agent_calls"
    __table_args__ = (Index("ix_wf_agent_calls_lookup", "campaign_id", "task", "call_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("wf_campaigns.id"), index=True)
    task: Mapped[str] = mapped_column(String(200))
    call_key: Mapped[str] = mapped_column(String(100))  # "r2.s0.a1": round, slot, attempt (replay's lookup key)
    parents: Mapped[list[Any]] = mapped_column(JSON, default=list)  # source hashes of the parent variants
    model: Mapped[str] = mapped_column(String(200))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # sampling parameters sent
    messages: Mapped[list[Any]] = mapped_column(JSON, default=list)
    prompt_cut: Mapped[list[Any]] = mapped_column(JSON, default=list)  # sections the token budget dropped
    content: Mapped[str] = mapped_column(Text, default="")
    reasoning: Mapped[str] = mapped_column(Text, default="")
    finish_reason: Mapped[str] = mapped_column(String(40), default="")
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    latency_s: Mapped[float] = mapped_column(Float, default=0.0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    outcome: Mapped[str] = mapped_column(String(20))  # agent/parse.py OUTCOMES
    message: Mapped[str] = mapped_column(Text, default="")
    variant_hash: Mapped[str | None] = mapped_column(String(64), index=True)
    ast_hash: Mapped[str | None] = mapped_column(String(64))
    replayed: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AgentRun(Base):
    """The agent's totals per (campaign, task) and the budget that stopped it."""

    __tablename__ = "wf_agent_runs"
    __table_args__ = (UniqueConstraint("campaign_id", "task"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("wf_campaigns.id"), index=True)
    task: Mapped[str] = mapped_column(String(200))
    stop_reason: Mapped[str] = mapped_column(String(40), default="")  # calls | tokens | cost | wall_time | ...
    calls: Mapped[int] = mapped_column(Integer, default=0)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    wall_s: Mapped[float] = mapped_column(Float, default=0.0)
    outcomes: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # outcome -> count
    settings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # effective agent settings (replay reuses)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class AgentPlan(Base):
    """A parallelism plan an LLM proposed (``plan search --proposer llm``): the call that proposed it, its
    rationale, what became of it (parallel/plan_agent/parse.py PLAN_OUTCOMES) and its rank among the search's fitting
    plans. The plan's prediction is in ``wf_plans`` (same campaign, same ``plan_key``, source ``llm``)."""

    __tablename__ = "wf_agent_plans"

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("wf_campaigns.id"), index=True)
    call_id: Mapped[int | None] = mapped_column(ForeignKey("wf_agent_calls.id"), index=True)
    task: Mapped[str] = mapped_column(String(200))  # "plan:<model>@<cluster>x<nodes>", as in wf_agent_calls
    slot: Mapped[int] = mapped_column(Integer, default=0)  # position in the answer's list of plans
    plan: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # as proposed (before defaults are filled)
    plan_key: Mapped[str | None] = mapped_column(String(400))  # canonical plan (wf_plans.plan_key) once built
    outcome: Mapped[str] = mapped_column(String(20))  # ranked | does_not_fit | invalid | duplicate
    message: Mapped[str] = mapped_column(Text, default="")
    rationale: Mapped[str] = mapped_column(Text, default="")
    rank: Mapped[int | None] = mapped_column(Integer)  # 1-based among the final search's fitting plans
    step_time_s: Mapped[float | None] = mapped_column(Float)
    tokens_per_s: Mapped[float | None] = mapped_column(Float)
    peak_mem_gb: Mapped[float | None] = mapped_column(Float)
    replayed: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


# --- warpforge optimize (optimize/, migration 0006_optimize_runs) -------------------------------------------
class OptimizeRun(Base):
    """One ``warpforge optimize`` run: the columns the dashboard lists and its whole report
    (optimize/report.py ``OptimizeReport``) as a JSON document."""

    __tablename__ = "wf_optimize_runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    target: Mapped[str] = mapped_column(String(1000))  # the TARGET as given (a folder, a .py file, module:function)
    kind: Mapped[str] = mapped_column(String(40))  # transformers | kernelbench | function
    mode: Mapped[str] = mapped_column(String(10))  # train | infer
    dtype: Mapped[str] = mapped_column(String(20))
    gpu: Mapped[str] = mapped_column(String(200))  # the GPU whose roofline priced the step
    coverage: Mapped[float] = mapped_column(Float)  # share of the estimated step in regions with a task
    speedup: Mapped[float | None] = mapped_column(Float)  # measured when measured, else the estimate
    measured: Mapped[bool] = mapped_column(Boolean, default=False)  # False: ``speedup`` is an estimate
    regions: Mapped[int] = mapped_column(Integer, default=0)
    patched: Mapped[int] = mapped_column(Integer, default=0)  # regions whose calls ran an exported kernel
    report: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    warpforge_version: Mapped[str] = mapped_column(String(50), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
