"""Blackwell presets (DGX B200, GB200 NVL72): datasheet values with their sources, labelled unvalidated in
every prediction (text and --json), and the NVL72 rack as one 72-GPU NVLink domain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from warpforge.cli.plan import app
from warpforge.parallel.calibration import calibration_for
from warpforge.parallel.compute import groups, layer_cost
from warpforge.parallel.hardware import hardware_info, unvalidated_families
from warpforge.parallel.simulator import predict
from warpforge.parallel.specs import PlanConfig, load_cluster, load_model

runner = CliRunner()

# Per-GPU values worked out by hand from NVIDIA's published system totals (not read from the preset):
# DGX B200: FP8 72 PFLOPS sparse / 8 GPUs / 2 = 4,500 dense; 1,440 GB / 8 = 180; 64 TB/s / 8 = 8;
# 14.4 TB/s NVLink / 8 = 1.8 TB/s bidirectional = 900 GB/s one way; 400 Gb/s ConnectX-7 = 50 GB/s.
# GB200 NVL72: FP8 720 PFLOPS sparse / 72 / 2 = 5,000; 13.4 TB / 72 = 186; 576 TB/s / 72 = 8;
# 130 TB/s NVLink / 72 = 1.8 TB/s -> 900 GB/s one way.
EXPECTED = {
    "dgx-b200": dict(
        gpus_per_node=8,
        peak_tflops=2250,
        fp8_tflops=4500,
        hbm_gb=180,
        hbm_tbps=8.0,
        intra_gbps=900,
        inter_gbps=50,
        fp4=9000,
    ),
    "gb200-nvl72": dict(
        gpus_per_node=72,
        peak_tflops=2500,
        fp8_tflops=5000,
        hbm_gb=186,
        hbm_tbps=8.0,
        intra_gbps=900,
        inter_gbps=50,
        fp4=10000,
    ),
}
SOURCED = ("peak_tflops", "fp8_tflops", "fp4_tflops", "hbm_gb", "hbm_tbps", "intra_gbps", "inter_gbps", "gpus_per_node")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_preset_loads_with_datasheet_values_and_a_source_each(name: str) -> None:
    c, want = load_cluster(name), dict(EXPECTED[name])
    fp4 = want.pop("fp4")
    assert {k: getattr(c, k) for k in want} == pytest.approx(want)
    info = hardware_info(c)
    assert not info.validated and info.fp4_tflops == fp4
    assert set(info.sources) == set(SOURCED)
    assert all("nvidia" in s.lower() or "mlcommons" in s.lower() for s in info.sources.values())
    assert hardware_info(load_cluster(name, nodes=4)).validated is False  # resized: same hardware


def test_only_blackwell_is_unvalidated_hardware() -> None:
    assert unvalidated_families() == {"b200", "gb200"}
    for name in ("dgx-a100", "dgx-h100"):
        assert hardware_info(load_cluster(name)).validated


@pytest.mark.parametrize("cluster", ["b200", "gb200"])
def test_predictions_carry_the_unvalidated_label(cluster: str) -> None:
    p = predict(load_model("llama3-8b"), load_cluster(cluster), PlanConfig(tp=2, dp=4))
    assert p.hardware_validated is False
    assert p.summary()["hardware"].startswith("unvalidated")
    assert any(n.startswith("unvalidated:") for n in p.notes)
    h = predict(load_model("llama3-8b"), load_cluster("dgx-h100"), PlanConfig(tp=2, dp=4))
    assert h.hardware_validated and h.summary()["hardware"] == "validated"
    assert not any(n.startswith("unvalidated:") for n in h.notes)


def test_a_users_b200_file_is_unvalidated_too(tmp_path: Path) -> None:
    f = tmp_path / "my-b200.yaml"
    f.write_text(
        "gpu: B200-SXM-180GB\ngpus_per_node: 8\npeak_tflops: 2250\nhbm_gb: 180\nhbm_tbps: 8\n"
        "intra_gbps: 900\ninter_gbps: 50\n"
    )
    assert predict(load_model("llama3-8b"), load_cluster(f), PlanConfig(dp=8)).hardware_validated is False


def test_cli_predict_prints_the_label_in_text_and_json() -> None:
    args = ["predict", "--model", "llama3-8b", "--cluster", "gb200", "--tp", "2", "--dp", "36", "--global-batch", "576"]
    doc = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert doc["hardware"].startswith("unvalidated") and doc["prediction"]["hardware_validated"] is False
    text = runner.invoke(app, args).stdout
    assert "unvalidated: gb200" in " ".join(text.split())


def test_cli_search_json_labels_every_plan() -> None:
    res = runner.invoke(
        app, ["search", "--model", "llama3-8b", "--cluster", "b200", "--top", "2", "--no-store", "--json"]
    )
    assert res.exit_code == 0, res.stderr
    plans = json.loads(res.stdout)["plans"]
    assert plans and all(p["prediction"]["hardware_validated"] is False for p in plans)


def _ep_comm(cluster_name: str, **overrides: int) -> float:
    """Seconds of one MoE layer's expert-parallel dispatch + combine at EP 64."""
    m, c = load_model("deepseek-v3"), load_cluster(cluster_name, **overrides)
    plan = PlanConfig(ep=64, dp=64)
    return layer_cost(m, plan, c, calibration_for(c), moe=True).ep_comm


def test_nvl72_is_one_nvlink_domain() -> None:
    nvl = load_cluster("gb200-nvl72")
    assert nvl.total_gpus == 72
    g = groups(PlanConfig(tp=8, dp=8, ep=64, expert_tp=1), nvl.gpus_per_node)
    assert g["tp"].nodes == 1 and g["ep"].nodes == 1  # EP 64 folded over TP 8 x DP 8 stays on NVLink
    g = groups(PlanConfig(tp=64, dp=1), nvl.gpus_per_node)
    assert g["tp"].nodes == 1
    # The same 72 GPUs as nine 8-GPU nodes put EP 64 across InfiniBand: the rack's all-to-all is cheaper by
    # about the NVLink / NIC ratio (900 vs 50 GB/s), not equal.
    split = _ep_comm("gb200-nvl72", gpus_per_node=8, nodes=9)
    rack = _ep_comm("gb200-nvl72")
    assert rack * 4 < split
    # And on the rack it costs what an NVLink-only group of that size costs: raising the IB bandwidth
    # a hundredfold changes nothing.
    assert _ep_comm("gb200-nvl72", inter_gbps=5000) == pytest.approx(rack)
