"""``warpforge bench-search``: search efficiency of the samplers on recorded (brute-forced) spaces.

Each repeat drives a fresh in-memory study through :class:`~warpforge.search.strategy.Strategy`
(the code the campaign engine runs) and replays the recorded times. Reported per (space, sampler,
budget): the mean and standard error over repeats of the fraction of the optimum reached
(optimum time / best time found within ``budget`` distinct evaluations, 0 when none succeeded),
beside the exact expectation for uniform random sampling without replacement.

Example:
    >>> recs = bench(["../shared/spaces/pnpoly/RTX_3090.json.gz"], ["random"], [20], repeats=2)  # doctest: +SKIP
    >>> recs[0].space, recs[0].budget, round(recs[0].random, 3)  # doctest: +SKIP
    ('pnpoly/RTX_3090', 20, 0.855)
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import typer

from warpforge.errors import UsageError
from warpforge.evaluator.kt_cache import CacheFormatError, RecordedSpace, read_space
from warpforge.search.samplers import DEFAULT_SAMPLER, SAMPLERS
from warpforge.search.space import SearchSpace
from warpforge.search.strategy import Strategy, make_study

DEFAULT_BUDGETS = (20, 50, 100, 200)


@dataclass
class BenchRecord:
    """One (space, sampler, budget) row of the report."""

    space: str
    sampler: str
    budget: int
    mean: float
    stderr: float
    random: float  # exact expectation of uniform random sampling without replacement
    repeats: int
    wall_s: float  # mean seconds per repeat spent in ask()+tell() (the sampler's own time)
    wasted_infeasible: float  # mean raw proposals per repeat that were infeasible (repaired)
    wasted_duplicate: float  # mean raw proposals per repeat that repeated a told configuration
    failed_evals: float  # mean evaluations per repeat that hit a recorded failure
    n_configs: int
    optimum_ms: float


@dataclass
class RunResult:
    fractions: list[float]  # per budget
    wall_s: float
    infeasible: int
    duplicate: int
    failed: int


def random_expectation(recorded: RecordedSpace, k: int) -> float:
    """Exact E[optimum / best of k configurations drawn uniformly without replacement] (failures count 0).

    With the N configurations sorted fastest first (failures last), the best draw is the i-th with
    probability C(N-i, k-1) / C(N, k); the ratio of consecutive terms is (N-i-k+1)/(N-i), so the
    sum is accumulated without big binomials.

    Example:
        >>> from warpforge.evaluator.kt_cache import RecordedTime
        >>> s = RecordedSpace("", "", None, {"x": [1, 2]}, {(1,): RecordedTime("ok", 1.0),
        ...                   (2,): RecordedTime("ok", 2.0)})
        >>> random_expectation(s, 1)
        0.75
    """
    times = sorted(r.time_ms for r in recorded.records.values() if r.time_ms is not None)
    n = len(recorded.records)
    if not times or k <= 0:
        return 0.0
    k = min(k, n)
    best = times[0]
    p = k / n  # probability the fastest configuration is among the k
    total = 0.0
    for i, t in enumerate(times, start=1):
        total += p * best / t
        if n - i <= 0:
            break
        p *= (n - i - k + 1) / (n - i)
        if p <= 0:
            break
    return total


def run_once(recorded: RecordedSpace, space: SearchSpace, sampler: str, seed: int,
             budgets: list[int]) -> RunResult:
    """One search of ``max(budgets)`` distinct evaluations on a recorded space."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = make_study(f"bench-{sampler}-{seed}", None, sampler, seed)
    strategy = Strategy(space, study, sampler, seed)
    best = math.inf
    curve: list[float] = []
    wall = 0.0
    failed = 0
    for _ in range(max(budgets)):
        t0 = time.perf_counter()
        proposal = strategy.ask()
        wall += time.perf_counter() - t0
        if proposal is None:
            break
        rec = recorded.lookup(proposal.params)
        t0 = time.perf_counter()
        if rec is None or rec.time_ms is None:  # Strategy never proposes absent configs
            failed += 1
            strategy.tell(proposal, None, failed=True)
        else:
            best = min(best, rec.time_ms)
            strategy.tell(proposal, rec.time_ms)
        wall += time.perf_counter() - t0
        curve.append(recorded.optimum / best if best < math.inf else 0.0)
    fractions = [curve[min(b, len(curve)) - 1] if curve else 0.0 for b in budgets]
    fs = strategy.sampler
    return RunResult(fractions, wall, fs.n_infeasible, fs.n_duplicate, failed)


_CACHE: dict[str, tuple[RecordedSpace, SearchSpace]] = {}


def _load(path: str) -> tuple[RecordedSpace, SearchSpace]:
    if path not in _CACHE:
        rec = read_space(path)
        _CACHE[path] = (rec, SearchSpace.from_recorded(rec))
    return _CACHE[path]


