"""What to export for one task, chosen from the stored campaign decisions through the read layer only.

Rules:
- the winner is the campaign's stored ``Decision`` with ``accepted`` true; export never re-ranks raw times
  to pick a winner. With several accepted decisions the newest wins (``--gpu`` narrows them to one GPU);
- the winner must have an evaluation with verdict ``ok`` (same variant source hash and parameters);
- each GPU with an accepted decision for the same variant source gets a tuned table: its decision's
  parameters as the general configuration, and per measured (shape, dtype) the fastest configuration
  verified ``ok`` on that GPU, adopted only when its p80 is below the general configuration's p20 on that
  shape (non-overlapping quantile ranges: a per-shape entry is never noise);
- ``allow_untimed``: without a timed accepted decision, the configuration verified ``ok`` that static
  compile facts rank best (``compile_facts.static_rank``, the ranking ``warpforge best`` shows: fewest
  spilled bytes, then highest occupancy, fewest registers, least shared memory; then the earliest
  evaluation), flagged as never timed.
Refusals raise :class:`ExportRefused`, one line that says what to do.

Example::

    >>> from warpforge.db.queries import Reader                                   # doctest: +SKIP
    >>> plan = plan_task(Reader("sqlite:///wf.db"), get_task("rmsnorm"), gpu=None)  # doctest: +SKIP
    >>> plan.tables[0].gpu, plan.tables[0].general                                # doctest: +SKIP
    ('NVIDIA H100 80GB HBM3', {'ROWS_PER_PROGRAM': 1, 'num_warps': 8, 'num_stages': 2})
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from warpforge.compile_facts import static_rank
from warpforge.db.rows import params_key
from warpforge.export.op_plan import ExportRefused, GpuTable, OpPlan, ReaderLike, TunedEntry
from warpforge.kernels.members import op_identifier, split_member
from warpforge.kernels.targets import DEFAULT_TARGET, REGISTERS_PER_SM, SMEM_BYTES, limits
from warpforge.kernels.taskdef import Task


def _all_evaluations(reader: ReaderLike, **filters: Any) -> Iterator[Any]:
    offset = 0
    while True:
        page = reader.evaluations(**filters, sort="id", offset=offset, limit=200)
        yield from page.items
        offset += len(page.items)
        if not page.items or offset >= page.total:
            return


def _gpu_matches(gpu: str | None, wanted: str | None) -> bool:
    return wanted is None or (gpu is not None and wanted.lower() in gpu.lower())


def _date(value: Any) -> str | None:
    return value.date().isoformat() if hasattr(value, "date") else (str(value)[:10] if value else None)


def plan_task(reader: ReaderLike, task: Task, gpu: str | None = None, allow_untimed: bool = False) -> OpPlan:
    """Choose what to export for ``task`` (see the module docstring), or raise :class:`ExportRefused`."""
    plan = _plan(reader, task, gpu, allow_untimed)
    if split_member(task.name) is not None:
        return member_plan(plan)
    if task.init_inputs is None:
        return plan
    # A PyTorch module by path (KernelBench format): the package ships a task module generated for it.
    from warpforge.export.bypath import standalone_plan

    return standalone_plan(reader, plan)


def member_plan(plan: OpPlan) -> OpPlan:
    """``plan`` of a family's member (``elementwise[gelu_tanh]``, kernels/members.py) as the package ships it: the op
    named by an identifier (``elementwise_gelu_tanh``); the reference module the member task's own file (the
    family's module with the tail selecting the member), its docstring's examples importing that module."""
    family, _ = split_member(plan.task.name) or ("", "")
    op = op_identifier(plan.task.name)
    source = re.sub(
        rf"(>>>\s+from warpforge\.kernels\.tasks import ){family}\b(?! as)",
        rf"\1{op} as {family}",
        plan.task.path.read_text(),
    )
    return replace(plan, task=replace(plan.task, name=op), task_source=source, info={**plan.info, "op": op})


def _plan(reader: ReaderLike, task: Task, gpu: str | None, allow_untimed: bool) -> OpPlan:
    decisions = list(reader.decisions(task=task.name))
    timed = [d for d in decisions if d.accepted and d.timing_source in ("live", "recorded")]
    if not timed:
        if allow_untimed:
            return _plan_untimed(reader, task, decisions)
        seen = f"{len(decisions)} decision(s), none accepted with measured times" if decisions else "no decision"
        raise ExportRefused(
            f"{task.name}: no accepted winner ({seen}): run a campaign on a GPU "
            "(warpforge run --backend cuda) or on recordings (--backend replay), or pass "
            "--allow-untimed to export the statically best configuration verified ok"
        )
    on_gpu = [d for d in timed if _gpu_matches(d.gpu, gpu)]
    if not on_gpu:
        have = ", ".join(sorted({str(d.gpu) for d in timed}))
        raise ExportRefused(
            f"{task.name}: no accepted result for GPU {gpu!r} (accepted on: {have}); "
            "pick one of those with --gpu or run a campaign on that GPU"
        )
    winner = max(on_gpu, key=lambda d: (d.created_at, d.gpu or ""))
    ok = [e for e in _all_evaluations(reader, task=task.name, verdict="ok", variant_hash=winner.variant_hash)]
    # The decision links the winner's search evaluation; any ok evaluation of the same source and params counts.
    win_eval = [e for e in ok if params_key(e.params) == params_key(winner.params or {})]
    if not win_eval:
        raise ExportRefused(
            f"{task.name}: the accepted winner ({winner.variant_name} {dict(winner.params or {})}, "
            f"campaign {winner.campaign}) has no evaluation with verdict ok: re-run its campaign "
            "with --resume so the winner is checked, then export"
        )
    # One table per GPU whose accepted decision chose this same source; times of different GPUs never mix.
    per_gpu: dict[str, Any] = {}
    for d in sorted(timed, key=lambda d: d.created_at):
        if d.variant_hash == winner.variant_hash and d.gpu and _gpu_matches(d.gpu, gpu):
            per_gpu[d.gpu] = d
    tables = tuple(_table(reader, d, ok) for _, d in sorted(per_gpu.items()))
    linked = [e for e in win_eval if e.id == getattr(winner, "evaluation_id", None)]
    first = reader.evaluation((linked or sorted(win_eval, key=lambda e: e.id))[0].id)
    source = _variant_source(reader, winner.variant_hash, task.name)
    info = {
        "op": task.name,
        "task": task.name,
        "gpu": winner.gpu,
        "gpus": [t.gpu for t in tables],
        "timing_source": winner.timing_source,
        "backend": winner.backend,
        "campaign": winner.campaign,
        "variant": winner.variant_name,
        "variant_hash": winner.variant_hash,
        "params": dict(winner.params),
        "objective_ms": winner.objective_ms,
        "speedup_vs_eager": winner.speedup,
        "speedup_vs_eager_interval": [winner.speedup_low, winner.speedup_high],
        # The campaign times the task's eager reference only; bench.py in the package measures torch.compile.
        "speedup_vs_torch_compile": None,
        "speedup_note": "against the task's eager PyTorch reference, geometric mean over the benchmark shapes"
        + (f"; {winner.note}" if winner.note else ""),
        "versions": dict(first.versions) if first is not None else {},
        "limits": target_limits(_target_of(first)),
        "date": _date(winner.created_at),
        "untimed": False,
    }
    dtypes = tuple(sorted({s.dtype for s in winner.shapes}))
    return OpPlan(task, winner.variant_name, winner.variant_hash, source, tables, info, False, dtypes)


def _target_of(detail: Any) -> str | None:
    """The compile target an evaluation's kernels were compiled for (its stored resources), if any."""
    kernels = list((getattr(detail, "resources", None) or {}).values())
    return kernels[0].get("target") if kernels else None


