"""The replay backend: recorded GPU times, labelled; absent = constraint violation; failures cost a trial."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.backend import get_backend, resolve_backend_name
from warpforge.evaluator.run.recorded_spaces import write_cache
from warpforge.evaluator.run.recordings import recording_path
from warpforge.evaluator.sandbox.job import Job
from warpforge.kernels.task import load_task_file
from warpforge.kernels.variant import load_variant

PLANTED = Path(__file__).parent / "planted"
# A fixture recording: these numbers only exercise the lookup; the GPU name says they are synthetic.
GPU = "Synthetic Test GPU"


def record(root: Path, gpu: str = GPU, base_ms: float = 0.05) -> None:
    task = load_task_file(PLANTED / "task_double.py")
    variant = load_variant(PLANTED / "good.py")
    shape = task.shapes[0]
    records = []
    for block in (128, 256, 1024):
        for warps in (2, 4):
            if block < 32 * warps:
                continue  # outside constraints: never recorded
            if block == 1024 and warps == 2:
                records.append(({"BLOCK": block, "num_warps": warps}, "RuntimeFailedConfig", []))
                continue
            t = base_ms * (1 + abs(block - 256) / 256) * (1.1 if warps == 2 else 1.0)
            records.append(({"BLOCK": block, "num_warps": warps}, t, [t * 0.98, t, t * 1.02]))
    path = recording_path(root, gpu, task.name, variant.name, variant.source_hash, "float32", shape)
    write_cache(
        path,
        gpu,
        "double",
        {"shape": shape, "dtype": "float32", "reference_ms": [0.09, 0.1, 0.11], "recorded_at": "fixture"},
        variant.space,
        records,
    )


@pytest.fixture
def backend(tmp_path: Path):
    record(tmp_path)
    engine = get_backend("replay", root=tmp_path)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def task():
    return load_task_file(PLANTED / "task_double.py")


def job(task, params: dict) -> Job:
    return Job(task, load_variant(PLANTED / "good.py"), params)


def test_recorded_time_is_labelled_with_its_gpu(backend, task) -> None:
    result = backend.evaluate(job(task, {"BLOCK": 256, "num_warps": 4}))
    assert result.verdict is Verdict.OK
    assert result.timing is not None and result.timing.source == "recorded" and result.timing.gpu == GPU
    assert result.objective_ms == pytest.approx(0.05)
    assert result.speedup == pytest.approx(2.0)


def test_absent_configuration_is_invalid_and_failure_is_a_failure(backend, task) -> None:
    assert backend.evaluate(job(task, {"BLOCK": 128, "num_warps": 8})).verdict is Verdict.INVALID_CONFIG
    failed = backend.evaluate(job(task, {"BLOCK": 1024, "num_warps": 2}))
    assert failed.verdict is Verdict.RUNTIME_ERROR and failed.reason == "recorded_runtime_failure"


def test_faster_than_physics_is_rejected(tmp_path: Path, task) -> None:
    # 2^20 fp32 elements in and out is 8 MB: at 4.8 TB/s an H200 needs at least 1.7 us.
    record(tmp_path, gpu="NVIDIA H200", base_ms=1e-4)
    engine = get_backend("replay", root=tmp_path)
    result = engine.evaluate(job(task, {"BLOCK": 256, "num_warps": 4}))
    assert result.verdict is Verdict.REJECTED and result.reason == "below_speed_of_light"


def test_no_recording_is_unsupported(tmp_path: Path, task) -> None:
    engine = get_backend("replay", root=tmp_path)
    assert engine.evaluate(job(task, {"BLOCK": 256, "num_warps": 4})).verdict is Verdict.UNSUPPORTED


def test_auto_prefers_recordings_without_a_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARPFORGE_RECORDINGS", str(tmp_path))
    assert resolve_backend_name("auto", "double") == "interpret"
    record(tmp_path)
    assert resolve_backend_name("auto", "double") == "replay"


@pytest.mark.slow  # ~15-50 s on 2 cores: the slow tier (`make test-slow`)
def test_campaign_ranks_by_recorded_times(tmp_path: Path) -> None:
    record(tmp_path / "rec")
    env = {**os.environ, "WARPFORGE_RECORDINGS": str(tmp_path / "rec"), "WARPFORGE_DB": f"sqlite:///{tmp_path}/wf.db"}
    env.pop("TRITON_INTERPRET", None)
    cmd = [sys.executable, "-m", "warpforge.cli"]
    run = subprocess.run(
        [
            *cmd,
            "run",
            str(PLANTED / "task_double.py"),
            "--variant-file",
            str(PLANTED / "good.py"),
            "--trials",
            "6",
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)["tasks"][0]
    assert summary["backend"] == "replay" and summary["best_params"] == {"BLOCK": 256, "num_warps": 4}
    assert f"recorded times from {GPU}" in summary["timing"]
    best = subprocess.run([*cmd, "best", "double", "--json"], env=env, capture_output=True, text=True, timeout=300)
    rows = json.loads(best.stdout)
    assert rows[0]["gpu"] == GPU and rows[0]["timing_source"] == "recorded"
