"""Reads and writes of warpforge's results. The orchestrator is the only writer (docs/design.md §3.5).

Example::

    >>> from warpforge.db.session import Database
    >>> from warpforge.db import store
    >>> db = Database("sqlite:///wf.db"); db.upgrade()                     # doctest: +SKIP
    >>> with db.session() as s: rows = store.results(s, task="softmax")   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from warpforge.compile_facts import static_columns
from warpforge.db.models import (
    Campaign,
    Decision,
    Evaluation,
    Hardware,
    Measurement,
    TaskRecord,
    VariantRecord,
    utcnow,
)
from warpforge.db.rows import params_key
from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.kernels.taskdef import Task, shape_key
from warpforge.kernels.variant import Variant


def ensure_task(session: Session, task: Task) -> TaskRecord:
    row = session.scalar(
        select(TaskRecord).where(TaskRecord.name == task.name, TaskRecord.source_hash == task.source_hash)
    )
    if row is None:
        row = TaskRecord(name=task.name, source_hash=task.source_hash, description=task.description)
        session.add(row)
        session.flush()
    return row


def ensure_variant(
    session: Session,
    variant: Variant,
    origin: str = "template",
    *,
    proposer: str | None = None,
    parents: Sequence[str] = (),
    proposal_id: str | None = None,
    rationale: str = "",
) -> VariantRecord:
    """The variant's row, created on first sight with where it came from (its lineage).

    A source is one row forever (content hash): a later proposal of the same source keeps the first
    lineage, since the first proposer is the one that actually produced it. ``proposer`` defaults to
    ``origin`` (a template variant is proposed by the ``template`` proposer).
    """
    row = session.scalar(select(VariantRecord).where(VariantRecord.source_hash == variant.source_hash))
    if row is None:
        row = VariantRecord(
            source_hash=variant.source_hash,
            task=variant.task,
            name=variant.name,
            origin=origin,
            source=variant.source,
            space=variant.space,
            proposer=proposer if proposer is not None else origin,
            parents=list(parents),
            proposal_id=proposal_id,
            rationale=rationale,
        )
        session.add(row)
        session.flush()
    return row


def get_campaign(session: Session, name: str) -> Campaign | None:
    return session.scalar(select(Campaign).where(Campaign.name == name))


def set_campaign_status(session: Session, campaign: str | int, status: str) -> None:
    """Mark a campaign (by name or id) ``finished``, ``failed``, ...; a missing one is left alone."""
    row = session.get(Campaign, campaign) if isinstance(campaign, int) else get_campaign(session, campaign)
    if row is not None:
        row.status = status


def has_evaluations(session: Session, campaign_id: int) -> bool:
    return session.scalar(select(Evaluation.id).where(Evaluation.campaign_id == campaign_id).limit(1)) is not None


def stored_param_keys(
    session: Session,
    variant_hashes: Sequence[str],
    *,
    backend: str,
    task_hash: str,
    versions: dict[str, str],
    campaign_id: int | None = None,
) -> set[tuple[str, str]]:
    """(variant hash, params key) of every stored evaluation that a new one with the same source, parameters,
    backend, task and software would repeat (one query instead of one per proposal: each ~1 ms on SQLite)."""
    query = select(Evaluation.variant_hash, Evaluation.params_key).where(
        Evaluation.variant_hash.in_(list(variant_hashes)),
        Evaluation.backend == backend,
        Evaluation.task_hash == task_hash,
        Evaluation.torch_version == versions.get("torch", ""),
        Evaluation.triton_version == versions.get("triton", ""),
    )
    if campaign_id is not None:
        query = query.where(Evaluation.campaign_id == campaign_id)
    return {(h, k) for h, k in session.execute(query)}


def campaign_variants(session: Session, campaign: str, task: str) -> list[VariantRecord]:
    """The variants a campaign evaluated for a task, oldest first."""
    return list(
        session.scalars(
            select(VariantRecord)
            .join(Evaluation, Evaluation.variant_id == VariantRecord.id)
            .join(Campaign)
            .where(Campaign.name == campaign, Evaluation.task == task)
            .distinct()
            .order_by(VariantRecord.id)
        ).all()
    )


def study_results(
    session: Session, campaign: str, study_name: str
) -> list[tuple[dict[str, Any], str, str, float | None]]:
    """(params, verdict, reason, objective ms) of a study's stored search evaluations, in order."""
    rows = session.execute(
        select(Evaluation.params, Evaluation.verdict, Evaluation.reason, Evaluation.objective_ms)
        .join(Campaign)
        .where(Campaign.name == campaign, Evaluation.study_name == study_name, Evaluation.final.is_(False))
        .order_by(Evaluation.id)
    ).all()
    return [(dict(p), v, r, ms) for p, v, r, ms in rows]


