"""Checks before the first evaluation: what ``run`` and ``eval`` can refuse before anything runs or is stored.

A command that cannot work should say so in one line, at once, with what to do instead, rather than spend
its budget on ``unsupported`` rows or reserve a campaign name. Everything here only parses
files and asks the machine what it has; the one exception, :func:`pick_params`, runs the variant's
``constraints`` the way the campaign does, in a sandboxed child (evaluator/run/stages.py ``space_stage``),
because constraints are candidate code.

Example::

    >>> spec = check_run(CampaignSpec(name="c", tasks=["problem.py"]))  # doctest: +SKIP
    VariantError: task 'relu' (problem.py) has no variants to search: ... pass --variant-file FILE.py ...
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warpforge.errors import UsageError
from warpforge.kernels.members import DERIVED_TEMPLATES
from warpforge.kernels.task import get_task
from warpforge.kernels.taskdef import Task
from warpforge.kernels.variant import (
    TEMPLATES_DIR,
    Variant,
    VariantError,
    builtin_variants,
    check_space,
    first_config,
    load_variant,
)
from warpforge.registry import Registry

if TYPE_CHECKING:
    from warpforge.evaluator.result import EvalResult
    from warpforge.evaluator.sandbox.supervisor import ChildPool
    from warpforge.search.engine.campaign import CampaignSpec


def _proposers() -> Registry[Any]:
    from warpforge.agent.proposers import PROPOSERS

    return PROPOSERS


def no_variants_message(task: Task, proposers: Container[str] | None = None) -> str:
    """Why a task has nothing to search and the two ways to give it something (one line)."""
    registry = _proposers() if proposers is None else proposers
    covered = sorted(
        {p.name for p in TEMPLATES_DIR.iterdir() if p.is_dir() and any(p.glob("[!_]*.py"))} | set(DERIVED_TEMPLATES)
    )
    llm = (
        "or let an LLM write them: --proposer llm with WARPFORGE_LLM_MODEL and OPENAI_API_KEY set (or "
        "WARPFORGE_LLM_CONFIG=models.yaml)"
        if "llm" in registry
        else "(an LLM proposer, --proposer llm, is not in this installation yet)"
    )
    return (
        f"task {task.name!r} ({task.path}) has no variants to search: the template library covers "
        f"{', '.join(covered)} only. Write a variant file (TASK = {task.name!r}, a literal SPACE, "
        f"launch(*inputs, **params); copy a template from {TEMPLATES_DIR}) and pass --variant-file FILE.py "
        f"{llm}"
    )


def matched_root() -> Path:
    """Where matched problems' copies and their templates are written (evaluator/judge/matching.py)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("warpforge")) / "matched"


def with_matched_tasks(spec: CampaignSpec) -> CampaignSpec:
    """Each by-path task the templates do not cover, searched as the built-in task it computes (decided
    numerically, evaluator/judge/matching.py), or a one-line error naming it, what was tried and what to do."""
    from warpforge.evaluator.judge.matching import find_match, matched_files, no_match_message

    given = {load_variant(f).task for f in spec.variant_files}
    names, files = [], list(spec.variant_files)
    for name in spec.tasks:
        task = get_task(name)
        if task.builtin or builtin_variants(task.name) or task.name in given or task.init_inputs is None:
            names.append(name)
            continue
        match, tried = find_match(task)
        if match is None:
            raise VariantError(no_match_message(task, tried))
        copy, variants = matched_files(task, match, matched_root())
        if not variants:
            raise VariantError(
                f"{task.path.name} computes the built-in task {match.describe()}, but none of its "
                "templates can take the problem's arguments that way: pass --variant-file FILE.py "
                f"(TASK = {task.name!r}) or --proposer llm"
            )
        names.append(str(copy))
        files += [str(v) for v in variants]
    return replace(spec, tasks=names, variant_files=files)


