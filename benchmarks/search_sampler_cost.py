"""The sampler's own cost: CPU seconds per proposal at 50, 100 and 200 evaluations on a recorded space.

Drives the same :class:`~warpforge.search.samplers.strategy.Strategy` as bench-search (one process, one repeat at
a time) and times each ask() + tell() with ``time.process_time`` (CPU time of the whole process, all
threads), so a loaded machine does not inflate the numbers the way wall time would. Reported per
sampler: the mean CPU seconds of the proposals numbered ``n-4 .. n`` (a 5-proposal window around each
checkpoint), averaged over repeats, and the cumulative CPU seconds up to ``n``.

Default: the largest shared space (by configurations in the file), wf-default, 3 repeats, seed 30000:

    python benchmarks/search_sampler_cost.py
    python benchmarks/search_sampler_cost.py ../shared/spaces/gemm/RTX_3090.json.gz --samplers wf-default,tpe
"""

from __future__ import annotations

import argparse
import glob
import time
import warnings
from pathlib import Path

import numpy as np
import optuna

from warpforge.evaluator.run.recorded_spaces import read_space
from warpforge.search.samplers.registry import DEFAULT_SAMPLER
from warpforge.search.samplers.space import SearchSpace
from warpforge.search.samplers.strategy import Strategy, make_study

SPACES = Path(__file__).resolve().parents[1].parent / "shared" / "spaces"
CHECKPOINTS = (50, 100, 200)


def cpu_per_step(path: str, sampler: str, seed: int, steps: int) -> list[float]:
    """CPU seconds of ask() + tell() for each of ``steps`` evaluations of one search."""
    rec = read_space(path)
    space = SearchSpace.from_recorded(rec)
    study = make_study(f"cost-{sampler}-{seed}", None, sampler, seed)
    strategy = Strategy(space, study, sampler, seed)
    out: list[float] = []
    for _ in range(steps):
        t0 = time.process_time()
        proposal = strategy.ask()
        if proposal is None:
            break
        r = rec.lookup(proposal.params)
        if r is None or r.time_ms is None:
            strategy.tell(proposal, None, failed=True)
        else:
            strategy.tell(proposal, r.time_ms)
        out.append(time.process_time() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="spaces (default: the largest file under ../shared/spaces)")
    ap.add_argument("--samplers", default=DEFAULT_SAMPLER)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=30000)
    args = ap.parse_args()
    if not args.files and not SPACES.is_dir():
        print(f"no recorded spaces at {SPACES}: pass a space file")
        return
    # The largest space; gemm/RTX_2080_Ti and gemm/RTX_3090 tie at 17,956 configurations: the name decides,
    # so the default does not depend on the file system's listing order.
    files = args.files or [min(glob.glob(str(SPACES / "*" / "*.json.gz")), key=lambda p: (-len(read_space(p)), p))]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    steps = max(CHECKPOINTS)
    print(
        f"CPU seconds per proposal (ask + tell), mean of proposals n-4..n over {args.repeats} repeats "
        f"(seeds {args.seed}-{args.seed + args.repeats - 1}); cumulative CPU seconds in brackets"
    )
    print("| space | configs | sampler | " + " | ".join(f"at {n}" for n in CHECKPOINTS) + " |")
    print("|---|---|---|" + "---|" * len(CHECKPOINTS))
    for path in files:
        n_configs = len(read_space(path))
        for sampler in args.samplers.split(","):
            runs = np.array([cpu_per_step(path, sampler, args.seed + r, steps) for r in range(args.repeats)])
            cells = [f"{runs[:, n - 5 : n].mean():.3f} s [{runs[:, :n].sum(axis=1).mean():.1f}]" for n in CHECKPOINTS]
            name = f"{Path(path).parent.name}/{Path(path).name.removesuffix('.json.gz')}"
            print(f"| {name} | {n_configs} | {sampler} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
