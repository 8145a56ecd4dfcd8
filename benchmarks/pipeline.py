"""Pipeline efficiency on the CPU: the real orchestrator, Ray pool and database driving stand-in GPUs.

The stand-in backend (``standin-gpu``, registered only when this file is imported: by this script and
by the tests) holds a custom Ray resource in place of a GPU. Its CPU stage takes ``compile_s``, its GPU
stage ``eval_s``, both by sleeping, so the GPU work is known exactly; its "times" are synthetic numbers
labelled ``timing.source = "simulated"`` on a device named "stand-in (no GPU)", for a throwaway database.

Measured per worker count (1..4 stand-in GPUs, as many CPU compile workers):
- GPU busy %: the stand-in GPUs' busy seconds (each evaluation's ``wall_s``, measured inside the actor)
  over workers x the campaign loop's wall time (first proposal to last stored result);
- overhead ms/eval: the orchestrator's own time per evaluation (ask, store, tell, dispatch): the loop's
  wall time minus the time it spent blocked waiting for the pool;
- throughput and scaling efficiency (throughput / (workers x throughput at 1 worker)).

Run: ``.venv/bin/python benchmarks/pipeline.py [--evals-per-worker 40] [--out benchmarks/results/pipeline_cpu.txt]``
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from warpforge.evaluator.result import EvalResult, ShapeResult, Timing, Verdict, aggregate
from warpforge.evaluator.run.backend import Backend, register
from warpforge.evaluator.sandbox.job import Job

RESOURCE = "standin_gpu"  # the custom Ray resource that stands in for a GPU


def synthetic_ms(params: dict[str, Any]) -> float:
    """A fixed pseudo-time per configuration (0.5-1.5 ms), so searches have something to rank."""
    digest = hashlib.sha256(repr(sorted(params.items())).encode()).digest()
    return 0.5 + int.from_bytes(digest[:4], "big") / 2**32


def samples_of(params: dict[str, Any], n: int = 20, spread: float = 0.01) -> list[float]:
    """Deterministic samples around synthetic_ms with +-``spread`` relative jitter."""
    ms = synthetic_ms(params)
    return [ms * (1 + spread * math.sin(1.7 * i + ms)) for i in range(n)]


@register
class StandInGpuBackend(Backend):
    """Benchmark and test stand-in for a GPU backend: known evaluation times, synthetic labelled 'times'."""

    name = "standin-gpu"
    measures = True
    uses_gpu = True  # one worker per (stand-in) GPU, compile stage on CPU workers ahead of it
    live_timing = True  # re-measuring gives fresh numbers, so the final top-k is re-run
    can_remeasure = True  # remeasure() below: synthetic interleaved samples
    has_precheck = True  # precheck() below replaces the static check and compile

    def __init__(
        self,
        pool: Any = None,
        eval_s: float = 0.5,
        compile_s: float = 0.25,
        remeasure_s: float = 0.0,
        die_on: dict[str, Any] | None = None,
        reference_ms: float = 2.0,
    ) -> None:
        super().__init__(pool)
        self.eval_s, self.compile_s, self.remeasure_s = eval_s, compile_s, remeasure_s
        self.die_on, self.reference_ms = die_on, reference_ms

    def precheck(self, job: Job) -> EvalResult:
        time.sleep(self.compile_s)
        return job.result(Verdict.OK, checked=["stand-in compile"])

    def _evaluate(self, job: Job) -> EvalResult:
        if self.die_on is not None and all(job.params.get(k) == v for k, v in self.die_on.items()):
            os._exit(3)  # a worker that dies: the pool must replace it and retry, then give up
        time.sleep(self.eval_s)
        ms, ref = synthetic_ms(job.params), self.reference_ms
        shape = ShapeResult(
            shape=dict(job.shapes[0]),
            dtype="float32",
            p20_ms=ms * 0.99,
            p50_ms=ms,
            p80_ms=ms * 1.01,
            ref_p20_ms=ref * 0.99,
            ref_p50_ms=ref,
            ref_p80_ms=ref * 1.01,
            speedup=ref / ms,
        )
        return aggregate(
            job.result(
                Verdict.OK,
                shapes=[shape],
                device="stand-in (no GPU)",
                fingerprint="standin",
                timing=Timing(source="simulated", gpu="stand-in (no GPU)"),
            )
        )

    def remeasure(self, job_a: Job, job_b: Job) -> tuple[list[float], list[float]]:
        time.sleep(self.remeasure_s)
        return samples_of(job_a.params), samples_of(job_b.params)


TASK_SOURCE = '''"""Stand-in task for the pipeline benchmark: y = 2x + 1."""
import torch

NAME = "standin"
DESCRIPTION = "stand-in task for the pipeline benchmark"
SHAPES = [{"N": 1 << 20}]
CHECK_SHAPES = [{"N": 97}]
DTYPES = [torch.float32]


def reference(x):
    return x * 2 + 1


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape["N"], generator=g).to(dtype).to(device),)


def flops(shape, dtype):
    return 2.0 * shape["N"]


def bytes_moved(shape, dtype):
    return 8.0 * shape["N"]
'''

VARIANT_SOURCE = """import torch
import triton
import triton.language as tl

