"""GPU check: a short campaign per task on a CUDA GPU, then one table; plus the adversarial fixtures.

For each task: a campaign on the ``cuda`` backend within its share of the time budget (8 minutes in
all by default), then the best configuration's per-shape time against PyTorch eager (the task's
reference, timed in the same child the same way) and against ``torch.compile`` of the reference
(timed here with ``triton.testing.do_bench``), and its %-of-roofline. Then every adversarial fixture
is evaluated on the GPU and the number caught is printed. The report is written to
``benchmarks/results/gpu_check_<gpu>_<date>.md`` (and to ``$OUT`` when set). Without a GPU it says
so and exits 0.

    python benchmarks/gpu_check.py [--tasks softmax,matmul] [--budget-s 480] [--trials 12]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def _compile_ms(task, shape, dtype) -> float | None:  # type: ignore[no-untyped-def]
    from triton.testing import do_bench

    try:
        inputs = task.make_inputs(shape, dtype, 0, "cuda")
        compiled = torch.compile(task.reference)
        compiled(*inputs)
        return float(do_bench(lambda: compiled(*inputs), warmup=25, rep=100))
    except Exception as exc:  # noqa: BLE001 - report, don't abort the check
        print(f"torch.compile failed for {task.name} {shape}: {type(exc).__name__}: {exc}")
        return None


def campaign_rows(tasks: list[str], budget_s: float, trials: int, db_url: str) -> list[list[str]]:
    from warpforge.db import store
    from warpforge.db.session import Database
    from warpforge.kernels.task import get_task, parse_dtype, shape_key
    from warpforge.search.campaign import CampaignSpec, run_campaign

    rows = []
    share = budget_s / max(len(tasks), 1)
    for name in tasks:
        task = get_task(name)
        # The final top-k re-benchmark and A/B re-measurements run past the search's time budget:
        # give the search 70% of the task's share and re-benchmark the top 2.
        spec = CampaignSpec(name=f"gpucheck-{name}-{int(time.time())}", tasks=[name], trials=trials,
                            time_budget_s=0.7 * share, backend="cuda", db_url=db_url, top_k=2)
        start = time.monotonic()
        summary = run_campaign(spec).tasks[0]
        wall = time.monotonic() - start
        if summary.best_params is None:
            rows.append([name, "-", "-", "-", "-", "-", "-", f"{summary.evaluations} evals, none ok ({wall:.0f}s)"])
            continue
        db = Database(db_url)
        with db.session() as s:
            best = store.best(s, name, limit=1)[0].evaluation
            result = store.result_of(best)
        for sr in result.shapes:
            dtype = parse_dtype(sr.dtype)
            compiled = _compile_ms(task, sr.shape, dtype)
            rows.append([
                name, f"{summary.best_variant} {best.params}", shape_key(sr.shape), f"{sr.p50_ms:.4g}",
                f"{sr.speedup:.2f}x" if sr.speedup else "-",
                f"{compiled / sr.p50_ms:.2f}x" if compiled and sr.p50_ms else "-",
                f"{sr.roofline_pct:.0f}%" if sr.roofline_pct is not None else "-",
                f"{summary.evaluations} evals ({wall:.0f}s)",
            ])
    return rows


def adversarial_rows() -> list[str]:
    try:
        from warpforge.evaluator.adversarial import run_manifest
    except ImportError:
        return ["adversarial fixtures: module not available"]
    outcomes = run_manifest("cuda")
    caught = sum(1 for o in outcomes if o.passed)
    lines = [f"adversarial fixtures on GPU: {caught}/{len(outcomes)} ended as expected"]
    lines += [f"  {'ok ' if o.passed else 'MISS'} {o}" for o in outcomes]
    return lines


def main() -> int:
    from warpforge.kernels.task import builtin_task_names

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default=",".join(builtin_task_names()))
    parser.add_argument("--budget-s", type=float, default=420.0, help="campaign time for all tasks together")
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--skip-adversarial", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA GPU here; this check only means something on a GPU. Nothing measured.")
        return 0
    gpu = torch.cuda.get_device_name(0)
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    db_url = f"sqlite:///{tempfile.mkdtemp()}/gpu_check.db"
    start = time.monotonic()
    rows = campaign_rows(args.tasks.split(","), args.budget_s, args.trials, db_url)
    header = ["task", "best variant and params", "shape", "time ms (p50)", "vs eager", "vs torch.compile",
              "roofline", "campaign"]
    lines = [f"# gpu_check on {gpu}, {date} (torch {torch.__version__})", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if not args.skip_adversarial:
        lines += [""] + adversarial_rows()
    lines += ["", f"total wall time {time.monotonic() - start:.0f} s"]
    report = "\n".join(lines)
    print(report)
    slug = "".join(c if c.isalnum() else "_" for c in gpu)
    for folder in filter(None, [RESULTS, Path(os.environ["OUT"]) if os.environ.get("OUT") else None]):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"gpu_check_{slug}_{date}.md").write_text(report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
