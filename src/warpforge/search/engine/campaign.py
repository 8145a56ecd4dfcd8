"""The campaign engine: proposals -> Optuna ask/tell per variant -> worker pool -> database.

One Optuna study per (campaign, task, variant), stored in the same database as warpforge's tables; the
trial budget and wall-time budget are split across a task's variants. Several proposals are in flight
at once (``pool.depth``: enough that no worker waits for the orchestrator); the completions one poll
returns are stored in one transaction (db/writer.py) *before* any of their trials is told, so a campaign
killed at any point resumes (``resume=True``) without losing or repeating a completed evaluation: trials
left RUNNING are re-proposed first, and a stored result (the kill fell between store and tell) is reused.

A new best is adopted only when faster beyond noise (search/engine/acceptance.py); the campaign ends by
re-benchmarking its top-k where the backend measures live, and reports speedups with intervals.

The pieces: the spec (search/engine/spec.py), an arm per variant (search/engine/arms.py), one task's search loop
(search/engine/taskrun.py) and its ending (search/engine/final.py); this module runs the tasks of a campaign in turn.

Example::

    >>> spec = CampaignSpec(name="demo", tasks=["softmax"], trials=20, workers=4)   # doctest: +SKIP
    >>> summary = run_campaign(spec)                                                # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, replace

import optuna

from warpforge.db import store
from warpforge.db.session import Database
from warpforge.evaluator.run.pool import EvalPool, PoolConfig
from warpforge.kernels.task import get_task
from warpforge.search.engine.arms import study_name
from warpforge.search.engine.mirror import optuna_storage
from warpforge.search.engine.spec import RESUME_KEEPS, CampaignError, CampaignSpec, resumed_spec
from warpforge.search.engine.summary import CampaignSummary, Event
from warpforge.search.engine.taskrun import TaskRun
from warpforge.search.samplers.registry import resolve_sampler

__all__ = ["RESUME_KEEPS", "CampaignError", "CampaignSpec", "Event", "resumed_spec", "run_campaign", "study_name"]


def run_campaign(
    spec: CampaignSpec,
    on_event: Callable[[Event], None] | None = None,
    on_start: Callable[[str, int], None] | None = None,
    pool_config: PoolConfig | None = None,
) -> CampaignSummary:
    """Run (or resume) a campaign; ``pool_config`` overrides the pool the spec describes (tests, benchmarks).

    A new campaign that fails before storing its first evaluation (no variants, no feasible configuration,
    a worker pool that cannot start, Ctrl-C during set-up) does not keep its name: a corrected re-run may
    use the same ``--campaign`` without ``--resume``.
    """
    created: list[str] = []
    try:
        return _run_campaign(spec, on_event, on_start, pool_config, created)
    except BaseException:
        if created:
            _release_if_unused(spec.db_url, spec.name)
        raise


def _release_if_unused(url: str | None, name: str) -> None:
    """Forget a campaign created by this run that stored nothing (its row and its empty Optuna studies)."""
    try:
        db = Database(url)
        with db.session() as s:
            row = store.get_campaign(s, name)
            if row is None or store.has_evaluations(s, row.id):
                return
            s.delete(row)
        storage = optuna_storage(db.url)
        for study in optuna.get_all_study_names(storage):
            if study.rsplit(":", 3)[0] == name:  # study_name(): "{campaign}:{task}:{variant}:{hash}"
                optuna.delete_study(study_name=study, storage=storage)
    except Exception:  # noqa: BLE001 - the original error matters more; the name then stays taken
        return


def _run_campaign(
    spec: CampaignSpec,
    on_event: Callable[[Event], None] | None,
    on_start: Callable[[str, int], None] | None,
    pool_config: PoolConfig | None,
    created: list[str],
) -> CampaignSummary:
    start = time.monotonic()
    db = Database(spec.db_url)
    db.upgrade()
    with db.session() as s:
        existing = store.get_campaign(s, spec.name)
        if existing is not None and not spec.resume:
            raise CampaignError(
                f"campaign {spec.name!r} already exists in {db.safe_url}: pass --resume to continue "
                "it, or choose another --campaign name"
            )
        if existing is None and spec.resume:
            raise CampaignError(f"no campaign {spec.name!r} in {db.safe_url} to resume; drop --resume to start it")
        if existing is None:
            spec = replace(spec, sampler=resolve_sampler(spec.sampler))  # stored versioned: wf-default@<n>
            spec_dict = {k: v for k, v in asdict(spec).items() if k not in ("db_url", "resume", "ray_address")}
            store.create_campaign(s, spec.name, spec_dict)
            created.append(spec.name)
        else:
            spec = resumed_spec(spec, dict(existing.spec))
    tasks = [get_task(name) for name in spec.tasks]
    summaries, requeued = [], 0
    pools: dict[str, EvalPool] = {}  # one per backend, shared by the tasks that use it (actors start once)
    try:
        for i, task in enumerate(tasks):
            # The wall-time budget is the campaign's: each task gets an equal share of what is left.
            left = None if spec.time_budget_s is None else spec.time_budget_s - (time.monotonic() - start)
            deadline = None if left is None else time.monotonic() + max(left, 0.0) / (len(tasks) - i)
            summary, n = TaskRun(
                db, spec, task, pools, pool_config or spec.pool_config(), deadline, on_event, on_start
            ).run()
            summaries.append(summary)
            requeued += n
    finally:
        for pool in pools.values():
            pool.close()
    with db.session() as s:
        store.set_campaign_status(s, spec.name, "finished")
    return CampaignSummary(spec.name, db.safe_url, spec.resume, requeued, summaries, time.monotonic() - start)
