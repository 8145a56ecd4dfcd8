"""``warpforge results`` and ``warpforge best``: what is stored, readable at 80 columns, full values in ``--json``.

Both read through the read layer (``db.queries.Reader``) and never create or change a database. Besides times,
they show each configuration's compile facts for the target GPU (registers, spilled bytes, shared memory and
the occupancy they allow: the worst kernel and shape in tables, every kernel and shape in ``--json``). Without
a timed winner ``best`` shows the static ranking of the configurations verified ``ok`` by those facts
(compile_facts.static_ranking), labelled as static: it is never called a time.

Exit codes (README "Exit codes"): 0 answered; 1 ``best`` found no accepted timed winner (``--static``: no
configuration verified ok); 2 an unknown task or campaign, a bad ``--sort``, a URL that names no database.

Example::

    warpforge results --campaign cpu-demo            # verdicts and compile facts of a CPU campaign
    warpforge best rmsnorm --static --json           # its ok configurations ranked by compile facts
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from warpforge.errors import UsageError
from warpforge.inert import InertConsole

out = InertConsole()
err = InertConsole(stderr=True)

WIDE = 120  # at this width every column fits on one line; below it uniform columns move above the table
FACTS_LEGEND = (
    "compiled for {target}: regs registers per thread, spill and smem bytes spilled and of shared memory, "
    "occ the share of the SM's warp slots they allow; the worst kernel and shape of each configuration "
    "(every kernel and shape: --json)"
)


def params_text(params: Mapping[str, Any] | None) -> str:
    """``name=value, ...``: breaks between pairs at 80 columns, where JSON would break inside one. Escaped for
    Rich (every caller prints it through Rich): a SPACE string "[/red]" is the candidate's text, not markup."""
    return escape(", ".join(f"{k}={json.dumps(v)}" for k, v in params.items())) if params else "-"


def _emit_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")


def _reader(db: str | None) -> Any:
    from warpforge.db.queries import Reader

    # A reader: a missing database is an error, never created here; an older schema is said (run
    # `warpforge db upgrade`), never migrated by a command that only reads.
    return Reader(db)


def _check_task(reader: Any, task: str | None) -> None:
    from warpforge.cli.taskref import unknown_task_message

    message = unknown_task_message(reader, task) if task is not None else None
    if message is not None:
        raise UsageError(message)


def _shape_option(reader: Any, task: str, text: str) -> str:
    """``--shape`` checked against the task's dimensions (a built-in task's shapes, else the stored ones) and
    given as the stored key, so ``M=abc`` or ``X=1`` is a usage error rather than "no measured result"."""
    from warpforge.kernels.task import builtin_task_names, get_task
    from warpforge.kernels.taskdef import parse_shape_key

    if task in builtin_task_names():
        t = get_task(task)
        keysets = {tuple(sorted(s)) for s in t.shapes + t.check_shapes}
    else:
        keysets = {tuple(sorted(r.shape)) for d in reader.decisions(task=task) for r in d.shapes if r.shape}
    dims = sorted({k for ks in keysets for k in ks})
    return parse_shape_key(text, dims, task, complete=len(keysets) == 1)


def _check_campaign(reader: Any, campaign: str | None) -> None:
    if campaign is None or reader.campaign(campaign) is not None:
        return
    page = reader.campaigns(limit=5)
    names = ", ".join(c.name for c in page.items)
    raise UsageError(
        f"unknown campaign {campaign!r}: "
        + (f"the newest stored are {names}" if names else "this database holds no campaign")
        + " (warpforge results lists every evaluation)"
    )


def _params_column(table: Table, params: Sequence[Mapping[str, Any] | None]) -> None:
    # Wide enough for the longest name=value pair (at most 30), so a narrow table breaks between pairs
    # rather than inside a name (ROWS_PER_PROGRAM=8 was cut to ROWS_PER_PROGR / AM=8 at 80 columns).
    longest = max((len(part) + 1 for p in params for part in params_text(p).split(", ")), default=1)
    table.add_column("params", overflow="fold", min_width=min(longest, 30))


