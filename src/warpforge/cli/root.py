"""The ``warpforge`` application: its top-level commands, the groups mounted on it, and ``main``.

Every command takes ``--json``. Errors go through the one boundary (cli/boundary.py): one line on stderr and
exit 0 ok / 1 failure / 2 usage (README "Exit codes"); ``main`` turns Click's own usage errors into the same
one line.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape as rich_escape
from rich.table import Table

from warpforge.cli import helpfix
from warpforge.cli.boundary import guard_all, usage_error_line
from warpforge.cli.results import params_text as _params_text
from warpforge.errors import UsageError
from warpforge.inert import InertConsole

helpfix.install()
app = typer.Typer(
    help="warpforge: agentic optimizer for Triton kernels and parallelism plans.",
    no_args_is_help=True,
    add_completion=False,
)
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
app.add_typer(db_app, name="db")

out = InertConsole()
err = InertConsole(stderr=True)

DbOpt = typer.Option(None, "--db", help="database URL (default: $WARPFORGE_DB, else a SQLite file in the user data)")
JsonOpt = typer.Option(False, "--json", help="print machine-readable JSON on stdout")
UnsafeOpt = typer.Option(
    False,
    "--unsafe-run-unsandboxed",
    envvar="WARPFORGE_UNSAFE_RUN_UNSANDBOXED",
    help="let LLM-written or user-supplied candidates run WITHOUT the OS sandbox when "
    "bubblewrap is unavailable (default: refuse, exit 2)",
)


@app.callback()
def _root(
    verbose: int = typer.Option(
        0, "-v", "--verbose", count=True, help="log what happens: -v fallbacks and decisions (INFO), -vv DEBUG"
    ),
    log_json: bool = typer.Option(False, "--log-json", help="log JSON lines on stderr (for machines)"),
) -> None:
    """warpforge: agentic optimizer for Triton kernels and parallelism plans."""
    from warpforge.logs import configure

    configure(verbose, log_json)


def _emit_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")


@app.command()
def tasks(
    task_file: list[Path] = typer.Option([], "--task-file", help="also load these task files"), json_out: bool = JsonOpt
) -> None:
    """List tasks (built-in and from --task-file) with their shapes and templates."""
    from warpforge.evaluator.judge.gradients import input_names
    from warpforge.kernels.task import all_tasks
    from warpforge.kernels.taskdef import dtype_name
    from warpforge.kernels.variant import builtin_variants

    rows: list[dict[str, Any]] = []
    for task in all_tasks([str(f) for f in task_file]):
        variants = builtin_variants(task.name)
        names = input_names(task)
        # Training (docs/tasks.md): the inputs whose gradients the task defines, and the templates with a backward.
        grads = [names[i] if i < len(names) else str(i) for i in task.grad_inputs]
        rows.append(
            {
                "name": task.name,
                "description": task.description,
                "builtin": task.builtin,
                "dtypes": [dtype_name(d) for d in task.dtypes],
                "shapes": task.shapes,
                "check_shapes": task.check_shapes,
                "templates": [v.name for v in variants],
                "has_backward": task.has_backward,
                "grad_inputs": grads,
                "backward_templates": [v.name for v in variants if v.has_backward and task.has_backward],
            }
        )
    if json_out:
        return _emit_json(rows)
    # One value per line, never cut: at 80 columns the four narrow columns take ~70 (the longest shape,
    # M=16384,N=4096,K=4096, is 21 characters); descriptions and grads need 120 and are folded into --json
    # below that (a grads column at 80 cut matmul's shapes once a "- (bring --variant-file)" cell was there).
    wide = out.width >= 120
    table = Table(
        title="warpforge tasks",
        show_lines=True,
        caption="*: has a backward (launch_forward/launch_backward); grads: the inputs the task differentiates"
        if wide
        else "*: has a backward\ndescriptions, check shapes and grads: warpforge tasks --json",
    )
    table.add_column("task", no_wrap=True)
    if wide:
        table.add_column("description", ratio=1)
    for col in ("dtypes", "benchmark shapes", "templates", *(["grads"] if wide else [])):
        table.add_column(col, overflow="fold")
    for r in rows:
        shapes = "\n".join(_lines(",".join(f"{k}={v}" for k, v in s.items()), ",", 24) for s in r["shapes"])
        cells = [
            _lines(r["name"], "_", 15),
            *([r["description"]] if wide else []),
            "\n".join(r["dtypes"]),
            shapes,
            # a template with a backward (launch_forward/launch_backward) is starred
            "\n".join(t + ("*" if t in r["backward_templates"] else "") for t in r["templates"])
            or "none: use\n--variant-file",
            *(["\n".join(r["grad_inputs"]) or "-"] if wide else []),
        ]  # the inputs the task differentiates
        table.add_row(*[rich_escape(c) for c in cells])  # a --task-file's NAME/DESCRIPTION is its author's text
    out.print(table)


def _lines(text: str, sep: str, width: int) -> str:
    """``text`` broken after ``sep`` into lines of at most ``width`` characters where it can be: at 80 columns
    fused_linear_cross_entropy (26) and attention's shapes (37) would squeeze every other column to a fold;
    broken here they read whole (a matmul shape, 21 characters, stays one line)."""
    if len(text) <= width:
        return text
    parts = [piece + sep for piece in text.split(sep)]
    parts[-1] = parts[-1][: -len(sep)]
    lines = [""]
    for piece in parts:
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines.append("")
        lines[-1] += piece
    return "\n".join(lines)


# NVIDIA compute capabilities Triton's bundled ptxas compiles for (Triton 3.9): any other number reached the
# child and ended every configuration as crashed/runtime_error instead of being refused here.


def check_target(target: str) -> str:
    """``--target`` as written (``sm_90``, ``sm_90a``) when Triton compiles for it, else a usage error."""
    import re

    from warpforge.kernels.targets import LIMITS

    match = re.fullmatch(r"sm_?(\d+)a?", target.strip())
    if match is None or int(match.group(1)) not in LIMITS:
        raise UsageError(
            f"unknown --target {target!r}: use one of {', '.join(f'sm_{c}' for c in LIMITS)} (e.g. sm_90 for H100)"
        )
    return target.strip()


def check_seconds(option: str, value: float | None) -> None:
    if value is not None and not value > 0:  # also NaN
        raise UsageError(f"{option} must be a positive number of seconds, got {value:g}")


def _by_stored_name(db: str | None, task: str, quiet: bool) -> str:
    """A by-path task named as the store names it (``23_Softmax``, as ``best`` prints it) runs from its file."""
    from warpforge.cli.taskref import stored_file

    file = stored_file(db, task)
    if file is None:
        from warpforge.problems import list_problems

        shipped = [p.path for p in list_problems([]) if p.name == task]
        if shipped:  # a problem's name as `warpforge problems` lists it: say where its file is
            raise UsageError(
                f"unknown task {task!r}: a KernelBench problem of that name is {shipped[0]}; run it by "
                f"its path: warpforge run {shlex.quote(shipped[0])}"
            )
        return task
    if not quiet:
        err.print(
            f"{task}: the task file its stored results came from, {file}", highlight=False, markup=False, soft_wrap=True
        )
    return file


@app.command()
def run(
    task_names: list[str] = typer.Argument(..., metavar="TASK...", help="task names or task files"),
    trials: int = typer.Option(20, "--trials", min=1, help="evaluations per task, split across its variants"),
    time_budget: float | None = typer.Option(None, "--time-budget", help="wall-time budget in seconds"),
    proposer: str = typer.Option(
        "template", "--proposer", help="where variants come from: template | llm (docs/agent.md)"
    ),
    llm_replay: str | None = typer.Option(
        None,
        "--llm-replay",
        metavar="CAMPAIGN",
        help="with --proposer llm: answer from CAMPAIGN's stored LLM calls, no network",
    ),
    variant_file: list[Path] = typer.Option([], "--variant-file", help="extra variant files to search too"),
    sampler: str | None = typer.Option(
        None, "--sampler", help="search strategy from docs/search.md's registry (default: wf-default)"
    ),
    backend: str = typer.Option("auto", "--backend", help="auto | cuda | interpret | replay"),
    campaign: str | None = typer.Option(None, "--campaign", help="campaign name (default: generated)"),
    db: str | None = DbOpt,
    resume: bool = typer.Option(False, "--resume", help="continue an interrupted campaign"),
    target: str = typer.Option("sm_90", "--target", help="GPU architecture for ahead-of-time compilation"),
    seed: int | None = typer.Option(None, "--seed", help="sampler seed"),
    workers: int = typer.Option(
        1,
        "--workers",
        min=0,
        help="evaluations at once: one worker per GPU for cuda, CPU "
        "workers for interpret/replay; 0 = all GPUs (or CPUs) there are",
    ),
    compile_workers: int | None = typer.Option(
        None,
        "--compile-workers",
        min=0,
        help="CPU workers compiling ahead of the GPU workers (default: one per GPU worker)",
    ),
    ray_address: str | None = typer.Option(
        None, "--ray-address", help="join this Ray cluster (e.g. auto, 10.0.0.1:6379) instead of starting a local one"
    ),
    use_ray: bool | None = typer.Option(
        None,
        "--ray/--no-ray",
        help="default: Ray when --workers is not 1 or "
        "--ray-address is given; --no-ray runs workers as threads in this process",
    ),
    top_k: int = typer.Option(3, "--top-k", min=0, help="re-benchmark the best K at the end (live GPU timing)"),
    unsafe_unsandboxed: bool = UnsafeOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Run an optimization campaign: search each task's variants, check, measure and store.

    One worker evaluates in this process by default (no Ray start-up, nothing to install or run); with
    --workers N > 1 or --ray-address, Ray places one worker per GPU and compiles on CPU workers meanwhile.
    """
    from datetime import datetime

    from warpforge.cli.agent import proposer_config_for_run

    check_seconds("--time-budget", time_budget)
    target = check_target(target)

    if proposer == "llm" or variant_file:  # code warpforge did not ship: the sandbox or the explicit flag
        from warpforge.evaluator.sandbox.isolation import require_for_untrusted

        require_for_untrusted("LLM-written candidates" if proposer == "llm" else "variant files", unsafe_unsandboxed)
    # Before the heavy imports: "no LLM configured" is a one-line usage error in a fraction of a second.
    proposer_config = proposer_config_for_run(proposer, llm_replay, db, target, seed)

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from warpforge.preflight import check_run
    from warpforge.search.engine.campaign import CampaignSpec, Event, run_campaign
    from warpforge.search.samplers.registry import DEFAULT_SAMPLER, make_policy

    make_policy(sampler or DEFAULT_SAMPLER)  # unknown sampler: a usage error before anything starts
    if resume and campaign is None:
        raise UsageError("--resume needs --campaign NAME (the campaign to continue)")
    name = campaign or f"{'-'.join(Path(t).stem for t in task_names)}-{datetime.now():%Y%m%d-%H%M%S}"
    # A task file is stored by its absolute path, so a later hint (best, export) names a file that exists
    # from any directory.
    tasks = [str(Path(t).resolve()) if t.endswith(".py") or "/" in t else t for t in task_names]
    tasks = [_by_stored_name(db, t, json_out) for t in tasks]
    spec = CampaignSpec(
        name=name,
        tasks=tasks,
        task_files=[t for t in tasks if t.endswith(".py") or "/" in t],
        trials=trials,
        time_budget_s=time_budget,
        proposer=proposer,
        sampler=sampler or DEFAULT_SAMPLER,
        backend=backend,
        target=target,
        seed=seed,
        resume=resume,
        db_url=db,
        variant_files=[str(f) for f in variant_file],
        workers=workers,
        compile_workers=compile_workers,
        ray=use_ray,
        ray_address=ray_address,
        top_k=top_k,
        proposer_config=proposer_config,
    )
    spec = check_run(spec)  # a run that cannot work stops here: nothing evaluated, nothing stored
    from warpforge.kernels.kernelbench import NOTES

    for name in spec.tasks:  # a by-path problem searched with a built-in task's templates: say which and how
        note = NOTES.get(str(Path(name).resolve()), "")
        if "searched with the templates" in note and not json_out:
            err.print(f"{Path(name).name}: {note}", highlight=False, markup=False, soft_wrap=True)
    progress = Progress(
        TextColumn("[bold]{task.fields[name]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=err,
        disable=not err.is_terminal and json_out,
    )
    bars: dict[str, Any] = {}
    reused: dict[str, int] = {}

    def on_start(task: str, total: int) -> None:
        # The bar's columns are Rich markup templates: a task or variant name is escaped before it goes in.
        bars[task] = progress.add_task("", total=total, name=rich_escape(task), status="starting")

    def on_event(e: Event) -> None:
        reused[e.task] = reused.get(e.task, 0) + int(e.cached)
        best = f"best {e.best_ms:.4g} ms ({e.best_label})" if e.best_ms is not None else "best: not measured"
        progress.update(bars[e.task], completed=e.done, status=rich_escape(f"{e.result.summary()} | {best}"))
        if not err.is_terminal and not json_out:  # the bar draws only on a terminal: one line per evaluation
            from warpforge.run_progress import progress_line

            err.print(
                progress_line(e.task, e.done, e.total, e.result.summary(), e.best_ms, e.best_label),
                highlight=False,
                markup=False,
                soft_wrap=True,
            )

    with progress:
        summary = run_campaign(spec, on_event=on_event, on_start=on_start)
    if json_out:
        _emit_json(summary.to_dict() | {"reused": reused})
    else:
        _print_campaign(summary, reused)
    failed = [t for t in summary.tasks if t.failure]
    for t in failed:  # what was asked did not happen: said once, on stderr, and the exit code says it too
        err.print(
            f"[red]error:[/red] {rich_escape(t.task)}: {rich_escape(str(t.failure))}; the campaign searched "
            "the templates alone (warpforge agent transcripts "
            f"{rich_escape(summary.campaign)} shows each call)",
            highlight=False,
            soft_wrap=True,
        )
    if failed:
        raise typer.Exit(1)


def _print_campaign(summary: Any, reused: dict[str, int]) -> None:
    """What ``run`` prints at the end, readable at 80 columns (prose wraps between words)."""
    if summary.resumed:
        out.print(
            f"resumed campaign {summary.campaign}: {summary.requeued} interrupted configuration"
            f"{'s' if summary.requeued != 1 else ''} re-queued",
            highlight=False,
            markup=False,
        )
    for t in summary.tasks:
        # Campaign, task and variant names are the user's or a candidate's text: escaped, never Rich markup.
        table = Table(title=rich_escape(f"campaign {summary.campaign}: {t.task} ({t.backend})"))
        # Unmeasured runs (no GPU, no recordings) have no best time or parameters: those columns are dropped.
        cols = ("variant", "feasible", "evaluated", "verdicts") + (("best ms", "best params") if t.measured else ())
        for col in cols:
            table.add_column(col, overflow="fold")
        for v in t.variants:
            row = [
                rich_escape(v.variant),
                str(v.feasible),
                str(v.evaluated),
                ", ".join(f"{k}:{n}" for k, n in sorted(v.verdicts.items())) or "-",
            ]
            if t.measured:
                row += [f"{v.best_ms:.4g}" if v.best_ms else "-", _params_text(v.best_params)]
            table.add_row(*row)
        out.print(table)
        out.print(t.timing, highlight=False, markup=False)
        if reused.get(t.task):
            out.print(
                f"reused {reused[t.task]} stored result{'s' if reused[t.task] != 1 else ''} (same source, "
                "parameters, backend and software): not evaluated again",
                highlight=False,
                markup=False,
            )
        if t.final:
            final = Table(
                title=f"top {len(t.final)} re-benchmarked"
                if any(f.remeasured for f in t.final)
                else f"top {len(t.final)} (recorded times, not re-measured)"
            )
            for col in ("", "variant", "params", "ms", "speedup", "interval"):
                final.add_column(col, overflow="fold")
            for f in t.final:
                interval = (
                    f"{f.speedup_low:.3g}-{f.speedup_high:.3g}x ({f.interval})"
                    if f.speedup_low is not None and f.speedup_high is not None
                    else f.interval
                )
                final.add_row(
                    "best" if f.chosen else "",
                    rich_escape(f.variant),
                    _params_text(f.params),
                    f"{f.ms:.4g}" if f.ms else "-",
                    f"{f.speedup:.3g}x" if f.speedup else "-",
                    rich_escape(interval),
                )
            out.print(final)
        if t.measured:
            out.print(t.acceptance, highlight=False, markup=False)
        out.print(f"evaluated {t.workers}", highlight=False, markup=False)
        for note in t.notes:  # e.g. the LLM agent's calls, cost and the budget that stopped it
            out.print(note, highlight=False, markup=False, soft_wrap=True)
    out.print(f"stored in {summary.db} ({summary.wall_s:.0f} s)", highlight=False, markup=False)
    if any(t.measured for t in summary.tasks):
        out.print(
            f"next: warpforge best {shlex.quote(summary.tasks[0].task)}; every evaluation: warpforge "
            f"results --campaign {summary.campaign}",
            highlight=False,
            markup=False,
        )
    else:
        ok = [t.task for t in summary.tasks if any(v.verdicts.get("ok") for v in t.variants)]
        static = (
            (
                f"warpforge best {shlex.quote(ok[0])} --static ranks the ok configurations by compile facts "
                "(static, not a time); "
            )
            if ok
            else ""
        )
        out.print(
            f"next: {static}warpforge results --campaign {summary.campaign} lists the verdicts; for times, "
            "run the same command with --backend cuda on a CUDA machine",
            highlight=False,
            markup=False,
        )


@app.command("eval")
def eval_cmd(
    task_name: str = typer.Argument(..., metavar="TASK"),
    variant_file: Path = typer.Argument(..., metavar="VARIANT_FILE"),
    params: str = typer.Option("{}", "--params", help="JSON object of parameters (default: SPACE's first values)"),
    backend: str = typer.Option("auto", "--backend", help="auto | cuda | interpret | replay"),
    target: str = typer.Option("sm_90", "--target"),
    timeout: float = typer.Option(120.0, "--timeout", help="seconds per child process"),
    unsafe_unsandboxed: bool = UnsafeOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Evaluate one candidate and print its verdict (exit 0 only when the verdict is ok).

    Without --params (or with some of them) the rest come from the first configuration in SPACE order that
    satisfies the variant's constraints() on the task's benchmark shapes.
    """
    check_seconds("--timeout", timeout)  # before the evaluator's imports (seconds): a typo is answered at once
    target = check_target(target)
    from warpforge.evaluator.result import Verdict
    from warpforge.evaluator.run.backend import get_backend, usable_backend
    from warpforge.evaluator.sandbox.isolation import require_for_untrusted
    from warpforge.evaluator.sandbox.job import Job
    from warpforge.kernels.task import get_task
    from warpforge.kernels.variant import (
        TEMPLATES_DIR,
        VariantError,
        check_params,
        check_space,
        load_variant,
        next_configuration,
    )
    from warpforge.preflight import pick_params

    if TEMPLATES_DIR.resolve() not in variant_file.resolve().parents:  # not shipped: the sandbox or the flag
        require_for_untrusted("variant files", unsafe_unsandboxed)
    task = get_task(task_name)
    variant = load_variant(variant_file).for_task(task.name)  # a ModelNew answer may name no TASK
    if variant.task != task.name:
        raise UsageError(f"{variant_file} implements task {variant.task!r}, not {task.name!r}")
    try:
        given = json.loads(params)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--params is not valid JSON ({exc.msg}); e.g. --params '{{\"BLOCK\": 1024}}'") from None
    if not isinstance(given, dict):
        raise UsageError("--params must be a JSON object, e.g. --params '{\"num_warps\": 4}'")
    check_space(variant)
    check_params(variant, given)
    engine = get_backend(usable_backend(backend, task.name, [variant]), task.name)
    try:
        chosen, failure, how = pick_params(engine.pool, task, variant, given, target, timeout)
        if failure is None and chosen is None:
            raise VariantError(
                f"no configuration of SPACE in {variant_file}"
                + (f" with --params {params}" if given else "")
                + f" satisfies its constraints() on {task.name}'s benchmark shapes "
                f"{', '.join(','.join(f'{k}={v}' for k, v in sh.items()) for sh in task.shapes)}: "
                + ("choose other --params" if given else "widen SPACE or fix constraints()")
            )
        result = failure or engine.evaluate(Job(task, variant, chosen or {}, target=target, timeout_s=timeout))
        skipped: list[str] = []
        while result.verdict is Verdict.INVALID_CONFIG and chosen and "@config" not in given:
            following = next_configuration(variant, chosen)  # as autotune skips a configuration that does not fit
            if following is None:
                break
            skipped.append(str(chosen["@config"]).partition(" ")[0])
            chosen, how = following, f"the first configuration that fits; {', '.join(skipped)} did not: {result.reason}"
            result = engine.evaluate(Job(task, variant, chosen, target=target, timeout_s=timeout))
    finally:
        engine.close()
    if json_out:
        _emit_json(result.model_dump(mode="json"))
    else:
        color = "green" if result.verdict is Verdict.OK else "red"
        out.print(
            f"[{color}]{result.verdict.value}[/{color}]" + (f": {rich_escape(result.reason)}" if result.reason else "")
        )
        if chosen is not None:
            out.print(f"params {_params_text(chosen)} ({how})", highlight=False)
        if result.message:  # quotes the candidate's own text (an exception's message): never Rich markup
            out.print(result.message, highlight=False, markup=False)
        coverage = (
            ("; ".join(result.unchecked) if result.unchecked else "all dtypes checked")
            if result.verdict is Verdict.OK
            else "stopped at the first failure"
        )
        where = result.device or result.backend
        out.print(
            f"checked {len(result.checked)} cases" + (f" on {where}" if where else "") + f"; {coverage}"
            if result.checked or result.verdict is Verdict.OK
            else f"no case was checked ({coverage})",
            highlight=False,
            markup=False,
        )
        for line in _resource_lines(result.resources):
            out.print(line, highlight=False, markup=False)
        if result.measured:
            out.print(
                f"time {result.objective_ms:.4g} ms, speedup {result.speedup:.3g}x ({result.timing})", markup=False
            )
    if result.verdict is not Verdict.OK:
        raise typer.Exit(1)


def _resource_lines(resources: Any) -> list[str]:
    """One line per compiled kernel, named by its compile case: a multi-kernel template compiles each kernel
    per shape and dtype (12 lines for matmul's), which read alike without them."""
    from warpforge.kernels.taskdef import shape_key

    return [
        f"  {r.kernel} [{r.target}]"
        + (f" {shape_key(r.shape)}" if r.shape else "")
        + (f" {r.dtype}" if r.dtype else "")
        + (f" warps={r.num_warps}" if r.num_warps else "")
        + f": registers={_known(r.registers)} spill={_known(r.spill_bytes, 'B')} "
        f"shared={_known(r.shared_bytes, 'B')}"
        for r in resources
    ]


def _known(value: int | None, unit: str = "") -> str:
    return "?" if value is None else f"{value}{unit}"


@db_app.command("upgrade")
def db_upgrade(db: str | None = DbOpt, json_out: bool = JsonOpt) -> None:
    """Create or migrate warpforge's tables (Alembic, version table wf_alembic_version)."""
    from warpforge.db.session import Database

    database = Database(db)
    database.upgrade()
    payload = {"db": database.safe_url, "revision": database.current_revision()}
    if json_out:
        return _emit_json(payload)
    out.print(f"{payload['db']} is at revision {payload['revision']}", markup=False)


@app.command()
def doctor(db: str | None = DbOpt, json_out: bool = JsonOpt) -> None:
    """Check the installation: torch, triton, GPU, interpreter, AOT compiler, database."""
    from warpforge.doctor import run_checks

    checks = run_checks(db)
    if json_out:
        _emit_json([c.__dict__ for c in checks])
    else:
        table = Table(title="warpforge doctor")
        for col in ("check", "status", "detail"):
            table.add_column(col, overflow="fold")  # a long path folds; "…" cut it (the recordings dir)
        for c in checks:
            status = (
                ""
                if c.advice
                else "[green]ok[/green]"
                if c.ok
                else "[red]fail[/red]"
                if c.required
                else "[yellow]no[/yellow]"
            )
            table.add_row(c.name, status, rich_escape(c.detail))
        out.print(table)
    if not all(c.ok or not c.required for c in checks):
        raise typer.Exit(1)


def _mount_subsystems() -> None:
    """Sub-commands that live beside their subsystem (search benchmark, parallelism planner)."""
    from warpforge.cli.agent import app as agent_app
    from warpforge.cli.bench import bench_search
    from warpforge.cli.dashboard import dashboard
    from warpforge.cli.estimate import estimate_command
    from warpforge.cli.export import export
    from warpforge.cli.optimize import optimize_command
    from warpforge.cli.plan import app as plan_app
    from warpforge.cli.problems import problems_command
    from warpforge.cli.results import best, results
    from warpforge.cli.spaces import spaces_command

    app.command("results")(results)
    app.command("best")(best)
    app.command("bench-search")(bench_search)
    app.command("spaces")(spaces_command)
    app.command("problems")(problems_command)
    app.command("export")(export)
    app.command("optimize")(optimize_command)
    app.command("estimate")(estimate_command)
    app.command("dashboard")(dashboard)
    app.add_typer(plan_app, name="plan")
    app.add_typer(agent_app, name="agent")
    guard_all(app)  # the one error boundary, for every command of every group (cli/boundary.py)


_mount_subsystems()


def _notes_to_stderr() -> None:
    """warpforge's own warnings (e.g. "created directory ... for the database") as one ``note:`` line each,
    until the root callback installs the handler its flags ask for: the same one at the default level,
    replacing this one (both were installed once, so each warning was said twice)."""
    import logging

    from warpforge.logs import configure

    if not logging.getLogger("warpforge").handlers:
        configure(0)


def main() -> None:
    import optuna

    # Optuna logs every study creation and trial at INFO; the CLI shows its own progress instead.
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    _notes_to_stderr()
    # Not standalone, so Click's usage errors (typer.TyperException: Typer vendors Click) reach us: Typer would
    # draw them in a Rich panel whose text wraps inside the box at 80 columns; README "Exit codes": errors are
    # one line, and usage errors exit 2 (their exit_code).
    try:
        code = app(standalone_mode=False, prog_name="warpforge")
    except typer.TyperException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # Typer printed the help already (as Typer checks it)
            raise SystemExit(2) from None
        err.print(f"[red]error:[/red] {rich_escape(usage_error_line(exc))}", highlight=False, soft_wrap=True)
        raise SystemExit(exc.exit_code) from None
    except typer.Abort:
        err.print("aborted", highlight=False)
        raise SystemExit(1) from None
    # Non-standalone, an Exit(n) comes back as n; a command's own return value is not an exit code.
    raise SystemExit(code if isinstance(code, int) and not isinstance(code, bool) else 0)


if __name__ == "__main__":
    main()
