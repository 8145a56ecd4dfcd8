"""The transcribed MoE tables (presets/moe_*.yaml, nemo_moe_recipes.yaml): every row well-formed and sourced,
Megatron's FLOP count checked against the rows that publish both step time and TFLOP/s, and the plan
settings they introduced (recompute modules, the 1F1B all-to-all overlap) costed as declared."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from warpforge.parallel.calibration import prior_for
from warpforge.parallel.compute import layer_cost
from warpforge.parallel.memory import activation_bytes_per_layer
from warpforge.parallel.moe_tables import h100_cases, megatron_step_flops, published_cases, published_table
from warpforge.parallel.nemo import recipe_settings, recompute_of
from warpforge.parallel.specs import ModelSpec, PlanConfig, load_cluster

H100 = load_cluster("dgx-h100", nodes=2)
COMMIT = re.compile(r"\b[0-9a-f]{7,40}\b")
# Qwen3-235B-A22B as the model zoo's benchmarking config gives it (94 layers, 4096 wide, 64 heads of 128,
# 4 KV groups, 128 experts of 1536, top-8, vocabulary padded to 151936).
QWEN3_235B = ModelSpec(
    name="Qwen3-235B-A22B",
    layers=94,
    hidden=4096,
    heads=64,
    kv_heads=4,
    kv_channels=128,
    vocab=151936,
    seq=4096,
    activation="swiglu",
    tied_embeddings=False,
    experts=128,
    top_k=8,
    moe_ffn=1536,
    ffn=1536,
)


def _preset(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(
        resources.files("warpforge.parallel").joinpath("presets").joinpath(name).read_text()
    )
    return data


def test_published_rows_are_well_formed_and_sourced() -> None:
    table = published_table()
    for key, src in table["sources"].items():
        assert src["release"] and "github.com/" in src["url"] and COMMIT.search(src["url"]), key
    for name, m in table["models"].items():
        assert "source" in m and COMMIT.search(m["source"]), name
        assert m["layers"] > 0 and m["num_experts"] % 8 == 0 and 0 < m["top_k"] <= m["num_experts"], name
    allowed = {"alltoall", "deepep", "hybridep"}
    for i, r in enumerate(table["rows"]):
        where = f"row {i + 1}"
        assert r["source"] in table["sources"], where
        assert r["dispatcher"] in allowed, where
        for k in ("gpus", "seq", "tp", "cp", "ep", "etp", "pp", "vpp", "mbs", "gbs"):
            assert isinstance(r[k], int) and r[k] > 0, (where, k)
        assert r["gpus"] % (r["tp"] * r["pp"] * r["cp"]) == 0, where
        dp = r["gpus"] // (r["tp"] * r["pp"] * r["cp"])
        assert r["gbs"] % (dp * r["mbs"]) == 0, where
        assert (r["tp"] * r["cp"] * dp) % (r["etp"] * r["ep"]) == 0, where  # experts folded over TP x CP x DP
        assert "step_s" in r or "tflops" in r, where  # a measurement, as published
        assert all(float(r[k]) > 0 for k in ("step_s", "tflops") if k in r and r[k] != ""), where
        if "excluded" in r:
            assert isinstance(r["excluded"], str) and len(r["excluded"]) > 20, where
        else:
            recompute_of(str(r["recompute"]))  # a recompute set the planner can express


def test_modelzoo_rows_are_well_formed_and_sourced() -> None:
    raw = _preset("moe_modelzoo_h100.yaml")
    assert COMMIT.search(raw["source"]) and raw["tp_comm_overlap"] is False
    for i, r in enumerate(raw["rows"]):
        assert r["tp"] * r["cp"] * r["pp"] * r["dp"] == r["gpus"], i
        assert r["gbs"] == r["dp"] * r["mbs"] * r["ga"], i
        assert isinstance(r["a2a_overlap"], bool) and float(r["step_s"]) > 0, i


def test_recipe_settings_name_their_commit() -> None:
    raw = _preset("nemo_moe_recipes.yaml")
    for r in raw["rows"]:
        assert COMMIT.fullmatch(str(raw["commits"][r["release"]])), r
        assert r["dispatcher"] in {"alltoall", "deepep", "hybridep"} and isinstance(r["a2a_overlap"], bool), r
    assert recipe_settings()[("26.04", "Qwen3-235B-A22B")]["a2a_overlap"] is True


def test_megatron_flops_reproduce_the_published_rates() -> None:
    """The model zoo's 4K rows publish step time and Megatron's TFLOP/s both: the FLOP count that turns the
    long-context table's TFLOP/s into step times reproduces them within 1%."""
    for r in _preset("moe_modelzoo_h100.yaml")["rows"]:
        tflops = megatron_step_flops(QWEN3_235B, r["gbs"]) / (r["gpus"] * r["step_s"]) / 1e12
        assert tflops == pytest.approx(r["tflops"], rel=0.01), r


