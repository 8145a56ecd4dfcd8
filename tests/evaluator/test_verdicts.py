"""Each planted bad variant ends in its verdict and reason; the honest control passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.backend import get_backend
from warpforge.evaluator.run.stages import space_stage
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.supervisor import ChildPool
from warpforge.kernels.task import load_task_file
from warpforge.kernels.variant import VariantError, load_variant

PLANTED = Path(__file__).parent / "planted"
PARAMS = {"BLOCK": 256, "num_warps": 4}

CASES = {
    "good": (Verdict.OK, ""),
    "wrong": (Verdict.INCORRECT, "wrong_values"),
    "exception": (Verdict.RUNTIME_ERROR, "exception"),
    "crash": (Verdict.CRASHED, "process_died"),
    "hang": (Verdict.TIMEOUT, "timed_out"),
    "mutate": (Verdict.REJECTED, "input_mutated"),
    "return_input": (Verdict.REJECTED, "output_aliases_input"),
    "partial": (Verdict.INCORRECT, "partial_output"),
    "torch_op": (Verdict.REJECTED, "torch_compute_call"),
    "fork_escape": (Verdict.REJECTED, "process_spawn"),
    "missing_import": (Verdict.COMPILE_ERROR, "import_failed"),
    "compile_error": (Verdict.COMPILE_ERROR, "compile_failed"),
    "no_valid_config": (Verdict.INVALID_CONFIG, "constraints_false"),
    "nan_output": (Verdict.INCORRECT, "non_finite_output"),
}


@pytest.fixture(scope="module")
def backend():
    engine = get_backend("interpret", pool=ChildPool())
    yield engine
    engine.pool.close()


@pytest.fixture(scope="module")
def task():
    return load_task_file(PLANTED / "task_double.py")


@pytest.mark.parametrize("name", sorted(CASES))
def test_planted_variant_verdict(name: str, backend, task) -> None:
    verdict, reason = CASES[name]
    timeout = 8.0 if name == "hang" else 120.0
    # The core static rules: these planted variants test run-time verdicts (the strict rules would stop
    # crash, fork_escape and missing_import at their imports first; test_sandbox.py covers those rules).
    job = Job(task, load_variant(PLANTED / f"{name}.py"), dict(PARAMS), timeout_s=timeout, static_rules="core")
    result = backend.evaluate(job)
    assert result.verdict is verdict, result.message
    assert result.reason == reason
    assert result.message or verdict is Verdict.OK


def test_good_variant_reports_checks_and_resources(backend, task) -> None:
    result = backend.evaluate(Job(task, load_variant(PLANTED / "good.py"), dict(PARAMS)))
    assert result.verdict is Verdict.OK
    # 3 check shapes x 2 dtypes x 2 seeds, plus one hidden shape x 2 dtypes, each compared against the
    # float64 reference (and, on the first evaluation of a source here, its benchmark-scale cases)
    assert len([c for c in result.checked if "benchmark scale" not in c and "perturbed" not in c]) == 14
    assert sum("under perturbed arithmetic (seeds " in c for c in result.checked) == 1  # the pair, two seeds
    assert sum("hidden" in label for label in result.checked) == 2
    assert not result.measured and result.timing is None  # the interpreter never times
    assert result.resources and result.resources[0].registers and result.resources[0].registers > 0
    assert result.resources[0].target == "sm_90"


def test_hang_is_killed_within_timeout(backend, task) -> None:
    # core rules: the grammar refuses the `while` loop before anything runs; this tests the deadline
    result = backend.evaluate(
        Job(task, load_variant(PLANTED / "hang.py"), dict(PARAMS), timeout_s=5.0, static_rules="core")
    )
    assert result.verdict is Verdict.TIMEOUT
    assert result.wall_s is not None and result.wall_s < 30


def test_space_enumeration_applies_constraints(backend, task) -> None:
    failure, configs = space_stage(backend.pool, Job(task, load_variant(PLANTED / "good.py"), {}))
    assert failure is None
    assert {"BLOCK": 128, "num_warps": 4} in configs and len(configs) == 6
    failure, configs = space_stage(backend.pool, Job(task, load_variant(PLANTED / "no_valid_config.py"), {}))
    assert failure is None and configs == []


def test_malformed_space_is_a_clear_error() -> None:
    with pytest.raises(VariantError, match="SPACE must be a literal"):
        load_variant(PLANTED / "malformed_space.py")


def test_unknown_parameter_is_invalid_config(backend, task) -> None:
    result = backend.evaluate(Job(task, load_variant(PLANTED / "good.py"), {"BLOCK": 256, "TYPO": 1}))
    assert result.verdict is Verdict.INVALID_CONFIG and result.reason == "unknown_parameter"


# torch's CUDA errors all end with this hint; only the first line says what happened.
_DSA_HINT = (
    "\nCUDA kernel errors might be asynchronously reported at some other API call.\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)


@pytest.mark.parametrize(
    ("first_line", "kind"),
    [
        ("CUDA error: device-side assert triggered", "device_assert"),
        ("CUDA error: an illegal memory access was encountered", "illegal_memory_access"),
        ("CUDA error: unspecified launch failure", "runtime"),
        ("CUDA error: misaligned address", "runtime"),
    ],
)
def test_cuda_errors_are_classified_by_what_happened_not_by_torchs_hint(first_line: str, kind: str) -> None:
    from warpforge.evaluator.sandbox.child.common import error_info

    assert error_info(RuntimeError(first_line + _DSA_HINT), "run")["kind"] == kind