def _stored_spec(spec: CampaignSpec) -> CampaignSpec:
    """A resumed campaign runs its stored spec (campaign.resumed_spec); unknown campaigns are left to run_campaign."""
    from warpforge.db import store
    from warpforge.db.session import Database
    from warpforge.search.engine.campaign import resumed_spec

    db = Database(spec.db_url, create=False)
    db.upgrade()
    with db.session() as s:
        row = store.get_campaign(s, spec.name)
        stored = dict(row.spec) if row is not None else None
    return spec if stored is None else resumed_spec(spec, stored)


def check_run(spec: CampaignSpec) -> CampaignSpec:
    """The spec to run, with ``auto`` resolved; raises a one-line usage error when the run cannot work.

    Checks, in order: the proposer exists; every task loads; every ``--variant-file`` parses and belongs to a
    task of the run; the template proposer has variants for every task, each with a valid SPACE; the
    backend can evaluate here (evaluator/run/backend.py ``usable_backend``). ``auto`` becomes the concrete
    backend when all tasks resolve alike, so the campaign stores (and a resume keeps) what really ran.
    """
    from warpforge.evaluator.run.backend import BackendUnavailable, usable_backend

    given_backend = spec.backend
    if spec.resume:
        spec = _stored_spec(spec)
    registry = _proposers()
    if spec.proposer not in registry:
        raise UsageError(f"unknown proposer {spec.proposer!r}: available: {', '.join(registry.names())}")
    if spec.proposer == "template" and not spec.resume:
        spec = with_matched_tasks(spec)
    tasks = [get_task(name) for name in spec.tasks]
    extra = [load_variant(f) for f in spec.variant_files]
    names = {t.name for t in tasks}
    if len(names) == 1:  # a ModelNew answer names no TASK: it is for the run's one task
        extra = [v.for_task(next(iter(names))) for v in extra]
    for v in extra:
        if not v.task:
            raise VariantError(
                f"{v.path} names no TASK and this run searches {len(names)} tasks: add "
                "TASK = '<task>' to it, or run its task alone"
            )
        if v.task not in names:
            raise VariantError(
                f"{v.path} implements task {v.task!r}, which this run does not search "
                f"({', '.join(sorted(names))}): add that task to the run or drop the file"
            )
    resolved: dict[str, str] = {}
    for task in tasks:
        variants: list[Variant] | None = None
        if spec.proposer == "template":
            variants = builtin_variants(task.name) + [v for v in extra if v.task == task.name]
            if not variants:
                raise VariantError(no_variants_message(task, registry))
            for v in variants:
                check_space(v)
        try:
            resolved[task.name] = usable_backend(spec.backend, task.name, variants)
        except BackendUnavailable as exc:
            if spec.resume and spec.backend != given_backend:
                raise BackendUnavailable(
                    f"campaign {spec.name!r} was started with --backend {spec.backend}, which cannot resume here: {exc}"
                ) from None
            raise
    if spec.backend == "auto" and len(set(resolved.values())) == 1:
        spec = replace(spec, backend=next(iter(resolved.values())))
    return spec


def pick_params(
    pool: ChildPool, task: Task, variant: Variant, given: dict[str, Any], target: str, timeout_s: float
) -> tuple[dict[str, Any] | None, EvalResult | None, str]:
    """The parameters ``eval`` runs: ``given`` completed by the first configuration in SPACE order that
    satisfies ``constraints`` on the task's benchmark shapes.

    Returns (params, failure, how): params None with a failure when ``constraints`` itself failed in the
    child (a verdict about the candidate); params None without one when no configuration satisfies them.
    When ``given`` names every parameter it is used as it is: the evaluation then checks the constraints and
    answers ``invalid_config`` if they are false.
    """
    from warpforge.evaluator.run.stages import space_stage
    from warpforge.evaluator.sandbox.job import Job

    if set(given) >= set(variant.space):
        return dict(given), None, "as given"
    if not variant.has_constraints:
        return first_config(variant, given), None, "first values of SPACE" + (" with --params" if given else "")
    failure, feasible = space_stage(pool, Job(task, variant, {}, target=target, timeout_s=timeout_s))
    if failure is not None:
        return None, failure, ""
    chosen = first_config(variant, given, feasible)
    how = f"first of {len(feasible)} configurations of SPACE that satisfy constraints()"
    return chosen, None, how + (" with --params" if given else "")
