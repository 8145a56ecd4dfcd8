"""Nothing silent: a reused stored result is logged and counted in the summary; the CLI's JSON log lines."""

from __future__ import annotations

import importlib.util
import io
import json
import logging
import sys
from pathlib import Path

import pytest

from warpforge.evaluator.run.backend import register
from warpforge.evaluator.run.pool import PoolConfig
from warpforge.logs import configure
from warpforge.search.engine.campaign import CampaignSpec, run_campaign

ROOT = Path(__file__).parents[2]
TASK = str(ROOT / "tests" / "evaluator" / "planted" / "task_double.py")
GOOD = str(ROOT / "tests" / "evaluator" / "planted" / "good.py")
if "wf_bench_pipeline" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("wf_bench_pipeline", ROOT / "benchmarks" / "pipeline.py")
    assert _spec is not None and _spec.loader is not None
    sys.modules["wf_bench_pipeline"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["wf_bench_pipeline"])


@register
class StandInRounds(sys.modules["wf_bench_pipeline"].StandInGpuBackend):  # type: ignore[misc,name-defined]
    name = "standin-logging"
    uses_gpu = False


def test_stored_results_reused_are_logged_and_counted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = f"sqlite:///{tmp_path / 'wf.db'}"
    config = PoolConfig(workers=1, use_ray=False, backend_kwargs={"eval_s": 0.0, "compile_s": 0.0})

    def spec(name: str, trials: int) -> CampaignSpec:
        return CampaignSpec(
            name=name,
            tasks=[TASK],
            variant_files=[GOOD],
            trials=trials,
            backend=StandInRounds.name,
            db_url=db,
            seed=0,
            sampler="random",
            top_k=0,
        )

    first = run_campaign(spec("a", 3), pool_config=config)
    assert first.tasks[0].reused == 0 and first.tasks[0].notes == []
    with caplog.at_level(logging.INFO, logger="warpforge"):
        second = run_campaign(spec("b", 6), pool_config=config)  # all 6 configurations: 3 were stored by "a"
    task = second.tasks[0]
    assert task.evaluations == 6 and task.reused == 3
    assert task.notes == []  # said once, from the count (run prints "reused 3 stored results ..."), not twice
    reused = [r for r in caplog.records if "stored result reused" in r.getMessage()]
    assert len(reused) == 3


def test_json_log_lines() -> None:
    stream = io.StringIO()
    configure(verbose=0, json_lines=True, stream=stream)
    try:
        logging.getLogger("warpforge.x").info("hidden at the default level")
        logging.getLogger("warpforge.x").warning("shown %d", 1)
        lines = [json.loads(line) for line in stream.getvalue().splitlines()]
        assert [(r["level"], r["logger"], r["msg"]) for r in lines] == [("WARNING", "warpforge.x", "shown 1")]
        configure(verbose=2, json_lines=True, stream=stream)  # replaces its handler: one line per record
        logging.getLogger("warpforge.x").debug("now shown")
        assert stream.getvalue().count("now shown") == 1
    finally:
        logger = logging.getLogger("warpforge")
        for h in list(logger.handlers):
            logger.removeHandler(h)
        logger.propagate, logger.level = True, logging.NOTSET
