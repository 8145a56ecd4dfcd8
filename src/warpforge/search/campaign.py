"""The campaign engine: proposals -> Optuna ask/tell per variant -> evaluator -> database.

One Optuna study per (campaign, task, variant), stored in the same database as warpforge's tables;
the trial budget and wall-time budget are split across a task's variants; every evaluation is stored
before its trial is told, so a campaign killed at any point resumes (``resume=True``) without losing
or repeating a completed evaluation: a trial left RUNNING is re-proposed, and its stored result (if
it got that far) is reused instead of evaluated again.

Example::

    >>> spec = CampaignSpec(name="demo", tasks=["softmax"], trials=20)   # doctest: +SKIP
    >>> summary = run_campaign(spec)                                     # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import optuna

from warpforge.agent.proposers import get_proposer
from warpforge.db import store
from warpforge.db.session import Database
from warpforge.evaluator.backends import Backend, get_backend, resolve_backend_name, software_versions
from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.evaluator.stages import Job, space_stage
from warpforge.kernels.task import Task, get_task
from warpforge.kernels.variant import Variant
from warpforge.search.samplers import DEFAULT_SAMPLER
from warpforge.search.space import SearchSpace
from warpforge.search.strategy import Proposal, Strategy, make_study


class CampaignError(RuntimeError):
    """The campaign cannot start or go on; the message says what to do."""


@dataclass
class CampaignSpec:
    name: str
    tasks: list[str]
    trials: int = 20  # per task, split across its variants
    time_budget_s: float | None = None
    proposer: str = "template"
    sampler: str = DEFAULT_SAMPLER
    backend: str = "auto"
    target: str = "sm_90"
    seed: int | None = None
    resume: bool = False
    db_url: str | None = None
    seeds: int = 2  # correctness seeds per check case
    variant_files: list[str] = field(default_factory=list)  # user variants searched beside the proposer's


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


@dataclass
class _Arm:
    variant: Variant
    record_id: int
    strategy: Strategy
    summary: VariantSummary
    study_name: str
    exhausted: bool = False


def study_name(campaign: str, task: str, variant: Variant) -> str:
    return f"{campaign}:{task}:{variant.name}:{variant.source_hash[:12]}"


def _pick_arm(arms: list[_Arm], step: int) -> _Arm | None:
    """Budget split: round-robin until each variant has 3 evaluations, then every other trial goes to the
    variant with the best measured time (when there are measurements) and the rest round-robin."""
    live = [a for a in arms if not a.exhausted]
    if not live:
        return None
    fewest = min(live, key=lambda a: a.strategy.n_told)
    measured = [a for a in live if a.strategy.best is not None]
    if fewest.strategy.n_told < 3 or not measured or step % 2 == 0:
        return fewest
    return min(measured, key=lambda a: a.strategy.best[1])  # type: ignore[index]


def run_campaign(spec: CampaignSpec, on_event: Callable[[Event], None] | None = None,
                 on_start: Callable[[str, int], None] | None = None) -> CampaignSummary:
    start = time.monotonic()
    db = Database(spec.db_url)
    db.upgrade()
    tasks = [get_task(name) for name in spec.tasks]
    with db.session() as s:
        existing = store.get_campaign(s, spec.name)
        if existing is not None and not spec.resume:
            raise CampaignError(f"campaign {spec.name!r} already exists in {db.safe_url}: pass --resume to continue "
                                "it, or choose another --campaign name")
        if existing is None and spec.resume:
            raise CampaignError(f"no campaign {spec.name!r} in {db.safe_url} to resume; drop --resume to start it")
        if existing is None:
            spec_dict = {k: v for k, v in asdict(spec).items() if k not in ("db_url", "resume")}
            store.create_campaign(s, spec.name, spec_dict)
    summaries, requeued = [], 0
    for task in tasks:
        deadline = None if spec.time_budget_s is None else start + spec.time_budget_s
        summary, n = _run_task(db, spec, task, deadline, on_event, on_start)
        summaries.append(summary)
        requeued += n
    with db.session() as s:
        row = store.get_campaign(s, spec.name)
        if row is not None:
            row.status = "finished"
    return CampaignSummary(spec.name, db.safe_url, spec.resume, requeued, summaries, time.monotonic() - start)


def _run_task(db: Database, spec: CampaignSpec, task: Task, deadline: float | None,
              on_event: Callable[[Event], None] | None,
              on_start: Callable[[str, int], None] | None) -> tuple[TaskSummary, int]:
    backend_name = resolve_backend_name(spec.backend, task.name)
    backend = get_backend(backend_name, task.name)
    storage = optuna.storages.RDBStorage(db.url)
    versions = software_versions()
    try:
        arms, requeued = _open_arms(db, spec, task, backend, storage)
        already = sum(a.strategy.n_told for a in arms)
        budget = max(spec.trials - (already if spec.resume else 0), 0)
        if on_start is not None:
            on_start(task.name, budget)
        done = 0
        while done < budget and (deadline is None or time.monotonic() < deadline):
            arm = _pick_arm(arms, done)
            if arm is None:
                break
            proposal = arm.strategy.ask()
            if proposal is None:
                arm.exhausted = True
                continue
            result, cached = _evaluate_or_reuse(db, spec, task, backend, arm, proposal, versions)
            _tell(arm, proposal, result)
            done += 1
            if on_event is not None:
                best = _best_arm(arms)
                on_event(Event(task.name, arm.variant.name, done, budget, result, cached,
                               best.strategy.best[1] if best and best.strategy.best else None,
                               f"{best.variant.name} {best.strategy.best[0]}" if best and best.strategy.best else None))
        return _summarize(db, spec, task, backend, arms), requeued
    finally:
        backend.close()


def _open_arms(db: Database, spec: CampaignSpec, task: Task, backend: Backend,
               storage: optuna.storages.BaseStorage) -> tuple[list[_Arm], int]:
    variants = get_proposer(spec.proposer, spec.variant_files).propose(task)
    if not variants:
        raise CampaignError(f"the {spec.proposer} proposer has no variants for task {task.name!r}")
    arms, requeued = [], 0
    for i, variant in enumerate(variants):
        if not variant.space:
            raise CampaignError(f"variant {variant.name} of {task.name} has an empty SPACE: nothing to search")
        failure, configs = space_stage(backend.pool, Job(task, variant, {}))
        if failure is not None:
            raise CampaignError(f"variant {variant.name}: {failure.verdict.value}: {failure.message}")
        if not configs:
            raise CampaignError(f"variant {variant.name} of {task.name}: no configuration of its SPACE satisfies "
                                "constraints() on the benchmark shapes; widen SPACE or fix constraints")
        space = SearchSpace(variant.space, [tuple(c[n] for n in variant.space) for c in configs])
        name = study_name(spec.name, task.name, variant)
        seed = None if spec.seed is None else spec.seed + i
        strategy = Strategy(space, make_study(name, storage, spec.sampler, seed), spec.sampler, seed)
        if spec.resume:
            requeued += strategy.recover()
        with db.session() as s:
            record = store.ensure_variant(s, variant, origin=spec.proposer)
            record_id = record.id
        arms.append(_Arm(variant, record_id, strategy, VariantSummary(variant.name, variant.source_hash, len(space)),
                         name))
    return arms, requeued


def _evaluate_or_reuse(db: Database, spec: CampaignSpec, task: Task, backend: Backend, arm: _Arm,
                       proposal: Proposal, versions: dict[str, str]) -> tuple[EvalResult, bool]:
    """A configuration already evaluated with this source, backend and software is never evaluated again."""
    with db.session() as s:
        row = store.find_evaluation(s, arm.variant.source_hash, proposal.params, backend.name, versions)
        if row is not None:
            return store.result_of(row), True
    result = backend.evaluate(Job(task, arm.variant, proposal.params, seeds=spec.seeds, target=spec.target))
    with db.session() as s:  # stored before the trial is told: a crash in between re-proposes, then reuses
        campaign = store.get_campaign(s, spec.name)
        variant = s.get(store.VariantRecord, arm.record_id)
        assert variant is not None
        store.save_evaluation(s, result, task=task, variant=variant, campaign=campaign, study_name=arm.study_name,
                              trial_number=proposal.trial.number)
    return result, False


def _tell(arm: _Arm, proposal: Proposal, result: EvalResult) -> None:
    attrs = {"verdict": result.verdict.value, "reason": result.reason}
    if result.verdict is not Verdict.OK:
        arm.strategy.tell(proposal, None, failed=True, attrs=attrs)
    else:
        arm.strategy.tell(proposal, result.objective_ms, attrs=attrs)


def _best_arm(arms: list[_Arm]) -> _Arm | None:
    measured = [a for a in arms if a.strategy.best is not None]
    return min(measured, key=lambda a: a.strategy.best[1]) if measured else None  # type: ignore[index]


def _summarize(db: Database, spec: CampaignSpec, task: Task, backend: Backend, arms: list[_Arm]) -> TaskSummary:
    with db.session() as s:
        rows = [r for r in store.results(s, campaign=spec.name, task=task.name, limit=100_000)]
        by_hash: dict[str, list[Any]] = {}
        for r in rows:
            by_hash.setdefault(r.variant_hash, []).append(r)
        measured = 0
        best: tuple[float, Any] | None = None
        for arm in arms:
            summary = arm.summary
            for r in by_hash.get(arm.variant.source_hash, []):
                summary.evaluated += 1
                summary.verdicts[r.verdict] = summary.verdicts.get(r.verdict, 0) + 1
                if r.objective_ms is not None and r.verdict == "ok":
                    measured += 1
                    if summary.best_ms is None or r.objective_ms < summary.best_ms:
                        summary.best_ms, summary.best_params = r.objective_ms, r.params
                    if best is None or r.objective_ms < best[0]:
                        best = (r.objective_ms, r)
    if backend.measures or measured:
        gpu = best[1].timing_gpu if best else "a GPU"
        source = best[1].timing_source if best else backend.name
        timing = f"{measured} of {len(rows)} evaluations measured ({source} times from {gpu})"
    else:
        timing = (f"0 of {len(rows)} evaluations measured: no GPU here and no recorded GPU times for these variants; "
                  "configurations were checked for correctness (Triton interpreter) and compiled for "
                  f"{spec.target}, but not ranked. Run on a CUDA machine or record with benchmarks/record_spaces.py")
    out = TaskSummary(task.name, backend.name, len(rows), measured, timing, [a.summary for a in arms])
    if best is not None:
        row = best[1]
        out.best_variant, out.best_params, out.best_ms, out.best_speedup = (
            row.variant.name, row.params, row.objective_ms, row.speedup)
    return out
