"""Search efficiency on the recorded spaces: run bench-search (or read its JSON) and summarise.

    python benchmarks/search_efficiency.py                        # run (30 repeats) and summarise
    python benchmarks/search_efficiency.py --from results.json    # summarise an earlier --json run

Prints the per-space table, the mean fraction at each budget over all files and over distinct
spaces (A100_T4 holds the A100 space again), and the comparison with Kernel Tuner 1.5's best
strategy per space (issue 4's reference numbers, 10 repeats upstream).
"""

from __future__ import annotations

import argparse
import glob
import json
from pathlib import Path

from rich.console import Console

from warpforge.search.bench.harness import BenchRecord, bench, render_table

ROOT = Path(__file__).resolve().parents[1]
SPACES = ROOT.parent / "shared" / "spaces"
# Kernel Tuner 1.5, best strategy per space (budgets 50/100/200), from the issue.
KT_BEST = {
    "convolution_milo/A100": ("genetic algorithm", {50: 0.66, 100: 0.84, 200: 0.97}),
    "gemm/RTX_3090": ("bayes_opt", {50: 0.84, 100: 0.90, 200: 0.97}),
}


def summarise(records: list[BenchRecord]) -> None:
    console = Console(width=160)
    console.print(render_table(records, console.width))
    samplers = list(dict.fromkeys(r.sampler for r in records))
    budgets = sorted({r.budget for r in records})
    for label, keep in (("all files", lambda s: True), ("distinct spaces", lambda s: not s.endswith("_T4"))):
        for s in samplers:
            cells = []
            for b in budgets:
                vals = [r.mean for r in records if r.sampler == s and r.budget == b and keep(r.space)]
                cells.append(f"{b}: {sum(vals) / len(vals):.3f}")
            console.print(f"mean over {label:15s} {s:12s} " + "  ".join(cells))
    for space, (strategy, ref) in KT_BEST.items():
        for r in records:
            if r.space == space and r.budget in ref:
                verdict = "ahead" if r.mean > ref[r.budget] else "behind"
                console.print(
                    f"{space} @{r.budget} {r.sampler:12s} {r.mean:.3f} ± {r.stderr:.3f} vs "
                    f"Kernel Tuner {strategy} {ref[r.budget]:.2f}: {verdict}"
                )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src", help="JSON written by `warpforge bench-search --json`")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--samplers", default="random,tpe,wf-default")
    ap.add_argument("--budgets", default="20,50,100,200")
    args = ap.parse_args()
    if args.src:
        records = [BenchRecord(**r) for r in json.loads(Path(args.src).read_text())]
    else:
        files = sorted(glob.glob(str(SPACES / "*" / "*.json.gz")))
        records = bench(
            files, args.samplers.split(","), [int(b) for b in args.budgets.split(",")], repeats=args.repeats
        )
    summarise(records)


if __name__ == "__main__":
    main()
