"""GPU check: device ceilings, the adversarial fixtures, then a short campaign per task; one report.

Stages, in order of what a short device lease must not lose:

1. the device and its two ceilings, measured (device-to-device copy bandwidth, bf16 matrix rate on
   random data), so every %-of-roofline below rests on this machine's numbers;
2. every adversarial fixture on the ``cuda`` backend, each printed as it ends with its wall time (and
   the control's time ratio after a device-poisoning fixture);
3. for each task, a campaign on the ``cuda`` backend within its share of ``--budget-s``, one line per
   evaluation (verdict, objective, wall time), then the best configuration's per-shape time against
   PyTorch eager (the task's reference, timed in the same child the same way) and ``torch.compile``
   of the reference (timed here with ``triton.testing.do_bench``), and its %-of-roofline.

Every line goes to stdout and is appended to the report at once
(``benchmarks/results/gpu_check_<gpu>_<date>.md`` and ``$OUT`` when set), so a run stopped at its
time limit keeps everything that finished: the first GPU session (2026-11-29) lost both of its
reports because the report was written only at the end and the campaigns ran past their budget
(matmul ~100 s against a 37 s share, read off the log's timestamps: the evaluation in flight at the
deadline and the final re-benchmark both come after it). Campaigns
here re-benchmark only the best (``top_k=1``). Without a GPU the script says so and exits 0, unless
``--dry-run``: then every stage runs on the CPU (the ``interpret`` backend: the manifest's verdicts and a
campaign's evaluations, no times), and the GPU-only steps (ceilings, torch.compile) say they were skipped, so
that only the GPU itself is untested before a device call (scripts/gpu_session.sh --dry-run).

    python benchmarks/gpu_check.py [--tasks softmax,matmul] [--budget-s 300] [--trials 12] [--stages manifest]
        [--fixtures control_double,io_report_flood] [--compile-mode max-autotune] [--results DIR] [--dry-run]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import torch
import triton

RESULTS = Path(__file__).resolve().parent / "results"
COPY_BYTES = 1 << 30  # 1 GiB each way: many times the 60 MB L2 of an H100/H200


class Report:
    """Lines printed and appended to the report files at once, so a killed run keeps them."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        for p in paths:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("")

    def add(self, *lines: str) -> None:
        text = "".join(line + "\n" for line in lines)
        print(text, end="", flush=True)
        for p in self.paths:
            with p.open("a") as f:
                f.write(text)


def _ceiling_ms() -> tuple[float, float]:
    from triton.testing import do_bench

    src = torch.randn(COPY_BYTES // 4, device="cuda")
    dst = torch.empty_like(src)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)  # random data: zeros run faster
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    return (
        float(do_bench(lambda: dst.copy_(src), warmup=10, rep=100)),
        float(do_bench(lambda: a @ b, warmup=10, rep=200)),
    )


def ceilings() -> list[str]:
    """Copy bandwidth and bf16 matrix rate, measured here (METHOD.md: measure the ceilings, don't quote them)."""
    copy_ms, mm_ms = _ceiling_ms()
    torch.cuda.empty_cache()
    return [
        f"- copy: {2 * COPY_BYTES / copy_ms / 1e6:.0f} GB/s (bytes read + written, 1 GiB device to device)",
        f"- bf16 matrix product 8192^3 on random data: {2 * 8192**3 / mm_ms / 1e9:.0f} TFLOP/s",
    ]


def _compile_ms(task, shape, dtype, mode: str) -> float | None:  # type: ignore[no-untyped-def]
    """torch.compile of the reference, timed like the candidates (do_bench flushes L2 before each call)."""
    from triton.testing import do_bench

    try:
        inputs = task.make_inputs(shape, dtype, 0, "cuda")
        compiled = torch.compile(task.reference, mode=None if mode == "default" else mode)
        compiled(*inputs)
        return float(do_bench(lambda: compiled(*inputs), warmup=25, rep=100))
    except Exception as exc:  # noqa: BLE001 - report, don't abort the check
        print(f"torch.compile failed for {task.name} {shape}: {type(exc).__name__}: {exc}")
        return None


def adversarial(report: Report, backend: str = "cuda", names: list[str] | None = None) -> None:
    from warpforge.evaluator.run.adversarial import run_manifest
    from warpforge.evaluator.sandbox.isolation import probe

    report.add("", f"## Adversarial fixtures on the {backend} backend", "", f"isolation: {probe().summary()}", "")
    outcomes = run_manifest(
        backend,
        names=names,
        on_outcome=lambda o: report.add(
            f"- {'ok  ' if o.passed else 'MISS'} {o}"
            + (f" -- {o.message[:300]}" if not o.passed else "")
            + (f" [{'; '.join(o.notes)}]" if o.notes else "")
        ),
    )
    report.add("", f"{sum(o.passed for o in outcomes)}/{len(outcomes)} fixtures ended as expected")