TASK = "standin"
SPACE = {"BLOCK": [64, 128, 256, 512, 1024, 2048, 4096, 8192], "num_warps": [1, 2, 4, 8],
         "num_stages": [1, 2, 3, 4], "UNROLL": [1, 2, 4, 8],
         "GROUP": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]}


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr, UNROLL: tl.constexpr, GROUP: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2 + 1, mask=mask)


def launch(x, BLOCK=256, num_warps=4, num_stages=1, UNROLL=1, GROUP=1):
    y = torch.empty_like(x)
    _double[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, UNROLL=UNROLL, GROUP=GROUP,
                                              num_warps=num_warps, num_stages=num_stages)
    return y
"""


def write_files(folder: Path) -> tuple[Path, Path]:
    """The stand-in task and a variant whose SPACE has 8,192 configurations."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "standin_task.py").write_text(TASK_SOURCE)
    (folder / "standin_variant.py").write_text(VARIANT_SOURCE)
    return folder / "standin_task.py", folder / "standin_variant.py"


def prefill(url: str, name: str, n: int, seed: int = 0) -> None:
    """Put ``n`` finished trials into the study ``name`` (created as the campaign will load it).

    Written in one bulk insert through Optuna's own table definitions: through the storage API it would
    take 5,000 transactions (a minute here) to set up what is being measured, not part of it.
    """
    import json
    import random
    from datetime import datetime

    import optuna
    from optuna.distributions import IntDistribution, distribution_to_json
    from optuna.storages._rdb import models

    from warpforge.search.samplers.strategy import CONFIG_ATTR, make_study

    study = make_study(name, optuna.storages.RDBStorage(url), "random", seed)
    space = VARIANT_SPACE
    rng = random.Random(seed)
    names = list(space)
    rows = rng.sample(range(math.prod(len(v) for v in space.values())), n)
    storage = optuna.storages.RDBStorage(url)
    now = datetime.now()
    trials, params, values, attrs = [], [], [], []
    base = 10_000_000  # trial ids far above any the campaign's database already has
    for number, row in enumerate(rows):
        index, rest = [], row
        for k in reversed(names):
            rest, i = divmod(rest, len(space[k]))
            index.append(i)
        index.reverse()
        tid = base + number
        trials.append(
            {
                "trial_id": tid,
                "number": number,
                "study_id": study._study_id,
                "state": "COMPLETE",
                "datetime_start": now,
                "datetime_complete": now,
            }
        )
        config = {k: space[k][i] for k, i in zip(names, index)}
        for k, i in zip(names, index):
            params.append(
                {
                    "trial_id": tid,
                    "param_name": k,
                    "param_value": float(i),
                    "distribution_json": distribution_to_json(IntDistribution(0, len(space[k]) - 1)),
                }
            )
        values.append({"trial_id": tid, "objective": 0, "value": synthetic_ms(config), "value_type": "FINITE"})
        attrs.append({"trial_id": tid, "key": CONFIG_ATTR, "value_json": json.dumps(config)})
    with storage.engine.begin() as conn:
        conn.execute(models.TrialModel.__table__.insert(), trials)
        conn.execute(models.TrialParamModel.__table__.insert(), params)
        conn.execute(models.TrialValueModel.__table__.insert(), values)
        conn.execute(models.TrialUserAttributeModel.__table__.insert(), attrs)
    storage.engine.dispose()