def _fitted(table: Table) -> Table:
    """The table, with the params column allowed to break inside a pair only when pairs whole do not fit."""
    if out.measure(table).minimum > out.width:
        for column in table.columns:
            column.min_width = None
    return table


def _facts_columns(table: Table) -> None:
    for col in ("regs", "spill", "smem", "occ"):
        table.add_column(col, justify="right", overflow="fold")


def _targets(facts: Sequence[Sequence[Mapping[str, Any]]]) -> str:
    found = sorted({str(k.get("target")) for f in facts for k in f if k.get("target")})
    return ", ".join(found) or "the target GPU"


def _print_wrapped(text: str) -> None:
    out.print(text, highlight=False, markup=False)


def results(
    campaign: str | None = typer.Option(None, "--campaign"),
    task: str | None = typer.Option(None, "--task"),
    verdict: str | None = typer.Option(None, "--verdict", help="only this verdict (ok, incorrect, ...)"),
    sort: str = typer.Option("-id", "--sort", help="id | created_at | objective_ms | speedup; prefix - for descending"),
    limit: int = typer.Option(50, "--limit", min=1),
    offset: int = typer.Option(0, "--offset", min=0),
    db: str | None = typer.Option(
        None, "--db", help="database URL (default: $WARPFORGE_DB, else a SQLite file in the user data)"
    ),
    json_out: bool = typer.Option(False, "--json", help="print machine-readable JSON on stdout"),
) -> None:
    """List stored evaluations, newest first, with their compile facts (the final re-benchmark marked)."""
    from warpforge.compile_facts import load_facts, worst_facts
    from warpforge.evaluator.result import Verdict

    verdicts = [v.value for v in Verdict]
    if verdict is not None and verdict not in verdicts:
        raise UsageError(f"unknown verdict {verdict!r}: use one of {', '.join(verdicts)}")
    from warpforge.cli.taskref import stored_name

    task = stored_name(task) if task is not None else None  # a task file: the name its results are stored by
    reader = _reader(db)
    _check_task(reader, task)
    _check_campaign(reader, campaign)
    page = reader.evaluations(campaign=campaign, task=task, verdict=verdict, sort=sort, offset=offset, limit=limit)
    facts = load_facts(reader, [r.id for r in page.items])
    rows: list[dict[str, Any]] = [
        {
            "id": r.id,
            "campaign": r.campaign,
            "task": r.task,
            "variant": r.variant_name,
            "variant_hash": r.variant_hash[:12],
            "params": dict(r.params),
            "backend": r.backend,
            "verdict": r.verdict,
            "reason": r.reason,
            "time_ms": r.objective_ms,
            "speedup": r.speedup,
            "timing_source": r.timing_source,
            "gpu": r.timing_gpu,
            "final": r.final,
            "created_at": r.created_at.isoformat(),
            "compile": worst_facts(facts[r.id]) if facts[r.id] else None,
            "resources": facts[r.id],
        }
        for r in page.items
    ]
    if json_out:
        return _emit_json(rows)
    _results_table(rows, page.total, offset, [facts[r.id] for r in page.items])


def _timing(r: Mapping[str, Any]) -> str:
    return (f"{r['timing_source']} on {r['gpu']}" if r["timing_source"] else "not measured") + (
        " (final re-benchmark)" if r["final"] else ""
    )


_VALUES: dict[str, Any] = {
    "campaign": lambda r: r["campaign"] or "-",
    "task": lambda r: r["task"],
    "backend": lambda r: r["backend"],
    "timing": _timing,
    "verdict": lambda r: r["verdict"] + (f" ({r['reason']})" if r["reason"] else ""),
}
_GROUP = ("campaign", "task", "backend", "timing")  # below WIDE columns: said once above each group's table