def _task(args: tuple[str, str, int, list[int]]) -> RunResult:
    path, sampler, seed, budgets = args
    rec, space = _load(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return run_once(rec, space, sampler, seed, budgets)


def bench(files: list[str | Path], samplers: list[str], budgets: list[int], repeats: int = 10,
          seed: int = 0, jobs: int | None = None) -> list[BenchRecord]:
    """Run every sampler ``repeats`` times on every file; one :class:`BenchRecord` per budget.

    Repeat ``r`` uses seed ``seed + r`` for every sampler (common random numbers).
    """
    unknown = [s for s in samplers if s not in SAMPLERS]
    if unknown:
        raise UsageError(f"unknown sampler {unknown[0]!r}; choose from {', '.join(sorted(SAMPLERS))}")
    paths = [str(f) for f in files]
    for p in paths:  # validate (and cache, for forked workers) before starting any work
        _load(p)
    tasks = [(p, s, seed + r, budgets) for p in paths for s in samplers for r in range(repeats)]
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(tasks)))
    if jobs == 1:
        results = [_task(t) for t in tasks]
    else:
        # fork shares the parsed files with the workers (gemm's 18k records take ~0.5 s to parse).
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context(method)) as pool:
            results = list(pool.map(_task, tasks, chunksize=max(1, repeats // 2)))
    out: list[BenchRecord] = []
    it = iter(results)
    for p in paths:
        rec, _ = _load(p)
        for s in samplers:
            runs = [next(it) for _ in range(repeats)]
            fr = np.array([r.fractions for r in runs])  # (repeats, budgets)
            for j, b in enumerate(budgets):
                se = float(fr[:, j].std(ddof=1) / math.sqrt(repeats)) if repeats > 1 else 0.0
                out.append(BenchRecord(
                    rec.name, s, b, float(fr[:, j].mean()), se, random_expectation(rec, b), repeats,
                    float(np.mean([r.wall_s for r in runs])), float(np.mean([r.infeasible for r in runs])),
                    float(np.mean([r.duplicate for r in runs])), float(np.mean([r.failed for r in runs])),
                    len(rec), rec.optimum))
    return out


def render_table(records: list[BenchRecord]) -> Any:
    """A Rich table: per space, the exact uniform-random row, then one row per sampler (mean ± stderr)."""
    from rich.table import Table

    budgets = sorted({r.budget for r in records})
    repeats = max((r.repeats for r in records), default=0)
    table = Table(title=f"fraction of the optimum reached within each budget ({repeats} repeats)")
    table.add_column("space", no_wrap=True)
    table.add_column("sampler", no_wrap=True)
    for b in budgets:
        table.add_column(f"{b}", justify="right", no_wrap=True)
    table.add_column("s/run", justify="right")
    table.add_column("wasted", justify="right")
    by_space: dict[str, dict[str, dict[int, BenchRecord]]] = {}
    for r in records:
        by_space.setdefault(r.space, {}).setdefault(r.sampler, {})[r.budget] = r
    for space, samplers in by_space.items():
        first = next(iter(samplers.values()))
        table.add_row(space, "[dim]random (exact)[/dim]",
                      *[f"[dim]{first[b].random:.3f}[/dim]" if b in first else "" for b in budgets], "", "")
        for sampler, rows in samplers.items():
            any_rec = next(iter(rows.values()))
            cells = [f"{rows[b].mean:.3f} ± {rows[b].stderr:.3f}" if b in rows else "" for b in budgets]
            wasted = any_rec.wasted_infeasible + any_rec.wasted_duplicate
            table.add_row("", sampler, *cells, f"{any_rec.wall_s:.2f}", f"{wasted:.1f}")
    return table


def _parse_ints(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v <= 0 for v in values):
        raise UsageError(f"{what} must be positive integers separated by commas, got {text!r}")
    return values


def bench_search(
    space_files: list[Path] = typer.Argument(..., help="Kernel Tuner cache (.json/.json.gz) or T4 files."),
    samplers: str = typer.Option(f"random,tpe,{DEFAULT_SAMPLER}", help="Comma-separated registry names."),
    budgets: str = typer.Option(",".join(map(str, DEFAULT_BUDGETS)), help="Evaluation budgets, comma-separated."),
    repeats: int = typer.Option(10, min=1, help="Independent searches per (space, sampler)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON records instead of a table."),
    seed: int = typer.Option(0, help="Seed of the first repeat (repeat r uses seed + r)."),
    jobs: int = typer.Option(0, help="Worker processes (0: one per CPU core)."),
) -> None:
    """Measure how fast each sampler approaches the optimum of recorded tuning spaces."""
    try:
        names = [s.strip() for s in samplers.split(",") if s.strip()]
        if not names:
            raise UsageError("--samplers is empty")
        budget_list = _parse_ints(budgets, "--budgets")
        for f in space_files:
            if not Path(f).is_file():
                raise UsageError(f"{f}: no such file (pass Kernel Tuner cache or T4 files)")
        records = bench(list(space_files), names, budget_list, repeats, seed, jobs or None)
    except (UsageError, CacheFormatError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    if json_out:
        typer.echo(json.dumps([asdict(r) for r in records], indent=1))
    else:
        from rich.console import Console

        console = Console()
        if not console.is_terminal:  # piped: Rich would wrap at 80 columns
            console = Console(width=160)
        console.print(render_table(records))
