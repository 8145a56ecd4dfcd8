"""The benchmark behind ``warpforge bench-search`` (cli/bench.py): search efficiency of the samplers on
recorded (brute-forced) spaces.

Each repeat drives a fresh in-memory study through :class:`~warpforge.search.samplers.strategy.Strategy`
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

import hashlib
import math
import multiprocessing
import os
import time
import warnings
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from warpforge.errors import UsageError
from warpforge.evaluator.run.recorded_spaces import RecordedSpace, read_space
from warpforge.search.samplers.registry import SAMPLERS
from warpforge.search.samplers.space import SearchSpace
from warpforge.search.samplers.strategy import Strategy, make_study

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
    # How many repeats ended on the same configuration (the largest such group, the best found within
    # this budget) and that configuration's fraction of the optimum: repeats/repeats below 1.0 is a trap.
    collapse: int = 0
    collapse_fraction: float | None = None
    evaluations: float = 0.0  # mean distinct evaluations used (below the budget: the search stopped early)
    digest: str = ""  # of the space's records: two files holding the same space (A100 and A100_T4) share it


@dataclass
class RunResult:
    fractions: list[float]  # per budget
    wall_s: float
    infeasible: int
    duplicate: int
    failed: int
    best_keys: list[tuple[Any, ...] | None] = field(default_factory=list)  # per budget
    evaluations: list[int] = field(default_factory=list)  # per budget


def random_expectation(recorded: RecordedSpace, k: int) -> float:
    """Exact E[optimum / best of k configurations drawn uniformly without replacement] (failures count 0).

    With the N configurations sorted fastest first (failures last), the best draw is the i-th with
    probability C(N-i, k-1) / C(N, k); the ratio of consecutive terms is (N-i-k+1)/(N-i), so the
    sum is accumulated without big binomials.

    Example:
        >>> from warpforge.evaluator.run.recorded_spaces import RecordedTime
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


def run_once(recorded: RecordedSpace, space: SearchSpace, sampler: str, seed: int, budgets: list[int]) -> RunResult:
    """One search of ``max(budgets)`` distinct evaluations on a recorded space."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = make_study(f"bench-{sampler}-{seed}", None, sampler, seed)
    strategy = Strategy(space, study, sampler, seed)
    best = math.inf
    best_key: tuple[Any, ...] | None = None
    keys: list[tuple[Any, ...] | None] = []
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
            if rec.time_ms < best:
                best, best_key = rec.time_ms, recorded.key(proposal.params)
            strategy.tell(proposal, rec.time_ms)
        wall += time.perf_counter() - t0
        curve.append(recorded.optimum / best if best < math.inf else 0.0)
        keys.append(best_key)
    fractions = [curve[min(b, len(curve)) - 1] if curve else 0.0 for b in budgets]
    fs = strategy.sampler
    return RunResult(
        fractions,
        wall,
        fs.n_infeasible,
        fs.n_duplicate,
        failed,
        [keys[min(b, len(keys)) - 1] if keys else None for b in budgets],
        [min(b, len(curve)) for b in budgets],
    )


def run_kt_once(recorded: RecordedSpace, name: str, seed: int, budgets: list[int]) -> RunResult:
    """Kernel Tuner's strategy ``kt:NAME``, one run per budget (some of its strategies plan on max_fevals)."""
    from warpforge.search.bench.kt_baseline import KT_PREFIX, run_kt

    runs = [run_kt(recorded, name[len(KT_PREFIX) :], seed, b) for b in budgets]
    last = runs[budgets.index(max(budgets))]
    return RunResult(
        [r.fraction for r in runs],
        last.wall_s,
        0,
        last.revisits,
        last.failed,
        [r.best_key for r in runs],
        [r.evaluations for r in runs],
    )


def collapse(recorded: RecordedSpace, keys: list[tuple[Any, ...] | None]) -> tuple[int, float | None]:
    """The largest number of repeats that ended on one configuration, and its fraction of the optimum.

    Example:
        >>> from warpforge.evaluator.run.recorded_spaces import RecordedTime
        >>> s = RecordedSpace("", "", None, {"x": [1, 2]}, {(1,): RecordedTime("ok", 1.0),
        ...                   (2,): RecordedTime("ok", 2.0)})
        >>> collapse(s, [(2,), (1,), (2,), None])
        (2, 0.5)
    """
    counts = Counter(k for k in keys if k is not None)
    if not counts:
        return 0, None
    key, n = max(counts.items(), key=lambda kv: (kv[1], -recorded.records[kv[0]].time_ms))  # type: ignore[operator]
    t = recorded.records[key].time_ms
    return n, (recorded.optimum / t if t else None)


