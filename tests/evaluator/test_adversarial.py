"""Every adversarial fixture ends in its expected verdict and reason; honest controls pass.

CPU fixtures run on the ``interpret`` backend here; GPU-only fixtures (side streams, caches that cheat
only once timed, illegal memory accesses) run in the ``gpu``-marked test. The timing plumbing that
catches the GPU-only caches (fresh inputs per timed call, timed outputs rechecked) is also exercised on
the CPU through the interpreter, and the pure timing rules are tested on synthetic samples.
"""

from __future__ import annotations

import hashlib
import random
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from warpforge.evaluator import gpus
from warpforge.evaluator.judge.compare import lint_task
from warpforge.evaluator.judge.judge import hidden_shapes, perturb_dim
from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.adversarial import MANIFEST, fixture_job, load_manifest, run_fixture, run_manifest
from warpforge.evaluator.run.backend import get_backend
from warpforge.evaluator.run.stages import check_stage
from warpforge.evaluator.run.timing import BenchSettings, ab_stage, bench_stage, side_stream_finding, wall_clock_finding
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.supervisor import ChildPool, child_env
from warpforge.kernels.task import all_tasks, load_task_file
from warpforge.kernels.taskdef import shape_key
from warpforge.kernels.variant import load_variant

# The slow fixtures here run in CI too (`make test-ci`): they are what a verdict of ok rests on.
pytestmark = pytest.mark.ci

ROOT = Path(__file__).parent / "adversarial"
FIXTURES = load_manifest(ROOT / "manifest.json")
CPU = [f for f in FIXTURES if f.applies_to("interpret")]
PARAMS = {"BLOCK": 256, "num_warps": 4}
# Small timing runs in the interpreter: 2 warm-up + 60 timed calls (> the 48 honest calls of cache_by_count).
SMALL = BenchSettings(warmup=2, reps=60, input_sets=3, recheck=2, wall_calls=3)


@pytest.fixture(scope="module")
def backend():
    engine = get_backend("interpret", pool=ChildPool())
    yield engine
    engine.pool.close()


@pytest.fixture(scope="module")
def double():
    return load_task_file(ROOT / "task_double.py")


def test_manifest_is_complete() -> None:
    assert MANIFEST == ROOT / "manifest.json"
    names = [f.name for f in FIXTURES]
    assert len(names) == len(set(names))
    for f in FIXTURES:
        Verdict(f.expected_verdict)  # a closed-set verdict
        assert f.attack and f.defence, f.name
        assert f.variant.startswith("template:") or (ROOT / f.variant).is_file(), f.name
        assert (f.expected_verdict == "ok") == (f.expected_reasons == ("",)), f.name
    assert sum(f.expected_verdict == "ok" for f in FIXTURES) >= 2  # honest controls
    assert sum(f.gpu_only for f in FIXTURES) >= 4


# The default tier keeps the honest controls and every fixture the grammar refuses before anything runs (fast);
# the 57 that run candidate code in a sandboxed child (~6 min on 2 cores) are in the slow tier, which .ci/run
# runs too (`make test-ci`). So are the two softmax controls: the interpreter runs their rows over every
# adversarial input (65 s and 32 s on 2 cores, over half of all the controls' time).
SLOW_CONTROLS = {"control_softmax", "control_softmax_online"}


def _tier(f: Any) -> Any:
    runtime = f.expected_verdict != "ok" and (f.runtime_only or f.expected_verdict != "rejected")
    slow = runtime or f.name in SLOW_CONTROLS
    return pytest.param(f.name, marks=pytest.mark.slow) if slow else f.name


@pytest.mark.parametrize("name", [_tier(f) for f in CPU])
def test_fixture_on_interpreter(name: str, backend) -> None:
    fixture = next(f for f in CPU if f.name == name)
    if name.startswith("sandbox_") and not backend.pool.isolation.active:
        # Never run these unprotected (one would plant a .pth in this environment): fail loudly instead.
        pytest.fail(
            f"no OS sandbox here ({backend.pool.isolation.summary()}): install bubblewrap "
            "(apt-get install bubblewrap) and run as root or with user namespaces enabled"
        )
    outcome = run_fixture(backend, fixture, ROOT)
    assert outcome.passed, f"{outcome}: {outcome.message}"
    # The sandbox fixtures leave nothing behind: no .pth in the environment (it would run in this process).
    assert not (Path(sysconfig.get_paths()["purelib"]) / "warpforge_fixture_pwned.pth").exists()
    if name == "control_softmax":  # an interpreter ok says what it ran at benchmark scale and what it never ran
        assert any("M=1,N=32768" in note and "M up to 256" in note for note in outcome.unchecked), outcome.unchecked
        assert any("no full benchmark shape was run, e.g. M=8192,N=8192" in note for note in outcome.unchecked)


