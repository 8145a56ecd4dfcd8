"""The orchestrator's peak memory while candidates flood what it reads back (issue 26), as a table.

Each fixture runs in a fresh orchestrator process (``python benchmarks/orchestrator_memory.py --one NAME``:
the interpret backend, its own child pool) that reports its own peak resident memory at the end (VmHWM from
/proc/self/status and ru_maxrss), so every row is one orchestrator's high-water mark, nothing shared. The
first row, the honest control, is the baseline; the floods may add at most ``BOUND_MIB`` to it: whatever a
child sends, the trusted side holds at most one capped message (sandbox.MAX_REPORT_BYTES, 16 MiB, plus its
parse) and reads tails from the end (sandbox.TAIL_BYTES).

    python benchmarks/orchestrator_memory.py                 # 3 GiB of stderr, 2 GiB of marks and of report
    python benchmarks/orchestrator_memory.py --mib 256       # what tests/evaluator/test_walls.py runs

The flood sizes are set by rewriting ``FLOOD_MIB`` in copies of the manifest's fixtures (in a temporary
folder with the task file), never by the environment (the sandbox's is an allowlist).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES_DIR = ROOT / "tests" / "evaluator" / "adversarial"
# The control first: its peak is the baseline the floods are compared with.
FIXTURES = (
    "control_double",
    "io_stderr_flood",
    "io_marks_flood",
    "io_report_flood",
    "io_stderr_symlink",
    "io_stderr_fifo",
)
BOUND_MIB = 64
# Per flooding fixture, the size the issue reported (stderr 3 GiB, marks 2 GiB); the report as large as the marks.
ISSUE_MIB = {"io_stderr_flood": 3072, "io_marks_flood": 2048, "io_report_flood": 2048}


def peak_kib() -> dict[str, int]:
    """This process's peak resident memory: VmHWM (/proc/self/status) and ru_maxrss, in KiB."""
    hwm = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    return {"vmhwm_kib": hwm, "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}


def run_one(name: str, manifest: Path) -> dict[str, object]:
    """Evaluate one fixture in this process (the orchestrator) and report its verdict and peak memory."""
    from warpforge.evaluator.run.adversarial import load_manifest, run_fixture
    from warpforge.evaluator.run.backend import get_backend

    fixture = next(f for f in load_manifest(manifest) if f.name == name)
    backend = get_backend("interpret")
    try:
        start = time.monotonic()
        outcome = run_fixture(backend, fixture, manifest.parent)
    finally:
        backend.close()
    return {
        "fixture": name,
        "verdict": outcome.verdict,
        "reason": outcome.reason,
        "message": outcome.message[:300],
        "wall_s": round(time.monotonic() - start, 1),
        **peak_kib(),
    }


def fixture_copies(mib: dict[str, int], dest: Path) -> Path:
    """The manifest folder copied to ``dest`` with each flood's FLOOD_MIB rewritten; returns the manifest."""
    shutil.copytree(FIXTURES_DIR, dest, dirs_exist_ok=True)
    for name, size in mib.items():
        path = dest / f"{name}.py"
        text = path.read_text()
        if "FLOOD_MIB = 64" not in text:
            raise SystemExit(f"{path.name}: no 'FLOOD_MIB = 64' line to rewrite")
        path.write_text(text.replace("FLOOD_MIB = 64", f"FLOOD_MIB = {int(size)}"))
    return dest / "manifest.json"


def measure(
    names: tuple[str, ...] = FIXTURES, mib: int | None = None, env: dict[str, str] | None = None
) -> list[dict[str, object]]:
    """One fresh orchestrator process per fixture; floods of ``mib`` MiB (None: the issue's sizes)."""
    sizes = {n: (mib if mib is not None else ISSUE_MIB[n]) for n in ISSUE_MIB}
    rows = []
    with tempfile.TemporaryDirectory(prefix="wf-orchestrator-memory-") as tmp:
        manifest = fixture_copies(sizes, Path(tmp) / "adversarial")
        for name in names:
            done = subprocess.run(
                [sys.executable, __file__, "--one", name, "--manifest", str(manifest)],
                capture_output=True,
                text=True,
                env=env if env is not None else dict(os.environ),
            )
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
            if done.returncode != 0 or not lines:
                raise RuntimeError(
                    f"{name}: the orchestrator failed (exit {done.returncode}): "
                    f"{done.stderr.strip().splitlines()[-1:] or ['no output']}"
                )
            row = json.loads(lines[-1])
            row["flood_mib"] = sizes.get(name, 0)
            rows.append(row)
    return rows


def table(rows: list[dict[str, object]]) -> str:
    base = int(str(rows[0]["vmhwm_kib"]))
    out = [f"{'fixture':<20} {'flood':>9} {'verdict':<28} {'peak RSS':>9} {'over control':>13} {'wall':>6}"]
    for r in rows:
        over = (int(str(r["vmhwm_kib"])) - base) / 1024
        flood = f"{r['flood_mib']} MiB" if r["flood_mib"] else "-"
        out.append(
            f"{r['fixture']:<20} {flood:>9} {str(r['verdict']) + ': ' + str(r['reason']):<28} "
            f"{int(str(r['vmhwm_kib'])) / 1024:>5.0f} MiB {over:>9.1f} MiB {r['wall_s']:>5}s"
        )
    out.append(f"bound: the control's peak + {BOUND_MIB} MiB (sandbox.MAX_REPORT_BYTES = 16 MiB read, parsed once)")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--manifest", type=Path, default=FIXTURES_DIR / "manifest.json", help=argparse.SUPPRESS)
    parser.add_argument("--mib", type=int, default=None, help="flood size in MiB (default: the issue's sizes)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.manifest)), flush=True)
        return
    rows = measure(mib=args.mib)
    print(json.dumps(rows, indent=1) if args.json else table(rows))


if __name__ == "__main__":
    main()