_CACHE: dict[str, tuple[RecordedSpace, SearchSpace]] = {}


def _load(path: str) -> tuple[RecordedSpace, SearchSpace]:
    if path not in _CACHE:
        rec = read_space(path)
        _CACHE[path] = (rec, SearchSpace.from_recorded(rec))
    return _CACHE[path]


def _task(args: tuple[str, str, int, list[int]]) -> RunResult:
    path, sampler, seed, budgets = args
    rec, space = _load(path)
    if sampler.startswith("kt:"):
        return run_kt_once(rec, sampler, seed, budgets)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return run_once(rec, space, sampler, seed, budgets)


def bench(
    files: list[str | Path],
    samplers: list[str],
    budgets: list[int],
    repeats: int = 10,
    seed: int = 0,
    jobs: int | None = None,
) -> list[BenchRecord]:
    """Run every sampler ``repeats`` times on every file; one :class:`BenchRecord` per budget.

    Repeat ``r`` uses seed ``seed + r`` for every sampler (common random numbers).
    """
    from warpforge.search.bench.kt_baseline import KT_PREFIX, cache_file, check_strategies

    unknown = [s for s in samplers if s not in SAMPLERS and not s.startswith(KT_PREFIX)]
    if unknown:
        raise UsageError(f"unknown sampler {unknown[0]!r}; choose from {', '.join(sorted(SAMPLERS))}")
    kt = [s for s in samplers if s.startswith(KT_PREFIX)]
    check_strategies(kt)
    paths = [str(f) for f in files]
    for p in paths:  # validate (and cache, for forked workers) before starting any work
        _load(p)
        if kt:
            cache_file(_load(p)[0])
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
        digest = space_digest(rec)
        for s in samplers:
            runs = [next(it) for _ in range(repeats)]
            fr = np.array([r.fractions for r in runs])  # (repeats, budgets)
            for j, b in enumerate(budgets):
                se = float(fr[:, j].std(ddof=1) / math.sqrt(repeats)) if repeats > 1 else 0.0
                same, same_fraction = collapse(rec, [r.best_keys[j] for r in runs])
                out.append(
                    BenchRecord(
                        rec.name,
                        s,
                        b,
                        float(fr[:, j].mean()),
                        se,
                        random_expectation(rec, b),
                        repeats,
                        float(np.mean([r.wall_s for r in runs])),
                        float(np.mean([r.infeasible for r in runs])),
                        float(np.mean([r.duplicate for r in runs])),
                        float(np.mean([r.failed for r in runs])),
                        len(rec),
                        rec.optimum,
                        same,
                        same_fraction,
                        float(np.mean([r.evaluations[j] for r in runs])),
                        digest,
                    )
                )
    return out


def space_digest(recorded: RecordedSpace) -> str:
    """A short digest of the parameters and every record, independent of the file's name and format."""
    h = hashlib.sha256(repr(sorted(recorded.params.items())).encode())
    for key in sorted(recorded.records, key=repr):
        h.update(repr((key, recorded.records[key].status, recorded.records[key].time_ms)).encode())
    return h.hexdigest()[:16]


