"""The parallel campaign: proposals in flight, store-before-tell, kill -9 and resume, beyond-noise acceptance.

A stand-in backend with known evaluation times (benchmarks/pipeline.py, registered only by tests and the
benchmark) keeps these tests fast; ``standin-cpu`` is its variant without a GPU, so in-process threads
may run several at once.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from warpforge.evaluator.result import EvalResult, ShapeResult, Verdict
from warpforge.evaluator.run.pool import PoolConfig
from warpforge.search.engine.acceptance import Entry, Incumbent, beyond_noise, speedup_interval
from warpforge.search.engine.campaign import CampaignSpec, run_campaign

ROOT = Path(__file__).parents[2]
PLANTED = ROOT / "tests" / "evaluator" / "planted"
TASK, GOOD = str(PLANTED / "task_double.py"), str(PLANTED / "good.py")
# The same stand-in, registered in this process and in the subprocess that gets killed.
STANDIN = f"""
import importlib.util, sys, threading, time
spec = importlib.util.spec_from_file_location("wf_bench_pipeline", {str(ROOT / "benchmarks" / "pipeline.py")!r})
bench = importlib.util.module_from_spec(spec)
sys.modules["wf_bench_pipeline"] = bench
spec.loader.exec_module(bench)
from warpforge.evaluator.run.backend import register

@register
class StandInCpu(bench.StandInGpuBackend):
    name = "standin-cpu"
    uses_gpu = False
    lock, running, peak = threading.Lock(), 0, 0

    def _evaluate(self, job):
        cls = type(self)
        with cls.lock:
            cls.running += 1
            cls.peak = max(cls.peak, cls.running)
        try:
            return super()._evaluate(job)
        finally:
            with cls.lock:
                cls.running -= 1
"""
namespace: dict[str, Any] = {}
exec(compile(STANDIN, "standin", "exec"), namespace)
StandInCpu = namespace["StandInCpu"]


def spec(db: Path, name: str, trials: int, **kw: Any) -> CampaignSpec:
    return CampaignSpec(
        name=name,
        tasks=[TASK],
        variant_files=[GOOD],
        trials=trials,
        backend="standin-cpu",
        db_url=f"sqlite:///{db}",
        seed=0,
        sampler="random",
        **kw,
    )


def pool(workers: int, eval_s: float = 0.1) -> PoolConfig:
    return PoolConfig(workers=workers, use_ray=False, backend_kwargs={"eval_s": eval_s, "compile_s": 0.0})


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        out = [tuple(r) for r in conn.execute(text(sql))]
    engine.dispose()
    return out


def test_several_proposals_in_flight_each_stored_once_and_told(tmp_path: Path) -> None:
    db = tmp_path / "wf.db"
    StandInCpu.peak = 0
    summary = run_campaign(spec(db, "par", 5, top_k=0), pool_config=pool(3, eval_s=0.3))
    assert StandInCpu.peak >= 2  # evaluations overlapped
    assert summary.tasks[0].workers == "in-process, 3 workers"
    assert rows(db, "select count(*), count(distinct params_key) from wf_evaluations") == [(5, 5)]
    # every stored evaluation's trial was told: nothing is left RUNNING
    states = rows(db, "select state, count(*) from trials group by state")
    verdicts = rows(db, "select verdict, reason, message from wf_evaluations")
    assert dict(states) == {"COMPLETE": 5}, verdicts


def test_each_result_is_committed_before_its_trial_is_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Results are written in batches (db/writer.py), but never told before they are durable: when a trial is
    told, another connection already sees its stored row, so a kill -9 after any tell loses nothing told."""
    from warpforge.db.store import params_key
    from warpforge.search.samplers.strategy import Strategy

    db, seen = tmp_path / "wf.db", []
    tell = Strategy.tell

    def spy(self: Strategy, proposal: Any, value: Any, **kw: Any) -> None:
        engine = create_engine(f"sqlite:///{db}")  # a connection of its own: sees committed rows only
        with engine.connect() as conn:
            seen.append(
                conn.execute(
                    text("select count(*) from wf_evaluations where params_key = :k"),
                    {"k": params_key(proposal.params)},
                ).scalar()
            )
        engine.dispose()
        tell(self, proposal, value, **kw)

    monkeypatch.setattr(Strategy, "tell", spy)
    run_campaign(spec(db, "durable", 5, top_k=0), pool_config=pool(3, eval_s=0.2))
    assert seen == [1, 1, 1, 1, 1]