def _results_table(rows: list[dict[str, Any]], total: int, offset: int, facts: list[list[dict[str, Any]]]) -> None:
    if not rows:
        _print_wrapped("warpforge results: nothing stored matches; without filters it lists every evaluation")
        return
    _print_wrapped(f"warpforge results: {offset + 1}-{offset + len(rows)} of {total}, newest first")
    if out.width >= WIDE:
        _rows_table(rows, facts, shared={})
    else:
        # Consecutive rows of one campaign, task, backend and timing form a group: those four are said once
        # above its table, which keeps id, variant, params, verdict, times and facts readable at 80 columns.
        start = 0
        for i in range(1, len(rows) + 1):
            if i == len(rows) or any(_VALUES[k](rows[i]) != _VALUES[k](rows[start]) for k in _GROUP):
                group, group_facts = rows[start:i], facts[start:i]
                shared = {k: _VALUES[k](group[0]) for k in _GROUP}
                verdicts = {_VALUES["verdict"](r) for r in group}
                if len(verdicts) == 1:
                    shared["verdict"] = verdicts.pop()
                _print_wrapped(
                    f"campaign {shared['campaign']}, task {shared['task']}, backend {shared['backend']}, "
                    f"{shared['timing']}" + (f", verdict {shared['verdict']}" if "verdict" in shared else "") + ":"
                )
                _rows_table(group, group_facts, shared)
                start = i
    if any(facts):
        _print_wrapped(FACTS_LEGEND.format(target=_targets(facts)))
    tasks = sorted({r["task"] for r in rows})
    measured = [r["task"] for r in rows if r["time_ms"]]
    ok_unmeasured = [
        t for t in tasks if any(r["task"] == t and r["verdict"] == "ok" and not r["time_ms"] for r in rows)
    ]
    if measured:
        _print_wrapped(f"next: warpforge best {shlex.quote(measured[0])} shows the accepted winner per GPU")
    elif ok_unmeasured:
        _print_wrapped(
            f"next: warpforge best {shlex.quote(ok_unmeasured[0])} --static ranks its ok configurations "
            "by these compile facts (static, not a time); times need --backend cuda on a GPU"
        )


def _rows_table(rows: list[dict[str, Any]], facts: list[list[dict[str, Any]]], shared: Mapping[str, str]) -> None:
    from warpforge.compile_facts import facts_cells

    measured = any(r["time_ms"] for r in rows)
    table = Table()
    cols = [
        "id",
        *[k for k in ("campaign", "task") if k not in shared],
        "variant",
        "params",
        *[k for k in ("backend", "verdict") if k not in shared],
        *(("ms", "speedup") if measured else ()),
        *[k for k in ("timing",) if k not in shared],
    ]
    for col in cols:
        if col == "params":
            _params_column(table, [r["params"] for r in rows])
        else:
            table.add_column(col, overflow="fold")
    _facts_columns(table)
    for r in rows:
        # Stored names (variant files, tasks, campaigns, GPUs) are escaped: a variant file "[/red].py" is text
        # the candidate's author chose, and Rich parsed it as a closing tag (MarkupError, "internal error").
        cells = {
            "id": str(r["id"]),
            "variant": escape(r["variant"] or ""),
            "params": params_text(r["params"]),
            "ms": f"{r['time_ms']:.4g}" if r["time_ms"] else "-",
            "speedup": f"{r['speedup']:.3g}" if r["speedup"] else "-",
            **{k: escape(f(r)) for k, f in _VALUES.items()},
        }
        table.add_row(*[cells[c] for c in cols], *(facts_cells(r["compile"]) if r["compile"] else ("-",) * 4))
    out.print(_fitted(table))