def target_limits(target: str | None) -> dict[str, int]:
    """What the kernel's constraints read at run time where no GPU says its own (kernel_info's ``limits``)."""
    lim = limits(target or DEFAULT_TARGET)
    return {SMEM_BYTES: lim.shared_bytes, REGISTERS_PER_SM: lim.registers_per_sm}


def _table(reader: ReaderLike, decision: Any, ok: list[Any]) -> GpuTable:
    general = {(s.shape_key, s.dtype): s for s in decision.shapes}
    best: dict[tuple[str, str], tuple[float, Any, Any]] = {}
    for e in ok:
        if e.timing_gpu != decision.gpu:
            continue
        detail = reader.evaluation(e.id)
        for s in detail.shapes if detail is not None else ():
            if s.p50_ms is None:
                continue
            key = (s.shape_key, s.dtype)
            if key not in best or (s.p50_ms, e.id) < (best[key][0], best[key][1].id):
                best[key] = (s.p50_ms, e, s)
    entries = []
    for key, (p50, e, s) in sorted(best.items()):
        g = general.get(key)
        adopt = g is None or (s.p80_ms is not None and g.p20_ms is not None and s.p80_ms < g.p20_ms)
        if adopt or g is None:
            entries.append(TunedEntry(dict(s.shape), s.dtype, dict(e.params), p50, e.id))
        else:
            entries.append(
                TunedEntry(dict(g.shape), g.dtype, dict(decision.params), g.p50_ms, _decision_eval(ok, decision))
            )
    return GpuTable(decision.gpu, decision.timing_source, dict(decision.params), tuple(entries))