def render_table(records: list[BenchRecord], width: int = 80) -> Any:
    """Rich output: per space, the exact uniform-random row, then one row per sampler (mean ± stderr).

    At 120 columns or more, one table with one fact per column. Below, two tables, so four budgets fit 80
    columns instead of Rich squeezing 11 columns to 1-4 characters each (term_tables.py): the fractions (each
    cell a mean over its ± stderr; the space a row of its own above its random baseline and samplers) and
    the costs (s/run, wasted, evals, same end), each of those a column of its own; long names fold.
    """
    from rich.console import Group
    from rich.markup import escape
    from rich.table import Table

    budgets = sorted({r.budget for r in records})
    repeats = max((r.repeats for r in records), default=0)
    wide = width >= 120
    fractions = Table(title=f"fraction of the optimum reached within each budget ({repeats} repeats)")
    costs = Table(title=f"cost of each search at the largest budget ({budgets[-1] if budgets else '-'})")
    if wide:
        fractions.add_column("space", no_wrap=True)
        fractions.add_column("sampler", no_wrap=True)
    else:  # the space heads its own rows: one name column, folded only past its width
        for table in (fractions, costs):
            table.add_column("space\n sampler", overflow="fold")
    for b in budgets:
        fractions.add_column(f"{b}", justify="right", no_wrap=True)
    cost_table = fractions if wide else costs
    cost_table.add_column("s/run", justify="right")
    cost_table.add_column("wasted", justify="right")
    cost_table.add_column("evals", justify="right")  # distinct evaluations used at the largest budget
    cost_table.add_column(
        f"same end ({budgets[-1]})" if wide and budgets else "same end", justify="right", no_wrap=wide
    )
    tail = 4 if wide else 0
    by_space: dict[str, dict[str, dict[int, BenchRecord]]] = {}
    for r in records:
        by_space.setdefault(r.space, {}).setdefault(r.sampler, {})[r.budget] = r
    for space, samplers in by_space.items():
        first = next(iter(samplers.values()))
        name = escape(space)  # a space is named by its file: the user's text, never Rich markup
        randoms = [f"[dim]{first[b].random:.3f}[/dim]" if b in first else "" for b in budgets]
        if wide:
            fractions.add_row(name, "[dim]random (exact)[/dim]", *randoms, *[""] * tail)
        else:
            fractions.add_row(f"[bold]{name}[/bold]", *[""] * len(budgets))
            fractions.add_row(" [dim]random (exact)[/dim]", *randoms)
            costs.add_row(f"[bold]{name}[/bold]", *[""] * 4)
        for sampler, rows in samplers.items():
            any_rec = next(iter(rows.values()))
            pm = " ± " if wide else "\n±"
            cells = [f"{rows[b].mean:.3f}{pm}{rows[b].stderr:.3f}" if b in rows else "" for b in budgets]
            wasted = any_rec.wasted_infeasible + any_rec.wasted_duplicate
            last = rows.get(budgets[-1], any_rec)
            same = f"{last.collapse}/{last.repeats}"
            if last.collapse_fraction is not None:
                same += f" @{last.collapse_fraction:.3f}"
            facts = [f"{any_rec.wall_s:.2f}", f"{wasted:.1f}", f"{last.evaluations:.1f}", same]
            if wide:
                fractions.add_row("", escape(sampler), *cells, *facts)
            else:
                fractions.add_row(f" {escape(sampler)}", *cells)
                costs.add_row(f" {escape(sampler)}", *facts)
        fractions.add_section()
        costs.add_section()
    return fractions if wide else Group(fractions, costs)


def table_notes(records: list[BenchRecord]) -> list[str]:
    """What the table's columns mean where Kernel Tuner rows differ (printed under the table)."""
    from warpforge.search.bench.kt_baseline import KT_PREFIX, STOPS_EARLY

    notes = [
        "same end: the largest number of repeats whose best configuration at the largest budget was the "
        "same one, @ its fraction of the optimum (all repeats below 1.000: every run ends in one trap)."
    ]
    kt = sorted({r.sampler for r in records if r.sampler.startswith(KT_PREFIX)})
    if kt:
        notes += [
            "kt:* rows: Kernel Tuner 1.5, simulation mode on the same records, default options, max_fevals = "
            "each budget (one run per budget); budget = distinct evaluations, failures cost one, "
            "configurations outside the file are free (docs/search.md).",
            "kt:* rows, s/run: the whole tune_kernel call at the largest budget, reading the cache file included; "
            "wasted: configurations proposed again (free in simulation mode); proposals outside the "
            "restrictions are not counted.",
            "kt:* seeding: random and numpy.random seeded per repeat, unseeded scipy LatinHypercube draws "
            "(bayes_opt, diff_evo) seeded from numpy.random; deterministic for a given seed.",
        ]
        early = [s for s in kt if s[len(KT_PREFIX) :] in STOPS_EARLY]
        if early:
            notes.append(f"{', '.join(early)}: may stop before the budget on their own (evals column).")
    return notes
