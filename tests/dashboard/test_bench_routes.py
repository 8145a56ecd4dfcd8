"""benchmarks/dashboard_routes.py on a small fill: every route it times answers 200 with a Server-Timing."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_every_benchmarked_route_answers(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import dashboard_routes as bench
    finally:
        sys.path.remove(str(BENCH))
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    info = bench.fill(url, 300, campaigns=3, cpu=300)
    rows = [*bench.time_routes(url, info, repeats=1), bench.time_best_static(url, repeats=1)]
    assert len(rows) == len(bench.routes(info)) + 1 == 38
    assert [r[0] for r in rows if r[1] != 200] == []
    assert all(r[2] >= 0 and r[5] >= 0 for r in rows)  # server time and CPU time
    agent = next(r for r in rows if r[0] == "/api/agent/calls?limit=1000")
    assert agent[1] == 200
