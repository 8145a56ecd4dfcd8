"""``warpforge optimize`` as a user runs it, CPU only: a 2-layer Qwen3 config (not Llama) in, a patched model
proven equal out. The search, the export, the patch and the proof are all real (the proof runs the exported
Triton kernels in the interpreter, in its own process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# ~8 min on 2 cores (four one-trial campaigns, then the proof in the interpreter): past pytest-timeout's 600 s
# default under CI's load
pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(3000)]

LAYERS = 2


def _config(folder: Path) -> None:
    from transformers import Qwen3Config

    # hidden 64; head_dim 64 (the attention task's verified head sizes are 64 and 128)
    Qwen3Config(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=LAYERS,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        vocab_size=512,
        max_position_embeddings=128,
    ).save_pretrained(folder)


def test_optimize_a_qwen3_config_patches_and_proves(tmp_path: Path) -> None:
    model_dir = tmp_path / "qwen3-tiny"
    _config(model_dir)
    out = tmp_path / "opt"
    env = dict(os.environ, WARPFORGE_DB=f"sqlite:///{tmp_path / 'wf.db'}", COLUMNS="80")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "warpforge.cli",
            "optimize",
            str(model_dir),
            "--batch",
            "1",
            "--seq",
            "32",
            "--trials",
            "5",
            "--out",
            str(out),
            "--cluster",
            "dgx-h100",
            "--plan-seq",
            "4096",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=3000,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    checks = report["checks"]
    assert checks["outputs_match"] and checks["losses_match"] and checks["grads_match"], checks
    assert len(checks["losses_before"]) == 3
    regions = report["regions"]
    assert abs(sum(r["share"] for r in regions) - 1.0) < 1e-3
    # per layer: the input and post-attention norms, the query and key head norms; then the final norm
    norms = [r for r in regions if r["kind"] == "normalization" and r["task"] and r["task"].startswith("rmsnorm")]
    assert len(norms) == 4 * LAYERS + 1
    assert all(r["patched"] for r in norms)
    patched_kinds = {r["kind"] for r in regions if r["patched"]}
    assert {"normalization", "loss", "attention", "gemm", "embedding"} <= patched_kinds, patched_kinds
    linears = [r for r in regions if r["task"] and r["task"].startswith("linear")]
    assert len(linears) == 7 * LAYERS + 1 and all(r["patched"] for r in linears)  # q k v o gate up down; lm_head
    # the rotary embedding is a helper function of the model's file (apply_rotary_pos_emb): a region per layer,
    # two rotary kernels each (queries at 2 heads, keys at 1)
    rotary = [r for r in regions if r["kind"] == "rotary"]
    assert len(rotary) == LAYERS and all(r["patched"] and "apply_rotary_pos_emb" in r["name"] for r in rotary)
    assert report["coverage"] >= 0.90, report["coverage"]  # the target: 90% of the step has a task
    plans = report["plans"]
    assert plans["model"]["layers"] == LAYERS and plans["model"]["seq"] == 4096 and plans["gpus"] == 8
    assert plans["plans"] and all(p["fits"] in ("yes", "uncertain") for p in plans["plans"])
    embeds = [r for r in regions if r["task"] and r["task"].startswith("embedding")]
    assert [r["name"] for r in embeds] == ["lm.model.embed_tokens"] and embeds[0]["patched"]
    assert report["speedup"]["measured"] is None and report["speedup"]["estimated"] is not None
    assert "estimate" in report["speedup"]["basis"]
    assert (out / "report.md").read_text().startswith("# warpforge optimize")