def create_campaign(session: Session, name: str, spec: dict[str, Any]) -> Campaign:
    row = Campaign(name=name, spec=spec, status="running")
    session.add(row)
    session.flush()
    return row


def find_evaluation(
    session: Session,
    variant_hash: str,
    params: dict[str, Any],
    backend: str,
    versions: dict[str, str],
    task_hash: str | None = None,
    campaign: str | None = None,
) -> Evaluation | None:
    """A stored evaluation of exactly this source, params, backend, software and task definition, if any.

    ``campaign`` restricts the answer to one campaign: live GPU times are only reusable on the GPU that
    measured them, which a campaign pins and another host sharing the database may not have.
    """
    stmt = (
        select(Evaluation)
        .where(
            Evaluation.variant_hash == variant_hash,
            Evaluation.params_key == params_key(params),
            Evaluation.backend == backend,
            Evaluation.torch_version == versions.get("torch", ""),
            Evaluation.triton_version == versions.get("triton", ""),
        )
        .order_by(Evaluation.id.desc())
        .limit(1)
    )
    if task_hash is not None:
        stmt = stmt.where(Evaluation.task_hash == task_hash)
    if campaign is not None:
        stmt = stmt.join(Campaign).where(Campaign.name == campaign)
    return session.scalar(stmt)


def evaluation_values(
    result: EvalResult,
    *,
    task: Task,
    variant_hash: str,
    study_name: str | None = None,
    trial_number: int | None = None,
    final: bool = False,
) -> dict[str, Any]:
    """The ``wf_evaluations`` row of one result, less its campaign and variant ids: the one definition of
    what is stored, shared by :func:`save_evaluation` (ORM) and ``db/writer.py``'s batched Core inserts."""
    timing = result.timing
    document = result.model_dump(mode="json")
    return dict(
        task=task.name,
        task_hash=task.source_hash,
        variant_hash=variant_hash,
        params=result.params,
        params_key=params_key(result.params),
        backend=result.backend,
        verdict=result.verdict.value,
        reason=result.reason,
        message=result.message,
        device=result.device,
        fingerprint=result.fingerprint,
        torch_version=result.versions.get("torch", ""),
        triton_version=result.versions.get("triton", ""),
        warpforge_version=result.versions.get("warpforge", ""),
        timing_source=timing.source if timing else None,
        timing_gpu=timing.gpu if timing else None,
        objective_ms=result.objective_ms,
        speedup=result.speedup,
        compile_s=result.compile_s,
        wall_s=result.wall_s,
        study_name=study_name,
        trial_number=trial_number,
        final=final,
        result=document,
        **static_columns(document.get("resources")),
    )


def measurement_values(result: EvalResult) -> list[dict[str, Any]]:
    """The ``wf_measurements`` rows of one result (one per shape), less their evaluation id."""
    return [
        dict(
            shape_key=shape_key(s.shape),
            shape=s.shape,
            dtype=s.dtype,
            p20_ms=s.p20_ms,
            p50_ms=s.p50_ms,
            p80_ms=s.p80_ms,
            ref_p50_ms=s.ref_p50_ms,
            speedup=s.speedup,
            roofline_pct=s.roofline_pct,
        )
        for s in result.shapes
    ]


def hardware_values(result: EvalResult) -> dict[str, Any] | None:
    """The ``wf_hardware`` row a result's fingerprint names (None without a fingerprint)."""
    if not result.fingerprint:
        return None
    return dict(
        fingerprint=result.fingerprint,
        name=result.device or "unknown",
        details={"timing_gpu": result.timing.gpu if result.timing else None},
    )


def save_evaluation(
    session: Session,
    result: EvalResult,
    *,
    task: Task,
    variant: VariantRecord,
    campaign: Campaign | None = None,
    study_name: str | None = None,
    trial_number: int | None = None,
    final: bool = False,
) -> Evaluation:
    """Store one result with its per-shape measurements, in the caller's transaction.

    ``final``: the result belongs to the campaign's final top-k re-benchmark, not to its search. The
    campaign stores its results through ``db/writer.py`` instead (batched, on one connection): same rows.
    """
    ensure_task(session, task)
    hardware = hardware_values(result)
    if hardware is not None and session.get(Hardware, result.fingerprint) is None:
        session.add(Hardware(**hardware))
    row = Evaluation(
        campaign=campaign,
        variant=variant,
        **evaluation_values(
            result,
            task=task,
            variant_hash=variant.source_hash,
            study_name=study_name,
            trial_number=trial_number,
            final=final,
        ),
    )
    for values in measurement_values(result):
        row.measurements.append(Measurement(**values))
    session.add(row)
    session.flush()
    return row


