"""Screen search policies quickly: registry policies driven directly on recorded spaces, no Optuna study.

    python benchmarks/search_screen.py --samplers wf-default,wf-tpe --repeats 40 --seed 1000
    python benchmarks/search_screen.py --samplers wf-gp --spaces convolution_milo/A100 --repeats 100

``warpforge bench-search`` runs each policy through :class:`~warpforge.search.samplers.strategy.Strategy` and
an in-memory Optuna study, exactly as a campaign does; that costs ~5 ms of storage per step. This
script calls the same policies with a hand-built :class:`~warpforge.search.samplers.policy.Context`, so a
screen of several candidates over 7 spaces with 40+ repeats fits in minutes on 2 cores. The
fractions are the same statistic (optimum time / best time within the budget); only the random
stream differs from bench-search's. Design choices were screened on seeds 1000+ and confirmed on
another seed range; bench-search's default seeds 0-29 were never used for screening.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import time
import warnings
from pathlib import Path

import numpy as np

from warpforge.evaluator.run.recorded_spaces import read_space
from warpforge.search.samplers.policy import Context, UniformArm
from warpforge.search.samplers.registry import make_policy
from warpforge.search.samplers.space import SearchSpace

SPACES = Path(__file__).resolve().parents[2] / "shared" / "spaces"
_LOADED: dict[str, tuple[SearchSpace, np.ndarray]] = {}


def _load(name: str) -> tuple[SearchSpace, np.ndarray]:
    if name not in _LOADED:
        rec = read_space(SPACES / f"{name}.json.gz")
        space = SearchSpace.from_recorded(rec)
        times = np.array([np.nan if rec.records[c].time_ms is None else rec.records[c].time_ms for c in space.feasible])
        _LOADED[name] = (space, times)
    return _LOADED[name]


def run(args: tuple[str, str, int, int]) -> list[float]:
    """Fraction of the optimum reached after each evaluation of one search."""
    return trajectory(args)[1]


def trajectory(args: tuple[str, str, int, int]) -> tuple[list[int], list[float]]:
    """One search: the feasible rows it measured, in order, and the fraction reached after each."""
    name, sampler, seed, budget = args
    warnings.simplefilter("ignore")
    space, times = _load(name)
    optimum = float(np.nanmin(times))
    policy, uniform = make_policy(sampler, seed), UniformArm()
    rng = np.random.default_rng(seed)
    seen = np.zeros(len(space), dtype=bool)
    rows: list[int] = []
    values: list[float | None] = []
    failed: list[bool] = []
    arms: list[str] = []
    best, curve = math.inf, []
    for _ in range(min(budget, len(space))):
        ctx = Context(space, None, None, seen, rows, values, failed, arms, rng)  # type: ignore[arg-type]
        pick = policy.propose(ctx) or uniform.propose(ctx)
        assert pick is not None and not seen[pick.row]
        seen[pick.row] = True
        t = times[pick.row]
        rows.append(pick.row)
        arms.append(pick.arm)
        values.append(None if np.isnan(t) else float(t))
        failed.append(bool(np.isnan(t)))
        best = best if np.isnan(t) else min(best, float(t))
        curve.append(optimum / best if best < math.inf else 0.0)
    return rows, curve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samplers", default="wf-default,wf-tpe")
    ap.add_argument("--spaces", default="", help="comma-separated, e.g. gemm/RTX_3090 (default: all but A100_T4)")
    ap.add_argument("--budgets", default="50,100")
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1000)
    args = ap.parse_args()
    if not SPACES.is_dir():
        print(f"no recorded spaces at {SPACES}: nothing screened")
        return
    names = [s for s in args.spaces.split(",") if s] or sorted(
        str(p.relative_to(SPACES))[: -len(".json.gz")]
        for p in SPACES.glob("*/*.json.gz")
        if not p.name.endswith("_T4.json.gz")
    )  # A100_T4 holds the A100 rows again
    samplers = args.samplers.split(",")
    budgets = [int(b) for b in args.budgets.split(",")]
    for n in names:
        _load(n)  # parsed once, shared with the forked workers
    tasks = [(n, s, args.seed + r, max(budgets)) for n in names for s in samplers for r in range(args.repeats)]
    t0 = time.time()
    with multiprocessing.get_context("fork").Pool() as pool:
        results = pool.map(run, tasks, chunksize=4)
    by_key: dict[tuple[str, str], list[list[float]]] = {}
    for (n, s, _, _), curve in zip(tasks, results):
        by_key.setdefault((n, s), []).append(curve)
    print(
        f"{args.repeats} repeats, seeds {args.seed}-{args.seed + args.repeats - 1}, "
        f"{time.time() - t0:.0f} s; mean ± standard error at budgets {budgets}"
    )
    for s in samplers:
        cells, means = [], {b: [] for b in budgets}  # type: ignore[var-annotated]
        for n in names:
            c = np.array(by_key[(n, s)])
            at = {b: c[:, min(b, c.shape[1]) - 1] for b in budgets}
            for b in budgets:
                means[b].append(at[b].mean())
            last = at[budgets[-1]]
            cells.append(
                f"{n}: "
                + "/".join(f"{at[b].mean():.3f}" for b in budgets)
                + f"±{last.std(ddof=1) / math.sqrt(len(last)):.3f}"
            )
        print(f"{s:14s} mean " + "/".join(f"{np.mean(means[b]):.3f}" for b in budgets) + " | " + "  ".join(cells))


if __name__ == "__main__":
    main()