VARIANT_SPACE: dict[str, list[int]] = {
    "BLOCK": [64, 128, 256, 512, 1024, 2048, 4096, 8192],
    "num_warps": [1, 2, 4, 8],
    "num_stages": [1, 2, 3, 4],
    "UNROLL": [1, 2, 4, 8],
    "GROUP": list(range(1, 17)),
}


def run_one(
    workers: int, evaluations: int, eval_s: float, compile_s: float, folder: Path, stored: int = 0, profile: Any = None
) -> dict[str, float]:
    """One campaign on ``workers`` stand-in GPUs, ``stored`` trials already in its study; the measured row.

    ``profile``: a ``cProfile.Profile`` enabled on the orchestrator's thread for the search loop only.
    """
    from sqlalchemy import create_engine, text

    from warpforge.evaluator.run.pool import PoolConfig
    from warpforge.search.engine import campaign as engine
    from warpforge.search.engine import mirror, taskrun

    task, variant = write_files(folder)
    db = folder / f"bench-{workers}-{stored}.db"
    spec = engine.CampaignSpec(
        name=f"bench-{workers}",
        tasks=[str(task)],
        variant_files=[str(variant)],
        trials=evaluations,
        backend=StandInGpuBackend.name,
        db_url=f"sqlite:///{db}",
        seed=0,
        top_k=0,
        sampler="random",
    )
    if stored:
        from warpforge.db.session import Database
        from warpforge.kernels.task import get_task
        from warpforge.kernels.variant import load_variant

        Database(spec.db_url).upgrade()
        prefill(spec.db_url, engine.study_name(spec.name, get_task(str(task)).name, load_variant(variant)), stored)
    config = PoolConfig(
        workers=workers,
        compile_workers=workers,
        use_ray=True,
        gpu_resource=RESOURCE,
        backend_kwargs={"eval_s": eval_s, "compile_s": compile_s},
    )
    marks: dict[str, float] = {"waiting": 0.0, "ask": 0.0, "tell": 0.0, "store": 0.0}
    writers: list[Any] = []
    results: list[Any] = []

    def timed(name: str, fn: Any) -> Any:  # accumulate the time spent in one orchestrator step
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                marks[name] += time.perf_counter() - t

        return wrapper

    commits: list[float] = []  # each result transaction's wall time, for its spread

    make_pool = taskrun.make_pool

    def timed_pool(*args: Any, **kwargs: Any) -> Any:  # how long the orchestrator waits on the pool
        pool = make_pool(*args, **kwargs)
        pool.poll = timed("waiting", pool.poll)  # type: ignore[method-assign]
        return pool

    class Writer(mirror.StudyWriter):  # keeps a handle on the background copy, to report its cost
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            writers.append(self)

    class Results(taskrun.ResultWriter):  # keeps a handle on the result writer, to report its batches
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            results.append(self)

        def flush(self) -> int:
            t = time.perf_counter()
            n = super().flush()
            if n:
                commits.append(time.perf_counter() - t)
            return n

    patches = [
        (taskrun, "make_pool", timed_pool),
        (taskrun.Strategy, "ask", timed("ask", taskrun.Strategy.ask)),
        (taskrun.Strategy, "tell", timed("tell", taskrun.Strategy.tell)),
        (taskrun.TaskRun, "save", timed("store", taskrun.TaskRun.save)),
        (taskrun.TaskRun, "commit", timed("store", taskrun.TaskRun.commit)),
        (taskrun, "StudyWriter", Writer),
        (taskrun, "ResultWriter", Results),
    ]
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    for obj, name, value in patches:
        setattr(obj, name, value)
    try:

        def on_start(_task: str, _total: int) -> None:
            marks["start"] = time.perf_counter()
            for k in ("waiting", "ask", "tell", "store"):
                marks[k] = 0.0  # count the search loop only, not the set-up before it
            commits.clear()
            if profile is not None:
                profile.enable()
            marks["copy0"], marks["cpu0"] = writers[0].busy_s, time.thread_time()
            marks["flushes0"], marks["written0"] = results[0].flushes, results[0].written

        def on_event(event: Any) -> None:
            marks["end"] = time.perf_counter()
            if profile is not None and event.done == event.total:
                profile.disable()
            marks["copy1"], marks["cpu1"] = writers[0].busy_s, time.thread_time()
            marks["flushes1"], marks["written1"] = results[0].flushes, results[0].written

        engine.run_campaign(spec, on_event=on_event, on_start=on_start, pool_config=config)
    finally:
        for obj, name, value in saved:
            setattr(obj, name, value)
    wall = marks["end"] - marks["start"]
    sql = create_engine(f"sqlite:///{db}")
    with sql.connect() as conn:
        n, busy = conn.execute(text("select count(*), sum(wall_s) from wf_evaluations")).one()
        told = conn.execute(text("select count(*) from trials where state = 'COMPLETE'")).scalar()
    sql.dispose()
    assert told == n + stored, f"{told} trials COMPLETE in the database, expected {n + stored}"
    return {
        "workers": workers,
        "stored": stored,
        "evaluations": n,
        "wall_s": wall,
        "busy_pct": 100 * busy / (workers * wall),
        "overhead_ms": 1000 * (wall - marks["waiting"]) / n,
        "throughput": n / wall,
        "copy_ms": 1000 * (marks["copy1"] - marks["copy0"]) / n,
        "cpu_ms": 1000 * (marks["cpu1"] - marks["cpu0"]) / n,
        "batch": (marks["written1"] - marks["written0"]) / max(marks["flushes1"] - marks["flushes0"], 1),
        "load": os.getloadavg()[0],
        "commit_p50": 1000 * statistics.median(commits) if commits else 0.0,
        "commit_p90": 1000 * statistics.quantiles(commits, n=10)[-1] if len(commits) > 1 else 0.0,
        **{f"{k}_ms": 1000 * marks[k] / n for k in ("ask", "tell", "store")},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,3,4", help="stand-in GPU counts, comma-separated")
    parser.add_argument("--evals-per-worker", type=int, default=40)
    parser.add_argument("--eval-s", type=float, default=0.5, help="stand-in GPU seconds per evaluation")
    parser.add_argument("--compile-s", type=float, default=0.25, help="stand-in CPU compile seconds per evaluation")
    parser.add_argument(
        "--stored",
        default="1000,5000",
        help="trials already in the study for the curve (1 worker), comma-separated; '' skips it",
    )
    parser.add_argument("--out", type=Path, help="also write the table here")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="instead of the table: cProfile the orchestrator's loop at 1 worker, print the top N "
        "functions by own time",
    )
    args = parser.parse_args(argv)
    import ray

    counts = [int(w) for w in args.workers.split(",")]
    curve = [int(n) for n in args.stored.split(",") if n]
    load = os.getloadavg()[0]
    top = max(counts)
    t0 = time.perf_counter()
    ray.init(
        address="local",
        num_cpus=2 * top,
        resources={RESOURCE: top},
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.WARNING,
    )
    ray_init_s = time.perf_counter() - t0
    rows, stored_rows = [], []
    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        with tempfile.TemporaryDirectory(prefix="wf-pipeline-") as tmp:
            r = run_one(1, args.evals_per_worker, args.eval_s, args.compile_s, Path(tmp), profile=prof)
        ray.shutdown()
        print(
            f"overhead {r['overhead_ms']:.1f} ms/eval, loop CPU {r['cpu_ms']:.1f} ms/eval over {r['evaluations']} "
            f"evaluations (load {r['load']:.1f}); the loop's functions by own time (poll = waiting on the pool):"
        )
        stats = pstats.Stats(prof)
        stats.sort_stats("tottime").print_stats(args.profile)
        print("warpforge's own steps by cumulative time (they include the Ray and SQL calls they make):")
        stats.sort_stats("cumulative").print_stats("warpforge", args.profile)
        return 0
    with tempfile.TemporaryDirectory(prefix="wf-pipeline-") as tmp:
        for w in counts:
            rows.append(run_one(w, w * args.evals_per_worker, args.eval_s, args.compile_s, Path(tmp) / str(w)))
            print(f"  {w} worker(s) done", file=sys.stderr)
        for n in curve:
            stored_rows.append(
                run_one(1, args.evals_per_worker, args.eval_s, args.compile_s, Path(tmp) / f"s{n}", stored=n)
            )
            print(f"  {n} stored trials done", file=sys.stderr)
    ray.shutdown()
    base = rows[0]["throughput"] / rows[0]["workers"]
    head = (
        f"{'workers':>7} {'stored':>6} {'evals':>6} {'wall s':>7} {'GPU busy %':>10} {'overhead ms/eval':>16} "
        f"{'evals/s':>8} {'scaling eff %':>13} | {'of which: ask':>13} {'tell':>5} {'store':>5} ms/eval "
        f"| {'copy ms/eval':>12} {'loop CPU ms/eval':>16} {'evals/commit':>12} {'commit p50/p90 ms':>17} "
        f"{'load':>5}"
    )
    lines = [
        f"pipeline benchmark (benchmarks/pipeline.py): stand-in GPU {args.eval_s} s/eval, CPU compile "
        f"{args.compile_s} s/eval, {args.evals_per_worker} evaluations per worker, random sampler, SQLite",
        f"machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
        f"1-min load average (uptime) {load:.1f} at start, {os.getloadavg()[0]:.1f} at end (other jobs share the "
        f"machine); ray.init {ray_init_s:.1f} s (not counted)",
        "",
        head,
    ]

    def line(r: dict[str, float], eff: float | None) -> str:
        return (
            f"{r['workers']:>7} {r['stored']:>6} {r['evaluations']:>6} {r['wall_s']:>7.1f} {r['busy_pct']:>10.1f} "
            f"{r['overhead_ms']:>16.1f} {r['throughput']:>8.2f} {'' if eff is None else f'{eff:.1f}':>13} | "
            f"{r['ask_ms']:>13.1f} {r['tell_ms']:>5.1f} {r['store_ms']:>5.1f}         | {r['copy_ms']:>12.1f} "
            f"{r['cpu_ms']:>16.1f} {r['batch']:>12.2f} {r['commit_p50']:>8.2f}/{r['commit_p90']:<8.2f} "
            f"{r['load']:>5.1f}"
        )

    effs = []
    for r in rows:
        effs.append(100 * r["throughput"] / (r["workers"] * base))
        lines.append(line(r, effs[-1]))
    if stored_rows:
        lines += ["", "overhead against trials already in the study (1 worker):", head, line(rows[0], None)]
        lines += [line(r, None) for r in stored_rows]
    everything = rows + stored_rows
    busy = min(r["busy_pct"] for r in everything)
    over = max(r["overhead_ms"] for r in everything)
    lines += [
        "",
        f"targets: GPU busy >= 95%: {'met' if busy >= 95 else 'MISSED'} (lowest {busy:.1f}%); "
        f"overhead < 10 ms/eval: {'met' if over < 10 else 'MISSED'} (highest {over:.1f} ms, up to "
        f"{max([0] + curve)} stored trials); scaling to {rows[-1]['workers']} workers: {effs[-1]:.1f}% efficiency",
        "wall s: first proposal to last stored result; GPU busy: stand-in GPU seconds (measured in the actors) / "
        "(workers x wall s);",
        "overhead: the orchestrator's own time per evaluation (wall s minus time blocked waiting on the pool): "
        "ask = Strategy.ask (in-memory study), tell = Strategy.tell, store = queueing the results and their "
        "transaction (db/writer.py: one per poll's completions);",
        "evals/commit: evaluations per result transaction, commit p50/p90: the wall time of one; load: the 1-min "
        "load average (`uptime`) when the row finished;",
        "copy: the background copy of the studies to Optuna's tables (search/engine/mirror.py), done while the "
        "orchestrator waits on the pool (not part of the overhead);",
        "loop CPU: the orchestrator thread's CPU time per evaluation over the same span (waiting included, which costs "
        "little CPU): what the loop costs without other jobs' load.",
    ]
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