def test_recompute_cells() -> None:
    assert recompute_of("") == ("none", None)
    assert recompute_of("full") == ("full", None)
    assert recompute_of("core_attn") == ("selective", None)
    assert recompute_of("layernorm, moe") == ("selective", ("layernorm", "moe"))
    with pytest.raises(KeyError):
        recompute_of("mla_up_proj")


def test_moe_recompute_and_a2a_overlap_are_costed() -> None:
    cal = prior_for(H100).model_copy(update={"ep_overlap": 0.4})
    base = PlanConfig(tp=2, dp=8, ep=16, expert_tp=1, recompute="selective", recompute_modules=("layernorm",))
    plain = layer_cost(QWEN3_235B, base, H100, cal, moe=True)
    moe_rc = layer_cost(
        QWEN3_235B, base.model_copy(update={"recompute_modules": ("layernorm", "moe")}), H100, cal, moe=True
    )
    # Replaying the MoE layer costs at least its expert GEMMs and a second dispatch/combine.
    assert moe_rc.recompute > plain.recompute + plain.ep_comm / 2
    overlapped = layer_cost(QWEN3_235B, base.model_copy(update={"moe_a2a_overlap": True}), H100, cal, moe=True)
    assert overlapped.ep_comm == pytest.approx(plain.ep_comm * 0.6)
    # The replayed MoE layer keeps only its input (counted with the layer's other inputs).
    keep = activation_bytes_per_layer(QWEN3_235B, base, moe=True)
    assert (
        activation_bytes_per_layer(QWEN3_235B, base.model_copy(update={"recompute_modules": ("moe",)}), moe=True)
        < keep / 2
    )


def test_plan_keys_unchanged_by_the_new_defaults() -> None:
    assert "moe_a2a_overlap" not in PlanConfig().key() and "recompute_modules" not in PlanConfig().key()
    assert "a2a-overlap" in PlanConfig(ep=8, dp=8, moe_a2a_overlap=True).short()


def test_published_rows_become_cases(shared_parallel: Path) -> None:
    if not (shared_parallel / "nemo_models.csv").is_file():
        pytest.skip("nemo_models.csv not found")
    cases, excluded = published_cases(shared_parallel)
    table = published_table()
    assert len(cases) + len(excluded) == len(table["rows"])
    assert {c.release for c in cases} == {"modelzoo", "mbridge-skills"}
    longctx = sorted((c for c in cases if c.model.seq > 4096), key=lambda c: c.model.seq)
    # 16K-128K with CP 1-8: the step time grows faster than the tokens (attention is quadratic).
    assert [c.plan.cp for c in longctx] == [1, 2, 4, 8]
    steps = [c.measured_s for c in longctx]
    assert all(b > 2 * a for a, b in zip(steps, steps[1:]))
    assert all(c.category == "moe" and c.measured_s > 0 for c in cases)
    # Every H100 case stays unique by label (the report keys rows by it).
    labels = [c.label for c in h100_cases(shared_parallel)[0]]
    assert len(labels) == len(set(labels))
