"""``warpforge export TASK... --dest DIR``: write the accepted winners as a package of PyTorch custom ops.

Reads only through the read layer (``warpforge.db.queries.Reader``). Exit codes: 0 written; 1 refused (no
accepted winner, winner never verified ok, no result for the GPU) or a database error; 2 usage (unknown
task, bad namespace or format, a non-empty directory no export wrote).

Example::

    warpforge export rmsnorm softmax --dest ./mykernels --namespace mykernels --gpu H100
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from warpforge.inert import InertConsole

err = InertConsole(stderr=True)
out = InertConsole()


def export(
    task_names: list[str] = typer.Argument(None, metavar="TASK...", help="task names or task files"),
    dest: Path = typer.Option(
        ..., "--dest", help="directory to write the package into (created; re-export into it is idempotent)"
    ),
    namespace: str = typer.Option(
        "wf_kernels", "--namespace", help="torch.library namespace and Python package name (torch.ops.NS.op)"
    ),
    gpu: str | None = typer.Option(None, "--gpu", help="only results measured on this GPU (substring of its name)"),
    fmt: str = typer.Option("package", "--format", help="package | hf-kernels"),
    db: str | None = typer.Option(
        None, "--db", help="database URL (default: $WARPFORGE_DB, else a SQLite file in the user data)"
    ),
    allow_untimed: bool = typer.Option(
        False,
        "--allow-untimed",
        help="without a timed accepted winner, export the "
        "configuration verified ok that static compile facts rank best (flagged as "
        "never timed)",
    ),
    patch: bool = typer.Option(
        False, "--patch", help="also write apply_NS_kernels(model) for Hugging Face transformers models"
    ),
    optimize_run: int | None = typer.Option(
        None,
        "--optimize-run",
        metavar="ID",
        help="write the package of a stored `warpforge optimize` run instead (its ops and patch(model))",
    ),
    json_out: bool = typer.Option(False, "--json", help="print machine-readable JSON on stdout"),
) -> None:
    """Export each task's accepted winner as a torch.library.triton_op package (tests, benchmark, configs)."""
    if optimize_run is not None:
        _export_optimize_run(optimize_run, task_names, dest, namespace, db, json_out)
        return
    if not task_names:
        from warpforge.errors import UsageError

        raise UsageError("name the tasks to export (warpforge export rmsnorm --dest DIR), or --optimize-run ID")
    from warpforge.db.queries import Reader
    from warpforge.export.package import FORMATS, ExportUsageError, check_namespace, render_package, write_tree
    from warpforge.export.plan import plan_task
    from warpforge.kernels.task import get_task

    # The usage errors first: a bad --format or --namespace is exit 2 before any task or result is looked at.
    check_namespace(namespace)
    if fmt not in FORMATS:
        raise ExportUsageError(f"unknown --format {fmt!r}: use one of {', '.join(FORMATS)}")
    from warpforge.cli.taskref import runnable

    reader = Reader(db)
    # A by-path task may be named as the store names it (23_Softmax): its campaign's file is the task.
    tasks = [get_task(shlex.split(runnable(reader, t))[0]) for t in task_names]
    plans = [plan_task(reader, t, gpu=gpu, allow_untimed=allow_untimed) for t in tasks]  # ExportRefused: exit 1
    files = render_package(plans, namespace, fmt, patch)
    report = write_tree(dest, files)
    payload: dict[str, Any] = {
        "dest": str(dest),
        "namespace": namespace,
        "format": fmt,
        "files": len(files),
        "written": list(report.written),
        "removed": list(report.removed),
        "unchanged": len(report.unchanged),
        "ops": {
            p.task.name: {
                "variant": p.variant_name,
                "variant_hash": p.variant_hash,
                "gpus": [t.gpu for t in p.tables],
                "untimed": p.untimed,
                "speedup": p.info.get("speedup_vs_eager"),
            }
            for p in plans
        },
    }
    if json_out:
        sys.stdout.write(json.dumps(payload, indent=2, sort_keys=True) + "\n")
        return
    for p in plans:
        where = ", ".join(t.gpu for t in p.tables)
        note = " [yellow](NEVER TIMED: --allow-untimed)[/yellow]" if p.untimed else ""
        op = escape(f"torch.ops.{namespace}.{p.task.name}: {p.variant_name} ({p.variant_hash[:12]}) tuned on {where}")
        out.print(f"{op}{note}", highlight=False)  # stored names escaped; only the note is markup
    out.print(
        f"{dest}: {len(report.written)} file(s) written, {len(report.unchanged)} unchanged, "
        f"{len(report.removed)} removed",
        highlight=False,
        markup=False,
    )


def _export_optimize_run(
    run_id: int, task_names: list[str] | None, dest: Path, namespace: str, db: str | None, json_out: bool
) -> None:
    """The package of a stored optimize run, written again from the database (the report's package_source)."""
    from warpforge.db.queries import Reader
    from warpforge.errors import UsageError
    from warpforge.export.op_plan import ExportRefused
    from warpforge.export.package import check_namespace
    from warpforge.optimize.flow import package_from_source

    if task_names:
        raise UsageError("--optimize-run writes that run's package: name no tasks with it")
    if namespace != "wf_kernels":
        check_namespace(namespace)
    run = Reader(db).optimize_run(run_id)
    if run is None:
        raise UsageError(f"no optimize run {run_id} in the database: `warpforge dashboard` lists them at /optimize")
    source = run.report.get("package_source")
    if not source:
        raise ExportRefused(
            f"optimize run {run_id} stored no package: nothing was patched and proven, or the run "
            "predates stored packages; run warpforge optimize again"
        )
    ns = package_from_source(source, dest, db, None if namespace == "wf_kernels" else namespace)
    payload = {
        "dest": str(dest),
        "namespace": ns,
        "optimize_run": run_id,
        "campaigns": source["campaigns"],
        "regions": len(json.loads(source["patches"]).get("patches", [])),
    }
    if json_out:
        sys.stdout.write(json.dumps(payload, indent=2, sort_keys=True) + "\n")
        return
    out.print(
        f"{dest}: the package of optimize run {run_id} ({ns}: {payload['regions']} region(s), "
        f"{len(source['campaigns'])} op(s)); pip install {dest}, then {ns}.patch(model)",
        highlight=False,
        markup=False,
    )
