"""Spec loading: presets, aliases, files, parameter counts and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from warpforge.parallel import SpecError, load_cluster, load_model, preset_names

MODELS = ["gpt3-175b", "llama3-8b", "llama3-70b", "llama3-405b", "mixtral-8x7b", "deepseek-v3-like"]
CLUSTERS = ["dgx-a100", "dgx-h100", "dgx-h200", "h200"]


@pytest.mark.parametrize("name", MODELS)
def test_model_presets_load(name: str) -> None:
    m = load_model(name)
    assert m.name == name and m.hidden % m.heads == 0 and m.layers > 0


@pytest.mark.parametrize("name", CLUSTERS)
def test_cluster_presets_load(name: str) -> None:
    c = load_cluster(name)
    assert c.total_gpus == 8 and c.peak_tflops > 0 and c.inter_gbps < c.intra_gbps


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [
        ("gpt3-175b", 175.2, 175.2),
        ("llama3-8b", 8.03, 8.03),
        ("llama3-70b", 70.55, 70.55),
        ("llama3-405b", 405.85, 405.85),
        ("mixtral-8x7b", 46.70, 12.88),  # Mistral's figures: 46.7B total, 12.9B active
        ("deepseek-v3-like", 672.1, 38.7),  # DeepSeek-V3: 671B total, 37B active (with MLA)
    ],
)
def test_parameter_counts_match_published(name: str, total_b: float, active_b: float) -> None:
    m = load_model(name)
    assert m.num_params() / 1e9 == pytest.approx(total_b, rel=0.01)
    assert m.active_params() / 1e9 == pytest.approx(active_b, rel=0.01)


def test_aliases_and_nodes_override() -> None:
    assert load_model("llama-3-70b") == load_model("llama3-70b")
    assert load_cluster("h100", nodes=8).total_gpus == 64
    assert {"dgx-h200", "h200", "dgx-a100", "dgx-h100"} <= set(preset_names("cluster"))


def test_spec_files_yaml_and_json(tmp_path: Path) -> None:
    y = tmp_path / "tiny.yaml"
    y.write_text("layers: 4\nhidden: 256\nheads: 4\nvocab: 1000\nseq: 128\nactivation: swiglu\nkv_heads: 2\n")
    m = load_model(y)
    assert (m.name, m.n_kv_heads, m.ffn_dim) == ("tiny", 2, 1024)
    j = tmp_path / "box.json"
    j.write_text(
        json.dumps(
            {
                "gpu": "X",
                "gpus_per_node": 4,
                "nodes": 2,
                "peak_tflops": 100,
                "hbm_gb": 24,
                "hbm_tbps": 1,
                "intra_gbps": 50,
                "inter_gbps": 10,
            }
        )
    )
    c = load_cluster(j)
    assert (c.name, c.total_gpus, c.gpu_family) == ("box", 8, "default")


def test_zero_gpu_cluster_is_a_one_line_error(tmp_path: Path) -> None:
    f = tmp_path / "empty.yaml"
    f.write_text("gpu: X\ngpus_per_node: 0\npeak_tflops: 1\nhbm_gb: 1\nhbm_tbps: 1\nintra_gbps: 1\ninter_gbps: 1\n")
    with pytest.raises(SpecError, match="0 GPUs") as exc:
        load_cluster(f)
    assert "\n" not in str(exc.value) and exc.value.exit_code == 2
    with pytest.raises(SpecError, match="0 GPUs"):
        load_cluster("dgx-h100", nodes=0)


def test_unknown_and_invalid_specs(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="unknown model 'gpt5'.*llama3-70b"):
        load_model("gpt5")
    with pytest.raises(SpecError, match="does not exist"):
        load_model(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("layers: 4\nhidden: 250\nheads: 4\nvocab: 10\nseq: 8\n")
    with pytest.raises(SpecError, match="not divisible by heads") as exc:
        load_model(bad)
    assert "\n" not in str(exc.value)
    with pytest.raises(SpecError, match="top_k"):
        load_model("mixtral-8x7b", top_k=9)
