"""Validation metrics within the targets on held-out rows (skipped without ../shared/parallel)."""

from __future__ import annotations

from pathlib import Path

import pytest

from warpforge.parallel import predict
from warpforge.parallel.calibration import calibration_for, prior_for
from warpforge.parallel.specs import load_cluster
from warpforge.parallel.validation import (
    FIT_PARAMS,
    TRAIN_EVERY,
    Case,
    fit_calibration,
    load_cases,
    mape,
    spearman,
)

CAL = calibration_for(load_cluster("dgx-a100"))


def _pred(cases: list[Case]) -> tuple[list[float], list[float]]:
    pred = [predict(c.model, c.cluster, c.plan, CAL).step_time_s for c in cases]
    return pred, [c.measured_s for c in cases]


def test_metric_helpers() -> None:
    assert mape([1.1, 0.8], [1.0, 1.0]) == pytest.approx(0.15)
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)


def test_packaged_calibration_comes_from_the_declared_split() -> None:
    assert f"index % {TRAIN_EVERY} == 0" in CAL.source
    prior = prior_for(load_cluster("dgx-a100"))
    # Only the declared parameters moved away from the prior.
    for name in ("gemm_eff", "attn_eff", "kernel_us", "intra_bw_eff", "inter_bw_eff"):
        assert getattr(CAL, name) == getattr(prior, name)
    assert any(getattr(CAL, n) != getattr(prior, n) for n in FIT_PARAMS)


def test_published_tables_stay_where_they_were(shared_parallel: Path) -> None:
    """The A100 figures do not drift while H100/FP8/MoE modelling grows (SC'21 <= 7%: 6.8%). Korthikanti
    <= 4.5%: 2.9% until sequence parallelism's backward was modelled as Megatron runs it (the input
    re-gather and input-gradient reduce-scatter of QKV / fc1 under their dgrad / wgrad GEMMs), 4.0% since:
    its SP + selective rows went from -5% to -9% fast, so Megatron of 2022 on A100 hides less of them
    than the GEMMs could cover (NCCL's kernels share the SMs); the guard records the move, it is not a fit."""
    cases = load_cases(shared_parallel)
    assert not any(c.train for c in cases["megatron_sc21"] + cases["korthikanti_table5"])  # all held out
    for ds, limit in (("megatron_sc21", 0.07), ("korthikanti_table5", 0.045)):
        pred, meas = _pred(cases[ds])
        assert mape(pred, meas) <= limit, ds


def test_vtrain_held_out_rank_correlation(shared_parallel: Path) -> None:
    cases = load_cases(shared_parallel)["vtrain"]
    train = [c for c in cases if c.train]
    held = [c for c in cases if not c.train]
    assert (len(train), len(held)) == (360, 1080)
    pred, meas = _pred(held)
    assert spearman(pred, meas) >= 0.8
    assert mape(pred, meas) <= 0.095  # issue 18's guard: 9.2% before it


def test_fit_uses_only_what_it_is_given(shared_parallel: Path) -> None:
    """A fit on a small slice of the training split runs, stays in bounds and improves that slice."""
    train = [c for c in load_cases(shared_parallel)["vtrain"] if c.train][:40]
    prior = prior_for(load_cluster("dgx-a100"))

    def fn(c: Case, cal: object) -> float:
        return predict(c.model, c.cluster, c.plan, cal).step_time_s  # type: ignore[arg-type]

    fitted = fit_calibration(train, prior, fn, ["host_us"])
    before = mape([fn(c, prior) for c in train], [c.measured_s for c in train])
    after = mape([fn(c, fitted) for c in train], [c.measured_s for c in train])
    assert after < before and 0 <= fitted.host_us <= 200


def _benchmark_main() -> object:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "planner_validation.py"
    spec = importlib.util.spec_from_file_location("planner_validation", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_benchmark_exits_cleanly_without_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main = _benchmark_main()
    assert main(["--shared", str(tmp_path)]) == 0  # type: ignore[operator]
    out = capsys.readouterr().out
    assert "skipped" in out and str(tmp_path) in out


@pytest.mark.slow
@pytest.mark.long
def test_benchmark_meets_a100_targets_and_reports_h100(
    shared_parallel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The full script: A100 fit on the training split, held-out tables, memory (all A100 targets met),
    then the H100 tables with a verdict per category; the exit code reports the missed H100 MoE target."""
    main = _benchmark_main()
    code = main(["--shared", str(shared_parallel)])  # type: ignore[operator]
    out = capsys.readouterr().out
    assert "A100 targets: all met" in out and "packaged calibration matches this fit" in out
    for fold in ("leave-one-release-out", "leave-one-model-out"):
        for cat in ("dense-fp8", "moe"):
            assert any(line.startswith(fold) and f" {cat} " in line for line in out.splitlines())
    assert code == (0 if "TARGETS NOT MET" not in out else 1)
