"""Make ``release_0001.sql``: warpforge's tables as the release before revision 0002 leaves them.

Run with *that release's* code on the path (here main at 1c14e0d, schema 0001), from its checkout::

    git -C /work/main archive 1c14e0d | tar -x -C /tmp/wf-release
    cd /tmp/wf-release && PYTHONPATH=src python /path/to/make_release_db.py OUT.sql

It runs two real campaigns (6 and 4 trials, top-k 3) with the stand-in backend (benchmarks/pipeline.py:
live timing, so each final top-k re-benchmark is stored under the ``:final`` study-name suffix: 10 search
and 6 final evaluations). Only the ``wf_*`` tables are dumped (Optuna's tables are not warpforge's to
migrate), as INSERT statements.
"""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
import tempfile
from pathlib import Path

ROOT = Path.cwd()
PLANTED = ROOT / "tests" / "evaluator" / "planted"


def main(out: Path) -> None:
    spec = importlib.util.spec_from_file_location("wf_bench_pipeline", ROOT / "benchmarks" / "pipeline.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["wf_bench_pipeline"] = bench
    spec.loader.exec_module(bench)
    from warpforge.evaluator.run.backend import register
    from warpforge.evaluator.run.pool import PoolConfig
    from warpforge.search.engine.campaign import CampaignSpec, run_campaign

    @register
    class StandInCpu(bench.StandInGpuBackend):  # type: ignore[misc,name-defined]
        name = "standin-cpu"
        uses_gpu = False

    db = Path(tempfile.mkdtemp()) / "wf.db"
    url = f"sqlite:///{db}"
    pool = PoolConfig(workers=2, use_ray=False, backend_kwargs={"eval_s": 0.0, "compile_s": 0.0})
    for name, trials in (("release-a", 6), ("release-b", 4)):
        run_campaign(
            CampaignSpec(
                name=name,
                tasks=[str(PLANTED / "task_double.py")],
                variant_files=[str(PLANTED / "good.py")],
                trials=trials,
                backend="standin-cpu",
                db_url=url,
                seed=0,
                sampler="random",
                top_k=3,
            ),
            pool_config=pool,
        )
    conn = sqlite3.connect(db)
    lines = []
    for line in conn.iterdump():
        if line.startswith('INSERT INTO "wf_'):
            lines.append(line)
    out.write_text("\n".join(lines) + "\n")
    print(f"{len(lines)} rows -> {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