KILLED = (
    STANDIN
    + """
import json
from warpforge.evaluator.run.pool import PoolConfig
from warpforge.search.engine.campaign import CampaignSpec, run_campaign
db, resume = sys.argv[1], sys.argv[2] == "resume"
spec = CampaignSpec(name="k", tasks=[{task!r}], variant_files=[{good!r}], trials=5, backend="standin-cpu",
                    db_url="sqlite:///" + db, seed=0, sampler="random", resume=resume, top_k=0)
config = PoolConfig(workers=3, use_ray=False, backend_kwargs={{"eval_s": 1.5 if not resume else 0.05}})
print(json.dumps(run_campaign(spec, pool_config=config).to_dict()))
""".format(task=TASK, good=GOOD)
)


@pytest.mark.slow  # ~15-50 s on 2 cores: the slow tier (`make test-slow`)
def test_kill_9_mid_campaign_then_resume_loses_nothing_and_reruns_the_in_flight(tmp_path: Path) -> None:
    db, script = tmp_path / "wf.db", tmp_path / "killed.py"
    script.write_text(KILLED)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(db), "fresh"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    stored: list[tuple[Any, ...]] = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(stored) < 3:
        time.sleep(0.2)
        try:
            stored = rows(db, "select id, params_key from wf_evaluations")
        except Exception:  # noqa: BLE001 - tables not created yet
            continue
    # kill -9 the orchestrator while others are in flight. (5 of the 6 configurations: Strategy.ask counts
    # re-queued WAITING trials as pending and reports the space exhausted when told + waiting == all of it.)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = rows(db, "select id, params_key from wf_evaluations")
    running = rows(db, "select count(*) from trials where state = 'RUNNING'")[0][0]
    assert 3 <= len(before) < 5 and running >= 1
    resumed = subprocess.run(
        [sys.executable, str(script), str(db), "resume"], env=env, capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert summary["requeued"] >= 1  # the in-flight trials were proposed again
    after = rows(db, "select id, params_key from wf_evaluations")
    assert set(before) <= set(after)  # nothing completed was lost
    keys = [k for _, k in after]
    assert len(keys) == len(set(keys)) == 5  # nothing evaluated twice, and the budget was completed


def _result(ms: float, spread: float) -> EvalResult:
    shape = ShapeResult(
        shape={"N": 1},
        dtype="float32",
        p20_ms=ms * (1 - spread),
        p50_ms=ms,
        p80_ms=ms * (1 + spread),
        ref_p20_ms=1.98,
        ref_p50_ms=2.0,
        ref_p80_ms=2.02,
        speedup=2.0 / ms,
    )
    return EvalResult(verdict=Verdict.OK, shapes=[shape], objective_ms=ms, speedup=2.0 / ms)


def test_a_faster_median_within_noise_is_not_a_new_best() -> None:
    inc = Incumbent(alpha=0.05)
    inc.offer(Entry("a", "v", {"x": 1}, _result(1.00, 0.02)))
    inc.offer(Entry("b", "v", {"x": 2}, _result(0.99, 0.02)))  # 1% faster, +-2% spread: noise
    assert inc.best is not None and inc.best.key == "a" and inc.within_noise == 1
    inc.offer(Entry("c", "v", {"x": 3}, _result(0.80, 0.02)))  # 20% faster: beyond noise
    assert inc.best.key == "c" and inc.adopted == 1
    inc.offer(Entry("d", "v", {"x": 4}, EvalResult(verdict=Verdict.INCORRECT, objective_ms=0.1)))
    assert inc.best.key == "c"  # an incorrect result never wins, however fast
    assert "1 adopted, 1 faster medians within noise (p20-p80 separation: 2)" in inc.describe()


def test_an_ab_remeasurement_decides_when_the_backend_offers_one() -> None:
    inc = Incumbent(alpha=0.05, remeasure=True)
    spec_a, spec_b, spec_c = object(), object(), object()  # stand-ins: only passed through to the pool
    assert inc.offer(Entry("a", "v", {}, _result(1.0, 0.02), spec_a)) is None  # type: ignore[arg-type]
    pair = inc.offer(Entry("b", "v", {}, _result(0.9, 0.02), spec_b))  # type: ignore[arg-type]
    assert pair is not None and (pair[0].key, pair[1].key) == ("b", "a")
    assert inc.offer(Entry("c", "v", {}, _result(0.8, 0.02), spec_c)) is None  # type: ignore[arg-type]  # queued
    same = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98]
    nxt = inc.resolve((same, same[::-1]))  # re-measured side by side: b is not faster after all
    assert inc.best is not None and inc.best.key == "a" and nxt is not None and nxt[0].key == "c"
    assert inc.resolve(([0.8 * t for t in same], same)) is None
    assert inc.best.key == "c" and inc.evidence == {"interleaved A/B re-measurement": 2}