def test_every_builtin_task_passes_the_lint() -> None:
    for task in all_tasks():
        assert lint_task(task) is None, task.name
    assert "passes every check shape" in (lint_task(load_task_file(ROOT / "task_loose.py")) or "")


def test_hidden_shapes_are_new_small_and_unpredictable(double) -> None:
    known = {shape_key(s) for s in double.shapes + double.check_shapes}
    drawn = {shape_key(hidden_shapes(double, random.Random(seed))[0]) for seed in range(40)}
    assert not drawn & known and len(drawn) > 10
    for seed in range(40):
        value = perturb_dim(1000, random.Random(seed))
        assert 500 <= value <= 1202 and value % 2 and value % 16


def test_launch_budget_kills_a_hang_long_before_the_job_timeout(double) -> None:
    # On a GPU the "launch" budget is min(60 s, 10x the reference + 5 s); the mechanism is the same here.
    job = Job(double, load_variant(ROOT / "kernel_hang.py"), dict(PARAMS), timeout_s=120)
    with ChildPool() as pool:
        start = time.monotonic()
        failure, _ = check_stage(pool, job, "cpu", True, double.check_shapes, double.dtypes, budgets={"launch": 2.0})
    assert failure is not None and failure.verdict is Verdict.TIMEOUT and "launch" in failure.message
    assert time.monotonic() - start < 30


def test_memory_watchdog_contains_a_child_without_rlimit(tmp_path: Path) -> None:
    """CUDA children cannot take RLIMIT_AS; the parent's resident-memory watchdog kills them instead."""
    source = "hoard = [bytearray(128 << 20) for _ in range(128)]\n"  # 16 GiB at import, 128 MiB at a time
    digest = hashlib.sha256(source.encode()).hexdigest()  # the child imports only the bytes the judge hashed
    with (
        ChildPool(tmp_path) as pool,
        pool.running(
            {"mode": "space", "candidate": "candidate.py", "candidate_sha256": digest, "space": {}, "shapes": []},
            child_env(interpret=True),
            120,
            lambda d: (d / "candidate.py").write_bytes(source.encode()),
            rss_limit_bytes=1 << 30,
        ) as outcome,
    ):
        pass
    assert outcome.status == "oom" and (1 << 30) < outcome.peak_rss < (4 << 30)


@pytest.mark.parametrize("name", ["cache_by_count", "cache_by_pointer"])
def test_timed_calls_are_rechecked_with_fresh_inputs(name: str, double) -> None:
    """The GPU-only caches, caught by the same bench code run in the interpreter."""
    job = Job(double, load_variant(ROOT / f"{name}.py"), dict(PARAMS))
    with ChildPool() as pool:
        failure, _, _ = bench_stage(pool, job, "cpu", True, [{"N": 97}], torch.float32, SMALL)
    assert failure is not None and failure.reason == "timed_output_incorrect", failure and failure.message


@pytest.mark.slow
def test_honest_bench_and_ab_on_the_interpreter(double) -> None:
    job = Job(double, load_variant(ROOT / "control_double.py"), dict(PARAMS))
    other = Job(double, load_variant(ROOT / "control_double.py"), {"BLOCK": 128, "num_warps": 4})
    with ChildPool() as pool:
        failure, shapes, device = bench_stage(
            pool,
            job,
            "cpu",
            True,
            [{"N": 97}, {"N": 1000}],
            torch.float32,
            BenchSettings(warmup=1, reps=5, wall_calls=2),
        )
        assert failure is None and len(shapes) == 2 and device["name"] == "cpu"
        assert all(s.p50_ms and s.ref_p50_ms and s.speedup for s in shapes)
        failure, a, b = ab_stage(pool, job, other, "cpu", True, [{"N": 97}], torch.float32, rounds=4)
        assert failure is None and len(a) == len(b) == 4 and min(a + b) > 0
        bad = Job(double, load_variant(ROOT / "cache_by_shape.py"), dict(PARAMS))
        failure, _, _ = ab_stage(pool, job, bad, "cpu", True, [{"N": 97}], torch.float32, rounds=4)
        assert failure is not None and failure.reason == "timed_output_incorrect"


