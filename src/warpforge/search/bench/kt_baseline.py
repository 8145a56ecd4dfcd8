"""Kernel Tuner's strategies as baselines beside ours in ``warpforge bench-search --baselines kt``.

Kernel Tuner 1.5 (optional extra: ``pip install 'warpforge[kt]'``) runs in its own simulation mode
(``tune_kernel(..., simulation_mode=True)``) on a Kernel Tuner cache file written from the same
:class:`~warpforge.evaluator.run.recorded_spaces.RecordedSpace` our samplers replay, with each strategy's
default options and ``strategy_options={"max_fevals": budget}``, once per budget. The budget is
accounted as for our samplers: distinct configurations evaluated; a configuration absent from the
file is outside the restrictions and costs nothing; a recorded failure costs one. That holds because

- the restriction passed to Kernel Tuner is "the configuration is in the file", failures included
  (Kernel Tuner's own ``tune_cache`` drops failed entries from the space, which would make them free);
- Kernel Tuner 1.5's simulation runner counts a configuration towards ``max_fevals`` on its first
  visit only (its live sequential runner counts every configuration handed to it, repeats served from
  its cache included), and proposals outside the restrictions never reach the runner.

The fraction of the optimum is computed here, from the distinct configurations in the order Kernel
Tuner evaluated them, with our own lookup of their times, never from Kernel Tuner's result fields.

Seeding: Kernel Tuner's strategies draw from Python's ``random`` and NumPy's global generator (``seed``
reaches only the pymoo strategies); both are seeded with the repeat's seed, and the global states are
restored afterwards. Two strategies also draw a ``scipy.stats.qmc.LatinHypercube`` sample without a
seed (``bayes_opt``'s initial sample; ``Searchspace.get_LHS_sample``, used by ``diff_evo``); during a run
that class is replaced by one that takes its seed from NumPy's (seeded) global generator, so every
strategy here repeats bit for bit for a given seed. Nothing else about the strategies is changed.

Example:
    >>> rec = read_space("../shared/spaces/pnpoly/RTX_3090.json.gz")  # doctest: +SKIP
    >>> run_kt(rec, "genetic_algorithm", seed=0, budget=50).evaluations  # doctest: +SKIP
    50
"""

from __future__ import annotations

import contextlib
import logging
import random
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from warpforge.errors import UsageError
from warpforge.evaluator.run.recorded_spaces import RecordedSpace, RecordTime, write_cache

log = logging.getLogger("warpforge.search")

KT_PREFIX = "kt:"
# Every single-objective strategy of Kernel Tuner 1.5 that runs with its own dependencies, in the
# order of its strategy map. Left out: brute_force (not a search), nsga3 (many-objective),
# skopt (needs scikit-optimize) and pyatf_strategies (needs pyATF), neither a dependency of kernel_tuner.
DEFAULT_KT_STRATEGIES = (
    "random_sample",
    "minimize",
    "basinhopping",
    "diff_evo",
    "genetic_algorithm",
    "greedy_mls",
    "ordered_greedy_mls",
    "greedy_ils",
    "dual_annealing",
    "mls",
    "pso",
    "simulated_annealing",
    "firefly_algorithm",
    "bayes_opt",
    "hybrid_vndx",
    "adaptive_tabu_greywolf",
    "nsga2",
)
# Strategies that end before the budget on their own (iteration limits or convergence; measured on
# pnpoly/RTX_3090 at 100: minimize 8-35 distinct evaluations, simulated_annealing 75, dual_annealing
# 47-79, basinhopping 93): the table's "evals" column shows what they used.
STOPS_EARLY = ("minimize", "basinhopping", "dual_annealing", "simulated_annealing")


def kt_available() -> bool:
    try:
        import kernel_tuner  # noqa: F401
    except ImportError:
        return False
    return True


def expand_baselines(text: str) -> list[str]:
    """``kt`` -> every default strategy; ``kt:genetic_algorithm,kt:bayes_opt`` -> those. Sampler names."""
    names: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part == "kt":
            names += [KT_PREFIX + s for s in DEFAULT_KT_STRATEGIES]
        elif part.startswith(KT_PREFIX) and part[len(KT_PREFIX) :]:
            names.append(part)
        else:
            raise UsageError(f"unknown baseline {part!r}; use 'kt' or 'kt:STRATEGY' (e.g. kt:genetic_algorithm)")
    return list(dict.fromkeys(names))


def check_strategies(names: list[str]) -> None:
    """Raise ValueError (saying what to do) when Kernel Tuner is missing or a strategy is unknown."""
    if not names:
        return
    if not kt_available():
        raise UsageError("--baselines kt needs Kernel Tuner: pip install 'warpforge[kt]' (kernel_tuner>=1.5,<1.6)")
    from kernel_tuner.interface import strategy_map

    for name in names:
        strategy = name[len(KT_PREFIX) :]
        if strategy not in strategy_map:
            raise UsageError(f"unknown Kernel Tuner strategy {strategy!r}; choose from {', '.join(strategy_map)}")