def test_decisions_and_intervals_fall_back_honestly_without_raw_samples() -> None:
    faster, how = beyond_noise(_result(0.5, 0.01), _result(1.0, 0.01), 0.05)
    assert faster and how == "p20-p80 separation"
    low, mid, high, method = speedup_interval(_result(0.5, 0.01))
    assert low is not None and high is not None and mid is not None
    assert low < mid < high and method == "p20-p80 range (no raw samples)"


@pytest.mark.skipif(
    importlib.util.find_spec("warpforge.evaluator.run.stats") is None,
    reason="warpforge.evaluator.run.stats not there yet",
)
def test_samples_go_through_the_statistics_module() -> None:
    faster, how = beyond_noise(
        _result(1.0, 0.0),
        _result(1.0, 0.0),
        0.05,
        ab=([0.5 + 0.001 * i for i in range(20)], [1.0 + 0.001 * i for i in range(20)]),
    )
    assert faster and how == "interleaved A/B re-measurement"


def test_campaign_ends_with_a_top_k_rebenchmark_and_a_speedup_interval(tmp_path: Path) -> None:
    db = tmp_path / "wf.db"
    summary = run_campaign(spec(db, "topk", 6, top_k=3), pool_config=pool(2, eval_s=0.02)).tasks[0]
    assert summary.evaluations == 6 and len(summary.final) == 3
    assert all(f.remeasured and f.verdict == "ok" for f in summary.final)
    chosen = [f for f in summary.final if f.chosen]
    assert len(chosen) == 1 and chosen[0].params == summary.best_params
    assert summary.best_speedup_low is not None and summary.best_speedup_high is not None
    assert summary.best_speedup_low <= (summary.best_speedup or 0) <= summary.best_speedup_high
    # Both: the rule is said, and the stand-in pool re-measures A/B (it can), so at least one adoption went
    # through the interleaved re-measurement.
    assert summary.acceptance.startswith("best adopted only when faster beyond noise")
    assert "(interleaved A/B re-measurement: " in summary.acceptance
    # the re-benchmark is stored too, apart from the search's own evaluations
    assert rows(db, "select count(*) from wf_evaluations where final") == [(3,)]
    assert rows(db, "select count(*) from wf_evaluations where study_name like '%final'") == [(0,)]


@pytest.mark.slow  # ~15-50 s on 2 cores: the slow tier (`make test-slow`)
def test_cli_runs_workers_in_process_and_refuses_a_shared_gpu(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["WARPFORGE_DB"] = f"sqlite:///{tmp_path / 'wf.db'}"
    cli = [sys.executable, "-m", "warpforge.cli", "run", TASK, "--variant-file", GOOD]
    proc = subprocess.run(
        [*cli, "--trials", "2", "--workers", "2", "--no-ray", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    task = json.loads(proc.stdout)["tasks"][0]
    assert task["workers"] == "in-process, 2 workers" and task["evaluations"] == 2
    shared = subprocess.run(
        [*cli, "--backend", "cuda", "--workers", "2", "--no-ray"], env=env, capture_output=True, text=True, timeout=300
    )
    import torch

    if torch.cuda.is_available():
        assert shared.returncode == 1 and "one GPU at once" in shared.stderr and "Traceback" not in shared.stderr
    else:  # issue 19: without a GPU, --backend cuda is refused before the pool is even built (a usage error)
        assert shared.returncode == 2 and "--backend cuda needs a CUDA GPU" in shared.stderr


def test_threads_do_not_leak(tmp_path: Path) -> None:
    before = threading.active_count()
    run_campaign(spec(tmp_path / "wf.db", "leak", 2, top_k=0), pool_config=pool(2, eval_s=0.0))
    time.sleep(0.2)
    assert threading.active_count() <= before