def best(
    task: str = typer.Argument(..., metavar="TASK"),
    gpu: str | None = typer.Option(None, "--gpu"),
    shape: str | None = typer.Option(None, "--shape", help="the winner's time on one shape, e.g. M=4096,N=4096"),
    limit: int = typer.Option(5, "--limit", min=1, help="at most this many GPUs (--static: configurations)"),
    static: bool = typer.Option(
        False,
        "--static",
        help="rank the configurations verified ok by compile "
        "facts (spills, occupancy, registers, shared memory): no GPU needed, not a "
        "time",
    ),
    db: str | None = typer.Option(
        None, "--db", help="database URL (default: $WARPFORGE_DB, else a SQLite file in the user data)"
    ),
    json_out: bool = typer.Option(False, "--json", help="print machine-readable JSON on stdout"),
) -> None:
    """The accepted winner of a task per GPU, as its campaign decided it (beyond noise, re-benchmarked).

    Answers from stored decisions only (never by re-ranking raw times); GPUs are never compared. Without a
    timed winner (a CPU campaign) it shows the static ranking by compile facts instead, and exits 1.
    """
    from warpforge.cli.taskref import runnable, stored_name
    from warpforge.compile_facts import load_facts

    given, task = task, stored_name(task)  # a task file: the name its results are stored by
    reader = _reader(db)
    _check_task(reader, task)
    how = runnable(reader, given)  # how a hint names it: a by-path task by its file
    if shape is not None:
        shape = _shape_option(reader, task, shape)
    if static:
        if gpu or shape:  # the facts belong to a compile target and cover every shape compiled
            raise UsageError(
                "--static ranks by compile facts (every compiled shape, per target); --gpu and --shape "
                "select timed results: drop them, or drop --static"
            )
        return _static(reader, task, how, limit, json_out)
    winners = reader.winners(task=task, gpu=gpu, shape=shape)[:limit]
    facts = load_facts(reader, [w.decision.evaluation_id for w in winners if w.decision.evaluation_id is not None])
    rows: list[dict[str, Any]] = []
    for w in winners:
        d = w.decision
        f = facts.get(d.evaluation_id, []) if d.evaluation_id is not None else []
        rows.append(
            {
                "variant": d.variant_name,
                "variant_hash": (d.variant_hash or "")[:12],
                "params": dict(d.params or {}),
                "time_ms": w.ms,
                "shape": w.shape_key,
                "speedup": w.speedup,
                "speedup_low": d.speedup_low if shape is None else None,
                "speedup_high": d.speedup_high if shape is None else None,
                "interval": d.interval,
                "gpu": d.gpu,
                "timing_source": d.timing_source,
                "evaluation_id": d.evaluation_id,
                "campaign": d.campaign,
                "decided_at": d.created_at.isoformat(),
                "resources": f,
                "top_k": [
                    {
                        "variant": t.variant,
                        "params": dict(t.params),
                        "ms": t.ms,
                        "speedup": t.speedup,
                        "chosen": t.chosen,
                    }
                    for t in d.top_k
                ],
            }
        )
    if json_out:
        _emit_json(rows)
        if not rows:
            raise typer.Exit(1)  # the same answer as the table's: nothing measured to rank
        return
    if not rows:
        from warpforge.compile_facts import static_ranking

        where = (f" on {gpu}" if gpu else "") + (f" for shape {shape}" if shape else "")
        ranking = static_ranking(reader, task, limit=limit)
        latest = reader.decisions(task=task)
        if ranking:
            why = (
                f" (the latest campaign, {latest[0].campaign}, measured {latest[0].measured} of "
                f"{latest[0].evaluations} evaluations)"
                if latest
                else ""
            )
            scope = static_scope(reader.ok_campaigns(task))
            err.print(
                f"no measured correct result for {task!r}{where}{why}: below, {scope}, ranked by compile facts instead",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
            _static_tables(task, how, ranking, limit)
        else:
            why = f"; the latest campaign ({latest[0].campaign}) says: {latest[0].note}" if latest else ""
            err.print(
                f"no measured correct result for {task!r}{where} in the stored campaign decisions{why}; "
                f"run a campaign on a GPU (warpforge run {how} --backend cuda)",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
        raise typer.Exit(1)
    _winners_table(task, how, shape, rows)


def _winners_table(task: str, how: str, shape: str | None, rows: list[dict[str, Any]]) -> None:
    from warpforge.compile_facts import facts_cells, worst_facts

    wide = out.width >= WIDE
    table = Table(title=escape(f"best {task}" + (f" ({shape})" if shape else "")))
    cols = ("gpu", "variant", "params", "ms", "speedup") + (("campaign",) if wide else ())
    for col in cols:
        if col == "params":
            _params_column(table, [r["params"] for r in rows])
        else:
            table.add_column(col, overflow="fold")
    if wide:
        _facts_columns(table)
    for r in rows:
        interval = (
            f" [{r['speedup_low']:.3g}-{r['speedup_high']:.3g}]"
            if r["speedup_low"] is not None and r["speedup_high"] is not None
            else ""
        )
        cells = [
            escape(f"{r['gpu']} ({r['timing_source']})"),
            escape(r["variant"] or "-"),
            params_text(r["params"]),
            f"{r['time_ms']:.4g}",
            (f"{r['speedup']:.3g}x" if r["speedup"] else "-") + interval,
        ]
        if wide:
            cells += [
                escape(r["campaign"] or ""),
                *(facts_cells(worst_facts(r["resources"])) if r["resources"] else ("-",) * 4),
            ]
        table.add_row(*cells)
    out.print(_fitted(table))
    if not wide:
        for r in rows:
            regs, spill, smem, occ = facts_cells(worst_facts(r["resources"])) if r["resources"] else ("?",) * 4
            target = _targets([r["resources"]])
            _print_wrapped(
                f"{r['gpu']}: campaign {r['campaign']}; compiled for {target}: registers {regs}, "
                f"spilled bytes {spill}, shared memory bytes {smem}, occupancy {occ} (the worst kernel "
                "and shape)"
            )
    from warpforge.cli.taskref import exportable

    if exportable(how):
        _print_wrapped(f"next: warpforge export {how} --dest DIR writes it as a PyTorch op")


def static_scope(campaigns: Sequence[str]) -> str:
    """What the static ranking covers, for the line above it: every campaign's ok configurations, not only
    the latest campaign's that the line names (the header named one campaign, the table ranked all)."""
    if len(campaigns) == 1:
        return f"the configurations campaign {campaigns[0]} verified ok"
    return f"the configurations verified ok in all {len(campaigns)} stored campaigns ({', '.join(campaigns)})"


def _static(reader: Any, task: str, how: str, limit: int, json_out: bool) -> None:
    from warpforge.compile_facts import static_ranking

    ranking = static_ranking(reader, task, limit=limit)
    if json_out:
        _emit_json([r.to_json() for target in ranking.values() for r in target.rows])
    elif ranking:
        _static_tables(task, how, ranking, limit)
    else:
        err.print(
            f"no configuration of {task!r} was verified ok: run warpforge run {how} (without a GPU it checks "
            "and compiles them)",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    if not ranking:
        raise typer.Exit(1)


def _static_tables(task: str, how: str, ranking: Mapping[str, Any], limit: int) -> None:
    from warpforge.compile_facts import facts_cells

    for target, ranked in ranking.items():
        entries = ranked.rows
        table = Table(title=escape(f"{task}: static ranking for {target} by compile facts (not a time)"))
        table.add_column("#", overflow="fold")
        table.add_column("variant", overflow="fold")
        _params_column(table, [r.params for r in entries])
        _facts_columns(table)
        for r in entries:
            table.add_row(str(r.rank), escape(r.variant), params_text(r.params), *facts_cells(r.worst))
        out.print(_fitted(table))
        more = f" (top {limit}; --limit N for more)" if ranked.total > limit else ""
        _print_wrapped(
            f"{ranked.total} configurations verified ok{more}, ordered by fewest spilled bytes "
            "(spill), then highest occupancy (occ), fewest registers per thread (regs), least shared "
            "memory bytes (smem): the worst kernel and shape of each; every kernel and shape: --static "
            "--json"
        )
    from warpforge.cli.taskref import exportable

    later = (
        f"without one, warpforge export {how} --allow-untimed --dest DIR exports the first, flagged as never timed"
        if exportable(how)
        else "a PyTorch-module problem file is not exported as a package (export takes task modules: docs/tasks.md)"
    )
    _print_wrapped(f"next: times need a GPU (warpforge run {how} --backend cuda); {later}")