def test_timing_rules_on_synthetic_samples() -> None:
    assert side_stream_finding([0.005] * 9, [0.004] * 9) is None  # sync overhead on a 5 us kernel
    assert "another stream" in (side_stream_finding([0.005] * 9, [0.3] * 9) or "")
    assert side_stream_finding([1.0] * 9, [0.1] * 9) is None
    assert wall_clock_finding(0.004, 0.03) is None  # launch-bound: the parent sees overhead
    assert wall_clock_finding(1.0, 1.2) is None
    assert "tampered" in (wall_clock_finding(0.001, 1.0, calls=250) or "")
    assert wall_clock_finding(0.001, 1.0, calls=100) is None  # a 100 ms block proves nothing


def test_speed_of_light_prefers_measured_ceilings(monkeypatch: pytest.MonkeyPatch, double) -> None:
    table = [
        {
            "match": "Test GPU",
            "tensor_tflops": 1000.0,
            "fp32_tflops": 100.0,
            "hbm_tbps": 10.0,
            "measured": {"tensor_tflops": 500.0, "fp32_tflops": 50.0, "hbm_tbps": 5.0},
        }
    ]
    monkeypatch.setattr(gpus, "_table", lambda: table)
    peaks = gpus.peaks_for("NVIDIA Test GPU")
    assert peaks is not None and peaks.hbm_tbps == 5.0
    shape = double.shapes[0]
    # 2^20 fp32 in and out = 8 MB: 1.68 us at 5 TB/s (measured), not 0.84 us at 10 TB/s (data sheet).
    sol = peaks.sol_ms(double.flops(shape, torch.float32), double.bytes_moved(shape, torch.float32), torch.float32)
    assert sol == pytest.approx(8 * 2**20 / 5e12 * 1e3)


def test_speed_of_light_rejects_replayed_times(tmp_path: Path, double) -> None:
    from warpforge.evaluator.run.recorded_spaces import write_cache
    from warpforge.evaluator.run.recordings import recording_path

    variant = load_variant(ROOT / "control_double.py")
    shape = double.shapes[0]
    path = recording_path(tmp_path, "NVIDIA H200", double.name, variant.name, variant.source_hash, "float32", shape)
    write_cache(
        path,
        "NVIDIA H200",
        "double",
        {"shape": shape, "dtype": "float32", "reference_ms": [0.01] * 3},
        variant.space,
        [(dict(PARAMS), 1e-4, [1e-4] * 3)],
    )  # 0.1 us for 8 MB: 80 TB/s
    engine = get_backend("replay", root=tmp_path)
    try:
        result = engine.evaluate(Job(double, variant, dict(PARAMS)))
    finally:
        engine.close()
    assert result.verdict is Verdict.REJECTED and result.reason == "below_speed_of_light"


@pytest.mark.slow
def test_run_manifest_hands_each_outcome_over_as_it_ends() -> None:
    # gpu_check streams these: a GPU run stopped at its time limit keeps the fixtures that finished.
    seen: list[object] = []
    outcomes = run_manifest("interpret", names=["control_double", "constant_output"], on_outcome=seen.append)
    assert [o.fixture for o in outcomes] == ["control_double", "constant_output"]
    assert seen == outcomes and all(o.passed for o in outcomes), [str(o) for o in outcomes]


@pytest.mark.gpu
def test_every_fixture_on_the_gpu() -> None:
    outcomes = run_manifest("cuda")
    assert len(outcomes) == len(FIXTURES)
    missed = [f"{o}: {o.message} {o.notes}" for o in outcomes if not o.passed]
    assert not missed, "\n".join(missed)


@pytest.mark.gpu
def test_remeasure_interleaves_two_candidates(double) -> None:
    from warpforge.evaluator.run.stats import is_faster, speedup_ci

    fixture = next(f for f in FIXTURES if f.control)
    job = fixture_job(fixture, ROOT, "cuda")
    other = Job(double, load_variant(ROOT / "control_double.py"), {"BLOCK": 128, "num_warps": 4}, shapes=job.shapes)
    engine = get_backend("cuda")
    try:
        a, b = engine.remeasure(job, other)  # type: ignore[attr-defined]
    finally:
        engine.close()
    assert len(a) == len(b) == 30 and min(a + b) > 0
    point, lo, hi = speedup_ci(a, b)
    assert lo <= point <= hi
    assert not is_faster(a, a, paired=True)
