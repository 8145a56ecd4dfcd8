"""What the interpreter's check costs an honest kernel: the manifest's CPU controls, this tree against another.

Each honest control of tests/evaluator/adversarial/manifest.json (expected ``ok``, not GPU-only) is evaluated
with the ``interpret`` backend in a fresh process per tree and repeat, the trees alternating (A B A B ...) so
that load drifts hit both alike; the table gives each control's median wall seconds per tree and their ratio.
CPU wall time of the check itself, never a kernel time.

    python benchmarks/check_cost.py --against 873c2af            # a git revision, checked out in a worktree
    python benchmarks/check_cost.py --against-tree ../old-main   # or a tree already there
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = Path("tests/evaluator/adversarial/manifest.json")

RUN = """
import json, sys
from warpforge.evaluator.run.adversarial import run_manifest
names = json.loads(sys.argv[1])
outs = run_manifest("interpret", names=names)
print(json.dumps({o.fixture: [o.seconds, o.verdict, o.passed] for o in outs}))
"""


def controls(tree: Path) -> list[str]:
    data = json.loads((tree / MANIFEST).read_text())
    rows = data["fixtures"] if isinstance(data, dict) else data
    return [
        r["name"]
        for r in rows
        if r.get("expected_verdict") == "ok" and not r.get("gpu_only") and r["name"].startswith("control_")
    ]


def run(tree: Path, names: list[str]) -> dict[str, list]:
    env = {"PYTHONPATH": str(tree / "src"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-c", RUN, json.dumps(names)], capture_output=True, text=True, cwd=tree, env=env
    )
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", help="a git revision of this repository (checked out in a temporary worktree)")
    ap.add_argument("--against-tree", type=Path, help="another checkout to compare with")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        other = args.against_tree
        if args.against:
            other = Path(tmp) / "other"
            subprocess.run(["git", "worktree", "add", "--detach", str(other), args.against], cwd=ROOT, check=True)
        try:
            trees = {"this": ROOT} | ({"other": other.resolve()} if other else {})
            names = sorted(set(controls(ROOT)).intersection(*(controls(t) for t in trees.values())))
            seconds: dict[str, dict[str, list[float]]] = {t: {n: [] for n in names} for t in trees}
            verdicts: dict[str, dict[str, str]] = {t: {} for t in trees}
            for _ in range(args.repeats):
                for label, tree in trees.items():
                    for name, (secs, verdict, passed) in run(tree, names).items():
                        seconds[label][name].append(secs)
                        verdicts[label][name] = verdict if passed else f"{verdict} (expected ok)"
        finally:
            if args.against:
                subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT, check=False)
    head = f"{'control':28} " + " ".join(f"{t + ' s':>10} {'verdict':>10}" for t in trees)
    print(head + ("   this/other" if len(trees) == 2 else ""))
    total = {t: 0.0 for t in trees}
    for name in names:
        row = f"{name:28} "
        med = {}
        for t in trees:
            med[t] = statistics.median(seconds[t][name])
            total[t] += med[t]
            row += f"{med[t]:10.1f} {verdicts[t][name]:>10} "
        if len(trees) == 2:
            row += f"  {med['this'] / med['other']:9.2f}x"
        print(row)
    summary = f"{'total (medians)':28} " + " ".join(f"{total[t]:10.1f} {'':>10}" for t in trees)
    if len(trees) == 2:
        summary += f"   {total['this'] / total['other']:9.2f}x"
    print(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
