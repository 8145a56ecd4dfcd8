"""``warpforge results`` and ``warpforge best`` read through db/queries.Reader; ``best`` answers from the stored
campaign decisions, never by re-ranking raw times. Rows are inserted by the test itself (ORM models)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from warpforge.cli import app
from warpforge.db.models import Campaign, Decision, Evaluation, VariantRecord
from warpforge.db.session import Database

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'wf.db'}"
    db = Database(url)
    db.upgrade()
    with db.session() as s:
        c1, c2, c3 = (Campaign(name=n, status="finished", spec={}) for n in ("c1", "c2", "c3"))
        v = VariantRecord(source_hash="a" * 64, task="double", name="good", source="#", space={})
        s.add_all([c1, c2, c3, v])
        for i, (ms, gpu, verdict, final) in enumerate(
            [
                (0.30, H100, "ok", False),
                (0.05, H100, "ok", False),
                (None, None, "incorrect", False),
                (0.21, H100, "ok", True),
            ]
        ):
            s.add(
                Evaluation(
                    campaign=c1,
                    task="double",
                    variant=v,
                    variant_hash=v.source_hash,
                    params={"B": i},
                    params_key=json.dumps({"B": i}),
                    backend="replay",
                    verdict=verdict,
                    objective_ms=ms,
                    timing_source="recorded" if ms else None,
                    timing_gpu=gpu,
                    final=final,
                    created_at=T0 + timedelta(minutes=i),
                )
            )

        def decision(c: Campaign, gpu: str, ms: float, minutes: int, shape_ms: float) -> Decision:
            return Decision(
                campaign=c,
                task="double",
                backend="replay",
                timing_source="recorded",
                timing_gpu=gpu,
                fingerprint=gpu[-4:],
                accepted=True,
                variant_hash=v.source_hash,
                variant_name="good",
                params={"B": minutes},
                objective_ms=ms,
                speedup=2 / ms,
                speedup_low=1.9 / ms,
                speedup_high=2.1 / ms,
                interval="p20-p80",
                note="",
                top_k=[],
                created_at=T0 + timedelta(minutes=minutes),
                shapes=[{"shape": {"N": 64}, "shape_key": "N=64", "dtype": "float32", "p50_ms": shape_ms}],
            )

        # Raw rows hold a faster H100 time (0.05) that no decision accepted: `best` must not report it.
        s.add_all(
            [decision(c1, H100, 0.20, 1, 0.9), decision(c2, H100, 0.25, 2, 0.4), decision(c3, A100, 0.10, 3, 1.0)]
        )
    return url


def _cli(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


def test_best_answers_from_stored_decisions_one_gpu_each(url: str) -> None:
    code, out, _ = _cli("best", "double", "--db", url, "--json")
    rows = json.loads(out)
    assert code == 0 and [(r["gpu"], r["campaign"], r["time_ms"]) for r in rows] == [
        (A100, "c3", 0.10),
        (H100, "c1", 0.20),
    ]
    assert rows[1]["params"] == {"B": 1} and rows[1]["speedup"] == pytest.approx(10.0)
    assert rows[1]["speedup_low"] == pytest.approx(9.5) and rows[1]["speedup_high"] == pytest.approx(10.5)
    code, out, _ = _cli("best", "double", "--gpu", "h100", "--shape", "N=64", "--db", url, "--json")
    assert code == 0 and [(r["campaign"], r["time_ms"], r["shape"]) for r in json.loads(out)] == [("c2", 0.4, "N=64")]
    code, out, _ = _cli("best", "double", "--gpu", "H100", "--db", url)
    assert code == 0 and "c1" in out and "0.2" in out and "0.05" not in out


def test_best_without_a_decision_says_what_to_do(url: str) -> None:
    code, _, err = _cli("best", "softmax", "--db", url)
    assert code == 1 and "no measured correct result for 'softmax'" in err


def test_results_pages_filters_and_marks_the_final_rebenchmark(url: str) -> None:
    code, out, _ = _cli("results", "--db", url, "--json")
    rows = json.loads(out)
    assert code == 0 and [r["params"]["B"] for r in rows] == [3, 2, 1, 0]  # newest first
    assert [r["final"] for r in rows] == [True, False, False, False]
    code, out, _ = _cli("results", "--db", url, "--verdict", "ok", "--sort", "objective_ms", "--limit", "2", "--json")
    assert [r["time_ms"] for r in json.loads(out)] == [0.05, 0.21]
    code, out, _ = _cli("results", "--db", url, "--sort", "objective_ms", "--offset", "3", "--json")
    assert [r["verdict"] for r in json.loads(out)] == ["incorrect"]  # unmeasured last
    code, _, err = _cli("results", "--db", url, "--sort", "nope")
    assert code == 2 and "unknown sort" in err
