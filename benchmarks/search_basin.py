"""When do searches reach the basin that holds the optimum, and what do they do there?

    python benchmarks/search_basin.py convolution_milo/A100 \\
        --basin tile_size_x=1,tile_size_y=3,read_only=1,use_padding=0,use_shmem=1 \\
        --samplers wf-gp-tpe,wf-default --repeats 60 --seed 13000

A *basin* is the set of configurations matching some parameter values (on A100 above: 60 of 4,362
configurations, the optimum among them). Per sampler this prints the mean fraction of the optimum
at the last budget, the share of runs that had measured a basin configuration by each budget
beside the same share for uniform sampling without replacement (exact), the share of runs that
found the optimum, and the mean number of basin configurations measured. A search that reaches
the basin no sooner than uniform draws gains only in what it does there (docs/search.md, session 5).
Runs use :func:`search_screen.trajectory`, so the policies, seeds and random streams are the screen's.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
from math import comb

import numpy as np
from search_screen import SPACES, _load, trajectory


def basin_mask(space_params: dict[str, list], feasible: list[tuple], spec: str) -> np.ndarray:
    """Bool per feasible row: matches every ``name=value`` in the comma-separated ``spec``."""
    names = list(space_params)
    want: dict[int, object] = {}
    for item in filter(None, spec.split(",")):
        name, _, value = item.partition("=")
        if name not in space_params:
            raise SystemExit(f"unknown parameter {name!r}; the space has {', '.join(names)}")
        typed = [v for v in space_params[name] if str(v) == value]
        if not typed:
            raise SystemExit(f"{name} has no value {value!r}; it takes {space_params[name]}")
        want[names.index(name)] = typed[0]
    return np.array([all(row[j] == v for j, v in want.items()) for row in feasible])


def uniform_share(n_rows: int, n_basin: int, budget: int) -> float:
    """P(at least one of ``budget`` uniform draws without replacement lies in the basin)."""
    return 1.0 - comb(n_rows - n_basin, budget) / comb(n_rows, budget)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("space", help="e.g. convolution_milo/A100")
    ap.add_argument("--basin", required=True, help="comma-separated name=value pairs")
    ap.add_argument("--samplers", default="wf-default")
    ap.add_argument("--budgets", default="25,50,75,100")
    ap.add_argument("--repeats", type=int, default=60)
    ap.add_argument("--seed", type=int, default=13000)
    args = ap.parse_args()
    if not SPACES.is_dir():
        print(f"no recorded spaces at {SPACES}: nothing measured")
        return
    space, times = _load(args.space)
    inside = basin_mask(space.params, space.feasible, args.basin)
    optimum_row = int(np.nanargmin(times))
    budgets = [int(b) for b in args.budgets.split(",")]
    samplers = args.samplers.split(",")
    tasks = [(args.space, s, args.seed + r, max(budgets)) for s in samplers for r in range(args.repeats)]
    with multiprocessing.get_context("fork").Pool() as pool:
        results = pool.map(trajectory, tasks, chunksize=2)
    print(
        f"{args.space}: basin {args.basin} holds {inside.sum()} of {len(space)} configurations "
        f"({'with' if inside[optimum_row] else 'without'} the optimum); {args.repeats} repeats, "
        f"seeds {args.seed}-{args.seed + args.repeats - 1}"
    )
    print(
        f"{'uniform (exact)':16s} in basin by {'/'.join(map(str, budgets))}: "
        + " ".join(f"{uniform_share(len(space), int(inside.sum()), b):.2f}" for b in budgets)
    )
    for s in samplers:
        runs = [res for (_, name, _, _), res in zip(tasks, results) if name == s]
        final = np.array([curve[-1] for _, curve in runs])
        first = np.array([next((i + 1 for i, r in enumerate(rows) if inside[r]), math.inf) for rows, _ in runs])
        print(
            f"{s:16s} in basin by {'/'.join(map(str, budgets))}: "
            + " ".join(f"{np.mean(first <= b):.2f}" for b in budgets)
            + f" | fraction at {budgets[-1]} {final.mean():.3f} ± {final.std(ddof=1) / math.sqrt(len(final)):.3f}"
            + f" | optimum found {np.mean([optimum_row in rows for rows, _ in runs]):.2f}"
            + f" | basin evaluations {np.mean([inside[rows].sum() for rows, _ in runs]):.1f}"
        )


if __name__ == "__main__":
    main()
