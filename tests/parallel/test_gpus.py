"""Hardware facts the planner knows per GPU model, and what it says about power / clock fields."""

from __future__ import annotations

from typing import Any

import pytest

from warpforge.parallel.gpus import gpu_model
from warpforge.parallel.simulator import predict
from warpforge.parallel.specs import PlanConfig, load_cluster, load_model


@pytest.mark.parametrize(
    ("name", "tdp", "form", "hbm"),
    [
        # NVIDIA's datasheets: H100 SXM 700 W HBM3, H100 PCIe 350 W HBM2e, H100 NVL 400 W HBM3, A100 SXM4 400 W,
        # A100 PCIe 80GB 300 W, H200 SXM 700 W HBM3e; Grand Teton's 96 GB H100 is the SXM part with HBM2e.
        ("H100-SXM5-80GB", 700, "SXM", "HBM3"),
        ("H100 PCIe", 350, "PCIe", "HBM2e"),
        ("H100 NVL", 400, "NVL", "HBM3"),
        ("H100-SXM-96GB-HBM2e", 700, "SXM", "HBM2e"),
        ("A100-SXM4-80GB", 400, "SXM", "HBM2e"),
        ("A100 PCIe 80GB", 300, "PCIe", "HBM2e"),
        ("H200-SXM-141GB", 700, "SXM", "HBM3e"),
        ("GB200-186GB", 1200, "SXM", "HBM3e"),
    ],
)
def test_gpu_model_facts(name: str, tdp: float, form: str, hbm: str) -> None:
    m = gpu_model(name)
    assert m is not None and (m.tdp_w, m.form, m.hbm) == (tdp, form, hbm)


def test_power_limit_derates_without_a_tdp_in_the_file() -> None:
    """torchtitan's Grand Teton hosts: 'H100 SXM ... 500W power limit', no TDP on the page."""
    typed = load_cluster("dgx-h100", power_limit_w=500)
    assert typed.tdp_w is None
    assert typed.compute_scale() == pytest.approx((500 / 700) ** 0.30)
    m, plan = load_model("llama3-8b"), PlanConfig(dp=8, global_batch=64)
    with_tdp = load_cluster("dgx-h100", power_limit_w=500, tdp_w=700)
    assert predict(m, typed, plan).step_time_s == predict(m, with_tdp, plan).step_time_s
    assert any("500 W of 700 W" in n and "TDP, known" in n for n in predict(m, typed, plan).notes)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        (dict(gpu="MI300X", power_limit_w=500), "power_limit_w 500 W not used"),
        (dict(tdp_w=700), "tdp_w 700 W not used"),
        (dict(boost_clock_mhz=1980), "boost_clock_mhz not used"),
        (dict(sustained_clock_mhz=1500, boost_clock_mhz=1980, power_limit_w=500), "power_limit_w / tdp_w not used"),
    ],
)
def test_unused_power_fields_are_said_in_one_line(fields: dict[str, Any], says: str) -> None:
    c = load_cluster("dgx-h100", **fields)
    notes = predict(load_model("llama3-8b"), c, PlanConfig(dp=8, global_batch=64)).notes
    hits = [n for n in notes if says in n]
    assert len(hits) == 1 and "\n" not in hits[0] and hits[0].startswith("warning:")


def test_unknown_gpu_power_limit_does_not_derate() -> None:
    assert load_cluster("dgx-h100", gpu="MI300X", family="h100", power_limit_w=500).compute_scale() == 1.0
