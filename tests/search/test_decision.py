"""The campaign stores its decision per task (wf_decisions) and readers take it from there.

Stand-in backends with known times (benchmarks/pipeline.py: ``synthetic_ms(params)``, reference 2.0 ms,
p20/p80 at 0.99/1.01 of the median) give the expected numbers independently of the campaign's code.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from warpforge.db.queries import Reader
from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.backend import register
from warpforge.evaluator.run.pool import PoolConfig
from warpforge.search.engine.campaign import CampaignSpec, run_campaign

ROOT = Path(__file__).parents[2]
PLANTED = ROOT / "tests" / "evaluator" / "planted"
_spec = importlib.util.spec_from_file_location("wf_bench_pipeline", ROOT / "benchmarks" / "pipeline.py")
assert _spec is not None and _spec.loader is not None
bench = sys.modules.get("wf_bench_pipeline") or importlib.util.module_from_spec(_spec)
if "wf_bench_pipeline" not in sys.modules:
    sys.modules["wf_bench_pipeline"] = bench
    _spec.loader.exec_module(bench)


@register
class DecisionStandIn(bench.StandInGpuBackend):  # type: ignore[misc,name-defined]
    name = "standin-decision"
    uses_gpu = False  # in-process threads, several at once


@register
class UntimedStandIn(bench.StandInGpuBackend):  # type: ignore[misc,name-defined]
    """Like the interpreter: checks pass, nothing is timed."""

    name = "standin-untimed"
    uses_gpu = False
    measures = False
    live_timing = False

    def _evaluate(self, job):  # type: ignore[no-untyped-def]
        return job.result(Verdict.OK, checked=["stand-in check"], device="cpu (stand-in)")


def _spec(db: Path, name: str, trials: int, backend: str, **kw: object) -> CampaignSpec:
    return CampaignSpec(
        name=name,
        tasks=[str(PLANTED / "task_double.py")],
        variant_files=[str(PLANTED / "good.py")],
        trials=trials,
        backend=backend,
        db_url=f"sqlite:///{db}",
        seed=0,
        sampler="random",
        **kw,
    )  # type: ignore[arg-type]


POOL = PoolConfig(workers=2, use_ray=False, backend_kwargs={"eval_s": 0.0, "compile_s": 0.0})


def test_a_timed_campaign_stores_its_accepted_winner_with_interval_and_top_k(tmp_path: Path) -> None:
    db = tmp_path / "wf.db"
    run_campaign(_spec(db, "d", 4, "standin-decision", top_k=3), pool_config=POOL)
    reader = Reader(f"sqlite:///{db}")
    (d,) = reader.decisions(campaign="d")
    assert d.accepted and d.task == "double" and d.backend == "standin-decision"
    assert d.params is not None and d.objective_ms is not None
    ms = bench.synthetic_ms(dict(d.params))  # the stand-in's known time for the winner's params
    assert d.objective_ms == pytest.approx(ms)
    assert d.speedup == pytest.approx(2.0 / ms)  # reference 2.0 ms
    assert d.speedup_low == pytest.approx(2.0 * 0.99 / (ms * 1.01))
    assert d.speedup_high == pytest.approx(2.0 * 1.01 / (ms * 0.99))
    assert (d.timing_source, d.gpu, d.fingerprint) == ("simulated", "stand-in (no GPU)", "standin")
    assert len(d.top_k) == 3 and [t.params for t in d.top_k if t.chosen] == [d.params]
    assert all(t.remeasured for t in d.top_k)
    assert [s.shape_key for s in d.shapes] == ["N=1048576"] and d.shapes[0].p50_ms == pytest.approx(ms)
    assert (d.evaluations, d.measured) == (4, 4)
    # the winner is one of the evaluated configurations, and its search evaluation is linked
    searched = {tuple(sorted(r.params.items())): r.id for r in reader.evaluations(campaign="d", final=False).items}
    assert d.evaluation_id == searched[tuple(sorted(d.params.items()))]
    # `best` answers from this decision
    (w,) = reader.winners(task="double")
    assert w.decision.campaign == "d" and w.ms == pytest.approx(ms)


@pytest.mark.slow  # two campaigns, ~30 s on the shared 2-core machine
def test_a_resumed_campaign_replaces_its_decision(tmp_path: Path) -> None:
    db = tmp_path / "wf.db"
    run_campaign(_spec(db, "d", 4, "standin-decision", top_k=3), pool_config=POOL)
    reader = Reader(f"sqlite:///{db}")
    assert [d.evaluations for d in reader.decisions(campaign="d")] == [4]
    # one decision per campaign and task, now over all 6 evaluations
    run_campaign(_spec(db, "d", 6, "standin-decision", top_k=3, resume=True), pool_config=POOL)
    (again,) = reader.decisions(campaign="d")
    assert again.evaluations == 6
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        assert conn.execute(text("select count(*) from wf_decisions")).scalar() == 1
    engine.dispose()


def test_an_untimed_campaign_stores_that_nothing_was_timed(tmp_path: Path) -> None:
    db = tmp_path / "wf.db"
    run_campaign(_spec(db, "u", 3, "standin-untimed", top_k=3), pool_config=POOL)
    reader = Reader(f"sqlite:///{db}")
    (d,) = reader.decisions(campaign="u")
    assert not d.accepted and d.params is None and d.objective_ms is None and d.gpu is None
    assert d.top_k == () and d.shapes == () and (d.evaluations, d.measured) == (3, 0)
    assert "0 of 3 evaluations measured" in d.note
    assert reader.winners(task="double") == ()
    campaign = reader.campaign("u")
    assert campaign is not None and [x.task for x in campaign.decisions] == ["double"]