@dataclass(frozen=True)
class KTRun:
    """One Kernel Tuner search with ``max_fevals=budget`` on a recorded space."""

    fraction: float  # optimum / best time among the distinct configurations evaluated (0 if none ok)
    evaluations: int  # distinct configurations evaluated (failures included): our budget accounting
    failed: int  # of those, recorded failures
    revisits: int  # configurations handed to the runner again (served from Kernel Tuner's cache, free)
    best_key: tuple[Any, ...] | None  # the best configuration found (values in the file's order)
    wall_s: float  # the whole tune_kernel call, reading the cache file included
    keys: tuple[tuple[Any, ...], ...] = ()  # the distinct configurations evaluated, in order


_FILES: dict[str, Path] = {}
_TMP: list[tempfile.TemporaryDirectory[str]] = []


def _problem_size(recorded: RecordedSpace) -> Any:
    return recorded.problem_size if recorded.problem_size is not None else [1]


def cache_file(recorded: RecordedSpace) -> Path:
    """A plain-JSON Kernel Tuner cache of ``recorded`` (written once per process; call before forking)."""
    key = recorded.source or recorded.name
    if key not in _FILES:
        if not _TMP:
            _TMP.append(tempfile.TemporaryDirectory(prefix="warpforge-kt-"))
        fail: dict[str, RecordTime] = {"compile": "CompilationFailedConfig", "runtime": "RuntimeFailedConfig"}
        rows: list[tuple[dict[str, Any], RecordTime, list[float]]] = [
            (dict(zip(recorded.params, k)), r.time_ms if r.time_ms is not None else fail[r.status], [])
            for k, r in recorded.records.items()
        ]
        path = Path(_TMP[0].name) / f"{len(_FILES)}.json"  # Kernel Tuner reads '.json', never '.gz'
        _FILES[key] = write_cache(
            path,
            recorded.device_name or "recorded",
            recorded.kernel_name or "kernel",
            _problem_size(recorded),
            recorded.params,
            rows,
        )
    return _FILES[key]


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Seed the global generators Kernel Tuner draws from, and its unseeded Latin hypercubes; undo after."""
    import scipy.stats.qmc as qmc
    from kernel_tuner.strategies import bayes_opt

    base = qmc.LatinHypercube

    class SeededLatinHypercube(base):  # type: ignore[misc, valid-type]
        def __init__(self, d: int, **kwargs: Any) -> None:
            if kwargs.get("rng") is None and kwargs.get("seed") is None:
                kwargs["rng"] = np.random.default_rng(int(np.random.randint(0, 2**31 - 1)))
            super().__init__(d, **kwargs)

    py_state, np_state = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed % 2**32)
    qmc.LatinHypercube = SeededLatinHypercube  # type: ignore[misc]
    bayes_opt.LatinHypercube = SeededLatinHypercube
    try:
        yield
    finally:
        qmc.LatinHypercube = base  # type: ignore[misc]
        bayes_opt.LatinHypercube = base
        random.setstate(py_state)
        np.random.set_state(np_state)


def run_kt(recorded: RecordedSpace, strategy: str, seed: int, budget: int) -> KTRun:
    """Run one Kernel Tuner strategy (default options) for ``budget`` distinct evaluations."""
    from kernel_tuner import tune_kernel
    from kernel_tuner.util import FunctionConstraint

    path = cache_file(recorded)
    keys = set(recorded.records)

    def in_file(*values: Any) -> bool:  # the space is the file's configurations, failures included
        return values in keys

    t0 = time.perf_counter()
    with _seeded(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, _ = tune_kernel(
            recorded.kernel_name or "kernel",
            "",
            _problem_size(recorded),
            [],
            dict(recorded.params),
            restrictions=[FunctionConstraint(in_file)],
            cache=str(path),
            simulation_mode=True,
            strategy=strategy,
            strategy_options={"max_fevals": budget},
            quiet=True,
            seed=seed,
        )
    wall = time.perf_counter() - t0
    seen: dict[tuple[Any, ...], None] = {}
    for r in results:
        seen.setdefault(tuple(r[p] for p in recorded.params), None)
    order = list(seen)[:budget]
    best, best_key, failed = np.inf, None, 0
    for k in order:
        rec = recorded.records.get(k)
        if rec is None or rec.time_ms is None:  # never None for in-file keys; a failure costs one
            failed += 1
        elif rec.time_ms < best:
            best, best_key = rec.time_ms, k
    fraction = recorded.optimum / best if best < np.inf else 0.0
    return KTRun(float(fraction), len(order), failed, len(results) - len(seen), best_key, wall, tuple(order))
