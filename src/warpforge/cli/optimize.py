"""``warpforge optimize TARGET``: profile a model's step, search its hot regions, patch and prove the winners.

TARGET is a folder with a transformers ``config.json``, a KernelBench-format ``.py`` file, or
``module:function`` returning ``(model, inputs)`` (optimize/target.py). Exit codes: 0 the report was written
(whatever was or was not patched: the report says) and stored in the database for the dashboard's
``/optimize`` pages; 1 the proof found the patched model differing or could not run, or the report could not
be stored; 2 usage (a TARGET that is none of the three, an unknown --dtype or --gpu).

Example::

    warpforge optimize ./qwen3-tiny --trials 8 --out ./opt
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from warpforge.inert import InertConsole

err = InertConsole(stderr=True)
out = InertConsole()

if TYPE_CHECKING:
    from warpforge.optimize.report import OptimizeReport


def optimize_command(
    target: str = typer.Argument(
        ...,
        metavar="TARGET",
        help="a transformers config folder, a KernelBench-format "
        ".py file, or module:function returning (model, inputs)",
    ),
    batch: int = typer.Option(2, "--batch", min=1, help="sequences per step (transformers targets)"),
    seq: int = typer.Option(64, "--seq", min=1, help="tokens per sequence (transformers targets)"),
    dtype: str = typer.Option(
        "auto",
        "--dtype",
        help="the step's dtype: bfloat16 | float16 | float32; auto: "
        "bfloat16 on a GPU, float16 without one (Triton's interpreter computes bf16 "
        "tl.dot wrongly, so no bf16 GEMM or attention kernel can be checked there)",
    ),
    train: bool = typer.Option(
        True, "--train/--infer", help="a training step (forward, loss, backward) or a forward alone"
    ),
    gpu: str = typer.Option("H100", "--gpu", help="the GPU whose roofline prices the step on a CPU"),
    trials: int = typer.Option(8, "--trials", min=1, help="evaluations in all, spread over the matched tasks"),
    backend: str = typer.Option("auto", "--backend", help="auto | cuda | interpret | replay"),
    steps: int = typer.Option(3, "--steps", min=1, help="optimizer steps the proof compares (training)"),
    out_dir: Path = typer.Option(
        Path("warpforge-optimize"), "--out", help="where the report, the exported package and the patch plan go"
    ),
    db: str | None = typer.Option(
        None, "--db", help="database URL (default: $WARPFORGE_DB, else a SQLite file in the user data)"
    ),
    cluster: str | None = typer.Option(
        None,
        "--cluster",
        help="also plan the training job's parallel layout on "
        "this cluster (a planner preset such as dgx-h100, or a YAML file; "
        "transformers targets)",
    ),
    nodes: int | None = typer.Option(None, "--nodes", min=1, help="nodes of --cluster (default: the preset's)"),
    plan_seq: int | None = typer.Option(
        None, "--plan-seq", min=1, help="the training job's sequence length for the planner (default: --seq)"
    ),
    global_batch: int | None = typer.Option(
        None, "--global-batch", min=1, help="sequences per optimizer step for the planner (default: the planner's)"
    ),
    json_out: bool = typer.Option(False, "--json", help="print the report as one JSON document on stdout"),
) -> None:
    """Find a model's hot regions, search kernels for them, patch the winners in and prove the model unchanged."""
    from warpforge.kernels.taskdef import parse_dtype
    from warpforge.optimize.flow import OptimizeOptions, optimize

    if dtype == "auto":
        import torch

        dtype = "bfloat16" if torch.cuda.is_available() else "float16"
    parse_dtype(dtype)  # a usage error before anything runs
    opts = OptimizeOptions(
        target=target,
        out=out_dir,
        batch=batch,
        seq=seq,
        dtype=dtype,
        train=train,
        gpu=gpu,
        trials=trials,
        backend=backend,
        db=db,
        steps=steps,
        cluster=cluster,
        nodes=nodes,
        plan_seq=plan_seq,
        global_batch=global_batch,
        on_stage=lambda s: err.print(f"[bold]optimize[/bold]: {escape(s)}", highlight=False),
    )
    report = optimize(opts)
    stored, store_error = _store(db, report, out_dir)
    if json_out:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    else:
        table = Table(title=escape(f"{report.target}: regions"))
        for col in ("region", "kind", "share", "task", "status"):
            table.add_column(col, overflow="fold")
        for r in report.regions[:25]:
            table.add_row(escape(r.name), r.kind, f"{r.share:.1%}", escape(r.task or "-"), escape(r.status))
        out.print(table)
        s = report.speedup
        out.print(
            f"coverage {report.coverage:.1%}; estimated speedup {s.estimated or 0:.3f}x (ceiling "
            f"{s.ceiling or 0:.3f}x): {s.basis}",
            highlight=False,
            markup=False,
        )
        if report.plans is not None:
            plans = Table(
                title=escape(f"parallel plans on {report.plans.cluster} ({report.plans.gpus} GPUs, predicted)")
            )
            for col in ("plan", "tokens/s", "MFU", "peak GiB", "fits"):
                plans.add_column(col, overflow="fold")
            for p in report.plans.plans:
                plans.add_row(
                    escape(p.plan),
                    f"{p.tokens_per_s:,.0f}",
                    f"{p.mfu:.1%}",
                    f"{p.peak_mem_gb:.1f}/{p.hbm_gb:.0f}",
                    p.fits,
                )
            out.print(plans)
        out.print(f"report: {out_dir / 'report.md'}", highlight=False, markup=False)
    if stored:
        (err if json_out else out).print(stored, highlight=False, markup=False, soft_wrap=True)
    if store_error:
        err.print(
            f"error: the report was written to {out_dir} but not stored: {store_error}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    c = report.checks
    if report.patches is None:  # nothing matched an exportable kernel: the report says why, region by region
        err.print(
            "nothing was patched: no region has a task with an exportable kernel (see the report's statuses)",
            highlight=False,
            markup=False,
        )
        if store_error:
            raise typer.Exit(1)
        return
    if c.error or not c.outputs_match or c.losses_match is False or c.grads_match is False:
        err.print(
            f"[red]error:[/red] the patched model is not proven equal: {escape(c.error or 'see the report')}",
            highlight=False,
        )
        raise typer.Exit(1)
    if store_error:
        raise typer.Exit(1)


def _store(db: str | None, report: OptimizeReport, out_dir: Path) -> tuple[str, str]:
    """Store the report for the dashboard: (the line saying where, ""), or ("", why it could not be stored)."""
    import json

    from warpforge.db.session import DatabaseError, default_url, mask_url
    from warpforge.optimize.flow import PACKAGE_SOURCE
    from warpforge.optimize.store import store_report

    source = out_dir / PACKAGE_SOURCE
    try:
        run_id = store_report(db, report, json.loads(source.read_text()) if source.is_file() else None)
    except DatabaseError as exc:
        return "", str(exc)
    return (
        f"stored: optimize run {run_id} in {mask_url(db or default_url())} (warpforge dashboard: /optimize/{run_id})"
    ), ""
