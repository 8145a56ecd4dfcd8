"""The cost of storing one evaluation result, before and after db/writer.py (SQLite, no pool, no Ray).

- ``orm session``: what the campaign did per result before: a fresh ORM session (pool checkout with its
  pre-ping), the campaign and variant by primary key, ``store.save_evaluation`` (task look-up, hardware
  look-up, unit of work), commit;
- ``writer, batch N``: :class:`~warpforge.db.writer.ResultWriter` on its held connection, one transaction
  per N results (the campaign commits once per poll of the pool: N is 1 at one worker).

Wall and CPU (``time.process_time``) per result, over ``--results`` results after 20 warm-up ones.

Run: ``.venv/bin/python benchmarks/store_path.py [--results 300] [--out benchmarks/results/store_path.txt]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import pipeline

from warpforge.db import store
from warpforge.db.models import Campaign, VariantRecord
from warpforge.db.session import Database
from warpforge.db.writer import ResultWriter
from warpforge.evaluator.sandbox.job import Job
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import load_variant


def measure(n: int, batch: int | None, folder: Path) -> tuple[float, float]:
    """(wall ms, CPU ms) per stored result; ``batch`` None: the per-result ORM session of before."""
    task_file, variant_file = pipeline.write_files(folder)
    task, variant = get_task(str(task_file)), load_variant(variant_file)
    db = Database(f"sqlite:///{folder}/store-{batch}.db")
    db.upgrade()
    with db.session() as s:
        campaign_id = store.create_campaign(s, "bench", {}).id
        variant_id = store.ensure_variant(s, variant).id
    backend = pipeline.StandInGpuBackend(eval_s=0.0, compile_s=0.0)
    results = [
        backend._evaluate(Job(task, variant, {"BLOCK": 64, "num_warps": 1, "num_stages": 1, "UNROLL": 1, "GROUP": i}))
        for i in range(n + 20)
    ]
    writer = ResultWriter(db, campaign_id)

    def one(i: int, result: Any) -> None:
        if batch is None:
            with db.session() as s:
                store.save_evaluation(
                    s,
                    result,
                    task=task,
                    variant=s.get(VariantRecord, variant_id),
                    campaign=s.get(Campaign, campaign_id),
                    study_name="bench",
                    trial_number=i,
                )
            return
        writer.add(
            result,
            task=task,
            variant_id=variant_id,
            variant_hash=variant.source_hash,
            study_name="bench",
            trial_number=i,
        )
        if writer.pending >= batch:
            writer.flush()

    for i in range(20):
        one(i, results[i])
    writer.flush()
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(20, n + 20):
        one(i, results[i])
    writer.flush()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    writer.close()
    return 1000 * wall / n, 1000 * cpu / n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=300)
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    lines = [
        f"store path (benchmarks/store_path.py): {args.results} stand-in results into SQLite (WAL, "
        f"synchronous=NORMAL), {os.cpu_count()} cores; 1-min load average (uptime) {os.getloadavg()[0]:.1f} "
        "at start",
        "",
        f"{'path':<18} {'wall ms/result':>14} {'CPU ms/result':>13} {'load':>5}",
    ]
    with tempfile.TemporaryDirectory(prefix="wf-store-") as tmp:
        for batch in (None, 1, 4, 16):
            wall, cpu = measure(args.results, batch, Path(tmp))
            name = "orm session" if batch is None else f"writer, batch {batch}"
            lines.append(f"{name:<18} {wall:>14.2f} {cpu:>13.2f} {os.getloadavg()[0]:>5.1f}")
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
