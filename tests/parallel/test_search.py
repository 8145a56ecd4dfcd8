"""Plan search: the llama3-70b / 8 x DGX H100 answer, validity, enqueueing, Optuna, no-fit errors."""

from __future__ import annotations

import pytest

from warpforge.parallel import NoFeasiblePlanError, PlanConfig, check_plan, load_cluster, load_model
from warpforge.parallel.search import candidate_plans, search_plans, space_size

L70 = load_model("llama3-70b")
H100x8 = load_cluster("dgx-h100", nodes=8)


def test_llama3_70b_on_8_dgx_h100() -> None:
    # No wall-clock assertion (shared machine); speed is measured in benchmarks/results/planner_search_speed.txt.
    res = search_plans(L70, H100x8)
    assert res.method == "exhaustive" and res.evaluated == res.space_size > 1000
    assert len(res.plans) == 5
    for r in res.plans:
        p = r.prediction
        assert p.fits and p.peak_mem_gb <= 0.95 * p.hbm_gb
        assert p.plan.gpus == 64 and r.why and "s/step" in r.why[0]
        check_plan(L70, H100x8, p.plan)
    times = [r.prediction.step_time_s for r in res.plans]
    assert all(a <= b * (1 + 1e-9) for a, b in zip(times, times[1:]))  # ranked (ties within rounding)
    layouts = {
        (r.prediction.plan.tp, r.prediction.plan.cp, r.prediction.plan.pp) + (r.prediction.plan.dp,) for r in res.plans
    }
    assert len(layouts) == 5  # diverse: one plan per layout
    assert res.plans[0].why[2].startswith("beats #")


def test_candidates_are_valid_and_use_all_gpus() -> None:
    c = load_cluster("dgx-h100", nodes=2)
    m = load_model("llama3-8b")
    plans = list(candidate_plans(m, c, 64))
    assert len(plans) == space_size(m, c, 64) > 100
    for p in plans[::7]:
        assert p.gpus == 16
        check_plan(m, c, p)


def test_enqueued_plans_are_evaluated_and_reported() -> None:
    proposals = [
        PlanConfig(tp=8, pp=4, dp=2),
        PlanConfig(tp=3, pp=1, dp=1),
        PlanConfig(tp=1, pp=1, dp=64, recompute="none", zero=0),
    ]
    res = search_plans(L70, H100x8, enqueue=proposals, top=3)
    status = [e.status for e in res.enqueued]
    assert status == ["ranked", "invalid", "does_not_fit"]
    assert "heads 64 not divisible by TP 3" in res.enqueued[1].message
    assert "GiB" in res.enqueued[2].message
    shown = [r for r in res.plans if r.source == "enqueued"]
    assert len(shown) == 1 and shown[0].prediction.plan.tp == 8 and shown[0].rank > 3
    assert res.enqueued[0].message.startswith(f"rank {shown[0].rank} of")


def test_optuna_search_for_large_spaces() -> None:
    mix, c = load_model("mixtral-8x7b"), load_cluster("dgx-h100", nodes=4)
    assert space_size(mix, c, mix.default_global_batch()) > 20_000  # too many to enumerate
    proposal = PlanConfig(tp=2, pp=2, dp=8, ep=8, recompute="full")
    res = search_plans(mix, c, trials=80, top=3, enqueue=[proposal], seed=1)
    assert res.method == "optuna" and res.evaluated <= 80 + 1
    assert res.plans and all(r.prediction.fits for r in res.plans)
    assert res.enqueued[0].status == "ranked"
    exhaustive_small = search_plans(
        load_model("llama3-8b"), load_cluster("dgx-a100"), method="optuna", trials=60, seed=0
    )
    assert exhaustive_small.method == "optuna" and exhaustive_small.plans


def test_no_plan_fits_is_a_clear_failure() -> None:
    with pytest.raises(NoFeasiblePlanError, match="no plan of llama3-405b fits.*add nodes") as exc:
        search_plans(load_model("llama3-405b"), load_cluster("dgx-a100"))
    assert exc.value.exit_code == 1 and "\n" not in str(exc.value)


def test_enqueued_plan_is_labelled_in_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    # "[enqueued]" was once swallowed as Rich markup, so proposed plans looked like the search's own.
    from warpforge.cli.plan_render import print_search

    res = search_plans(L70, H100x8, enqueue=[PlanConfig(tp=8, pp=4, dp=2)], top=3)
    print_search(res, None, None, 0)
    out = capsys.readouterr().out
    shown = [r for r in res.plans if r.source == "enqueued"]
    assert len(shown) == 1
    assert "[enqueued]" in out