def _decision_eval(ok: list[Any], decision: Any) -> int:
    ids = [e.id for e in ok if e.timing_gpu == decision.gpu and params_key(e.params) == params_key(decision.params)]
    return min(ids) if ids else 0


def _variant_source(reader: ReaderLike, source_hash: str, task: str) -> str:
    row = reader.variant(source_hash)
    if row is None or not row.source:
        raise ExportRefused(
            f"{task}: the winner's variant source {source_hash[:12]} is not stored: the database is "
            "incomplete; re-run the campaign"
        )
    return str(row.source)


def _plan_untimed(reader: ReaderLike, task: Task, decisions: list[Any]) -> OpPlan:
    campaigns = {d.campaign for d in decisions}
    ok = [e for e in _all_evaluations(reader, task=task.name, verdict="ok") if not campaigns or e.campaign in campaigns]
    if not ok:
        raise ExportRefused(
            f"{task.name}: no configuration was ever verified ok (even untimed): run "
            f"`warpforge run {task.name} --backend interpret` first"
        )
    ranked = []
    for e in ok:
        detail = reader.evaluation(e.id)
        # The stored list, one entry per kernel and shape: the read layer's ``resources`` is keyed by kernel
        # name and keeps only one shape per kernel, which would hide the worst shape's spills.
        resources = (detail.result or {}).get("resources") if detail is not None else None
        ranked.append((static_rank(resources), e.id, e, detail))
    rank, _, best, detail = min(ranked, key=lambda r: (r[0], r[1]))
    target = _target_of(detail)
    source = _variant_source(reader, best.variant_hash, task.name)
    versions = dict(detail.versions) if detail is not None else {}
    checked = (detail.result or {}).get("checked", []) if detail is not None else []
    dtypes = tuple(sorted({c.split()[1] for c in checked if len(c.split()) >= 2}))
    info = {
        "op": task.name,
        "task": task.name,
        "gpu": None,
        "gpus": [],
        "timing_source": "untimed",
        "backend": best.backend,
        "campaign": best.campaign,
        "variant": best.variant_name,
        "variant_hash": best.variant_hash,
        "params": dict(best.params),
        "objective_ms": None,
        "speedup_vs_eager": None,
        "speedup_vs_eager_interval": [None, None],
        "speedup_vs_torch_compile": None,
        "speedup_note": "NEVER TIMED: exported with --allow-untimed; chosen by static compile facts for "
        f"{target or 'an unknown target'} (spills {rank[0]:g} B, occupancy "
        f"{'unknown' if math.isinf(rank[1]) else f'{-rank[1]:.0%}'}, registers "
        f"{rank[2]:g}, shared memory {rank[3]:g} B), verified ok on {best.device or best.backend}",
        "versions": versions,
        "limits": target_limits(target),
        "date": _date(best.created_at),
        "untimed": True,
    }
    table = GpuTable("untimed", "untimed", dict(best.params), ())
    return OpPlan(task, best.variant_name, best.variant_hash, source, (table,), info, True, dtypes)