def campaigns(
    report: Report,
    tasks: list[str],
    budget_s: float,
    trials: int,
    db_url: str,
    backend: str = "cuda",
    compile_mode: str = "max-autotune",
) -> None:
    from warpforge.db import store
    from warpforge.db.session import Database
    from warpforge.kernels.task import get_task
    from warpforge.kernels.taskdef import parse_dtype, shape_key
    from warpforge.search.engine.campaign import CampaignSpec, run_campaign
    from warpforge.search.engine.summary import Event

    header = [
        "task",
        "best variant and params",
        "shape",
        "time ms (p50)",
        "vs eager",
        f"vs torch.compile ({compile_mode})",
        "roofline",
        "campaign",
    ]
    table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    vs_compile: list[float] = []  # candidate speedup over torch.compile, per task and shape
    share = budget_s / max(len(tasks), 1)
    last = [time.monotonic()]

    def on_event(e: Event) -> None:
        now = time.monotonic()
        report.add(
            f"- {e.task} {e.variant} {e.done}/{e.total}: {e.result.summary()} "
            f"[{e.result.params}] ({now - last[0]:.1f} s)"
        )
        last[0] = now

    for name in tasks:
        task = get_task(name)
        report.add("", f"## Campaign: {name} ({share:.0f} s share, search 70% of it)", "")
        # The search stops at its deadline; the final re-benchmark of the best comes after it.
        spec = CampaignSpec(
            name=f"gpucheck-{name}-{int(time.time())}",
            tasks=[name],
            trials=trials,
            time_budget_s=0.7 * share,
            backend=backend,
            db_url=db_url,
            top_k=1,
        )
        start = last[0] = time.monotonic()
        summary = run_campaign(spec, on_event=on_event).tasks[0]
        wall = time.monotonic() - start
        report.add(f"campaign done: {summary.evaluations} evaluations in {wall:.0f} s; {summary.acceptance}")
        if backend != "cuda":  # the dry run: the interpreter checks correctness, it never times
            table.append(
                f"| {name} | - | - | no time ({backend}) | - | - | - | {summary.evaluations} evals ({wall:.0f}s) |"
            )
            continue
        if summary.best_params is None:
            table.append(f"| {name} | - | - | - | - | - | - | {summary.evaluations} evals, none ok ({wall:.0f}s) |")
            continue
        db = Database(db_url)
        with db.session() as s:
            best = store.best(s, name, limit=1)[0].evaluation
            result = store.result_of(best)
        for sr in result.shapes:
            compiled = _compile_ms(task, sr.shape, parse_dtype(sr.dtype), compile_mode)
            if compiled and sr.p50_ms:
                vs_compile.append(compiled / sr.p50_ms)
            table.append(
                "| "
                + " | ".join(
                    [
                        name,
                        f"{summary.best_variant} {best.params}",
                        shape_key(sr.shape),
                        f"{sr.p50_ms:.4g}",
                        f"{sr.speedup:.2f}x" if sr.speedup else "-",
                        f"{compiled / sr.p50_ms:.2f}x" if compiled and sr.p50_ms else "-",
                        f"{sr.roofline_pct:.0f}%" if sr.roofline_pct is not None else "-",
                        f"{summary.evaluations} evals ({wall:.0f}s)",
                    ]
                )
                + " |"
            )
        report.add("", "## Best per task so far", "", *table)
    report.add("", "## Best per task", "", *table)
    if vs_compile:
        geo = math.exp(sum(math.log(r) for r in vs_compile) / len(vs_compile))
        report.add(
            "",
            f"geomean speedup vs torch.compile({compile_mode}): {geo:.2f}x over {len(vs_compile)} "
            "shapes (target >= 1.1x)",
        )


def main() -> int:
    from warpforge.kernels.task import builtin_task_names

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default=",".join(builtin_task_names()))
    parser.add_argument("--budget-s", type=float, default=300.0, help="campaign time for all tasks together")
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--skip-adversarial", action="store_true", help="the same as leaving manifest out of --stages")
    parser.add_argument("--stages", default="ceilings,manifest,campaigns", help="which stages, in this order")
    parser.add_argument("--fixtures", default=None, help="only these manifest fixtures (comma-separated)")
    parser.add_argument("--compile-mode", default="max-autotune", help="torch.compile's mode for the comparison")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the report goes (and $OUT when set)")
    parser.add_argument("--dry-run", action="store_true", help="on the CPU: interpret backend, GPU-only steps skipped")
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    if not cuda and not args.dry_run:
        print("gpu_check: no CUDA GPU here; this check only means something on a GPU. Nothing measured.")
        return 0
    stages = [s for s in args.stages.split(",") if s and not (s == "manifest" and args.skip_adversarial)]
    backend = "cuda" if cuda and not args.dry_run else "interpret"
    gpu = torch.cuda.get_device_name(0) if backend == "cuda" else "CPU dry run"
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    slug = "".join(c if c.isalnum() else "_" for c in gpu)
    folders = [args.results] + ([Path(os.environ["OUT"])] if os.environ.get("OUT") else [])
    # One file per set of stages: gpu_session.sh runs the manifest and the campaigns as two stages (two calls).
    suffix = "" if stages == ["ceilings", "manifest", "campaigns"] else "_" + "-".join(stages)
    report = Report([f / f"gpu_check_{slug}_{date}{suffix}.md" for f in folders])
    start = time.monotonic()
    report.add(
        f"# gpu_check on {gpu}, {date} (torch {torch.__version__}, Triton {triton.__version__}, backend {backend})", ""
    )
    if "ceilings" in stages:
        report.add(
            "## Ceilings measured here",
            "",
            *(ceilings() if backend == "cuda" else ["- skipped: no GPU (dry run); measured first on a GPU"]),
        )
    if "manifest" in stages:
        adversarial(report, backend, args.fixtures.split(",") if args.fixtures else None)
    if "campaigns" in stages:
        if backend != "cuda":
            report.add("", f"torch.compile(mode={args.compile_mode!r}) comparison: skipped (no GPU, dry run)")
        campaigns(
            report,
            args.tasks.split(","),
            args.budget_s,
            args.trials,
            f"sqlite:///{tempfile.mkdtemp()}/gpu_check.db",
            backend,
            args.compile_mode,
        )
    report.add("", f"total wall time {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
