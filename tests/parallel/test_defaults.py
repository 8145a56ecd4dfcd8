"""Defaults said, uncertainty shown: what a prediction took for the inputs not given, and the range."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from warpforge.cli.plan import app
from warpforge.parallel.defaults import spread
from warpforge.parallel.simulator import predict
from warpforge.parallel.specs import PlanConfig, load_cluster, load_model

runner = CliRunner()
ARGS = ["predict", "--model", "llama3-70b", "--cluster", "dgx-h100", "--tp", "8", "--pp", "4", "--dp", "2"]


def test_spread_covers_each_fitting_micro_batch() -> None:
    m, c = load_model("llama3-8b"), load_cluster("dgx-h100")
    plan = PlanConfig(tp=2, dp=4, global_batch=64)
    s = spread(m, c, plan, unsaid=("micro_batch",))
    fitting = [mb for mb in (1, 2, 4, 8) if predict(m, c, plan.model_copy(update={"micro_batch": mb})).fits]
    assert s.over == {"micro_batch": fitting} and s.plans == len(fitting) >= 2
    taken = predict(m, c, plan).mfu
    assert s.mfu[0] <= taken <= s.mfu[1] and s.mfu[0] < s.mfu[1]
    assert s.assumed[0].value == 1 and "took 1" in s.assumed[0].line()


def test_schedule_is_said_only_with_pipeline_parallelism() -> None:
    m, c = load_model("llama3-8b"), load_cluster("dgx-h100")
    assert spread(m, c, PlanConfig(tp=2, dp=4, global_batch=64), unsaid=("interleave",)).assumed == []


def test_cli_json_carries_what_it_took_and_the_range() -> None:
    res = runner.invoke(app, [*ARGS, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert {a["input"] for a in doc["assumed"]} == {"micro_batch", "recompute", "interleave"}
    lo, hi = doc["range"]["mfu"]
    assert lo <= doc["mfu"] <= hi and lo < hi
    assert any(n.startswith("micro-batch not given: took 1") for n in doc["prediction"]["notes"])


def test_cli_given_inputs_are_not_assumed() -> None:
    res = runner.invoke(app, [*ARGS, "--micro-batch", "2", "--recompute", "full", "--interleave", "2", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["assumed"] == [] and doc["range"]["plans"] == 0