def save_decision(
    session: Session,
    campaign: Campaign,
    task: str,
    *,
    backend: str,
    accepted: bool,
    note: str,
    timing_source: str | None = None,
    timing_gpu: str | None = None,
    fingerprint: str = "",
    variant_hash: str | None = None,
    variant_name: str | None = None,
    params: dict[str, Any] | None = None,
    objective_ms: float | None = None,
    speedup: float | None = None,
    speedup_low: float | None = None,
    speedup_high: float | None = None,
    interval: str = "",
    evaluations: int = 0,
    measured: int = 0,
    top_k: Sequence[dict[str, Any]] = (),
    shapes: Sequence[dict[str, Any]] = (),
) -> Decision:
    """Store (or, for a resumed campaign, replace) the campaign's decision for one task.

    The winner's search evaluation (same campaign, source and params, not the final re-benchmark) is
    linked as ``evaluation_id`` so a reader can open its full result.
    """
    evaluation_id = None
    if variant_hash is not None and params is not None:
        evaluation_id = session.scalar(
            select(Evaluation.id)
            .where(
                Evaluation.campaign_id == campaign.id,
                Evaluation.task == task,
                Evaluation.variant_hash == variant_hash,
                Evaluation.params_key == params_key(params),
                Evaluation.final.is_(False),
            )
            .order_by(Evaluation.id)
            .limit(1)
        )
    row = session.scalar(select(Decision).where(Decision.campaign_id == campaign.id, Decision.task == task))
    if row is None:
        row = Decision(campaign_id=campaign.id, task=task)
        session.add(row)
    for name, value in dict(
        backend=backend,
        accepted=accepted,
        note=note,
        timing_source=timing_source,
        timing_gpu=timing_gpu,
        fingerprint=fingerprint,
        variant_hash=variant_hash,
        variant_name=variant_name,
        params=params,
        objective_ms=objective_ms,
        speedup=speedup,
        speedup_low=speedup_low,
        speedup_high=speedup_high,
        interval=interval,
        evaluations=evaluations,
        measured=measured,
        top_k=list(top_k),
        shapes=list(shapes),
        evaluation_id=evaluation_id,
        created_at=utcnow(),
    ).items():
        setattr(row, name, value)
    session.flush()
    return row


def results(
    session: Session, campaign: str | None = None, task: str | None = None, limit: int = 200
) -> list[Evaluation]:
    stmt = select(Evaluation).options(selectinload(Evaluation.variant), selectinload(Evaluation.campaign))
    if campaign is not None:
        stmt = stmt.join(Campaign).where(Campaign.name == campaign)
    if task is not None:
        stmt = stmt.where(Evaluation.task == task)
    return list(session.scalars(stmt.order_by(Evaluation.id.desc()).limit(limit)))


@dataclass(frozen=True)
class BestRow:
    evaluation: Evaluation
    time_ms: float  # the objective (geomean over shapes) or the one shape's p50
    shape: str | None


def best(
    session: Session, task: str, gpu: str | None = None, shape: str | None = None, limit: int = 5
) -> list[BestRow]:
    """Fastest correct measured configurations of a task, never mixing GPUs within one answer.

    ``gpu`` filters by a substring of the GPU name the times came from; ``shape`` ranks by that
    shape's p50 (``M=4096,N=4096``). Unmeasured evaluations are never ranked.
    """
    stmt = (
        select(Evaluation)
        .options(selectinload(Evaluation.measurements), selectinload(Evaluation.variant))
        .where(Evaluation.task == task, Evaluation.verdict == Verdict.OK.value, Evaluation.objective_ms.is_not(None))
    )
    if gpu is not None:
        stmt = stmt.where(Evaluation.timing_gpu.ilike(f"%{gpu}%"))
    rows: list[BestRow] = []
    for ev in session.scalars(stmt):
        if shape is None:
            rows.append(BestRow(ev, float(ev.objective_ms or 0.0), None))
            continue
        for m in ev.measurements:
            if m.shape_key == shape and m.p50_ms is not None:
                rows.append(BestRow(ev, m.p50_ms, shape))
    rows.sort(key=lambda r: r.time_ms)
    if rows and gpu is None:
        # Times from different GPUs are not comparable: answer for the GPU of the overall fastest.
        first_gpu = rows[0].evaluation.fingerprint
        rows = [r for r in rows if r.evaluation.fingerprint == first_gpu]
    return rows[:limit]


def result_of(row: Evaluation) -> EvalResult:
    return EvalResult.model_validate(row.result)
