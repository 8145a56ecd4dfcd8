"""The child's report is typed before the trusted side reads it (protocol.py), and walls fail closed.

The child runs candidate code, so its report is whatever that code writes: each mode's report is validated
against its TypedDict as it arrives (supervisor.ChildPool.run), a misfit being ``rejected: malformed_report``;
a report whose seccomp is not the profile the trusted side expects is ``crashed: wall_not_installed`` (the
evaluator's error, never ``ok``). The manifest fixtures forge_* prove the same end to end through a child.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.stages import child_failure, space_stage
from warpforge.evaluator.sandbox.child.__main__ import seccomp_profile, wall_refusal
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.protocol import check_report, validate_report
from warpforge.evaluator.sandbox.supervisor import ChildOutcome, ChildPool, Walls, _parse
from warpforge.kernels.task import load_task_file
from warpforge.kernels.variant import load_variant

ROOT = Path(__file__).parent / "adversarial"
ERROR = {"stage": "launch", "kind": "exception", "type": "ValueError", "message": "bad"}


@pytest.mark.parametrize(
    ("mode", "report", "where"),
    [
        ("check", {"error": {"message": 7}}, "error.stage"),  # stages.child_failure indexes err[...]
        ("check", {"cases": "all passed"}, "cases"),
        ("check", {"cases": [{"id": "0"}]}, "cases.0.id"),  # "0" is not 0 (strict)
        ("check", {"threads_end": True}, "threads_end"),  # a bool is no count
        (
            "compile",
            {"kernels": [{"kernel": "k", "registers": "few", "spill_bytes": 0, "shared_bytes": 0, "compile_s": 0.1}]},
            "kernels.0.registers",
        ),
        ("compile", {"kernels": [{"kernel": "k"}]}, "kernels.0.registers"),
        ("space", {"names": "BLOCK", "feasible": []}, "names"),
        ("bench", {"cases": [{"id": 0, "ms": ["1.0"]}]}, "cases.0.ms.0"),
        ("ab", {"samples": [[1.0]]}, "samples.0.0"),
    ],
)
def test_a_report_that_does_not_fit_its_mode_is_named(mode: str, report: dict[str, Any], where: str) -> None:
    typed, why = validate_report(mode, report)
    assert typed is None and why.startswith(where + ":"), why


def test_a_fitting_report_keeps_its_unknown_keys() -> None:
    typed, why = validate_report("check", {"cases": [{"id": 0, "kinds": ["Tensor"], "extra": 1}], "error": ERROR})
    assert why == "" and typed is not None and typed["cases"][0]["extra"] == 1


@pytest.mark.parametrize(
    ("request_", "report", "needle"),
    [
        ({"mode": "space", "space": {"A": [1], "B": [2]}}, {"names": ["B", "A"], "feasible": []}, "SPACE's order"),
        ({"mode": "space", "space": {"A": [1]}}, {"names": ["A"], "feasible": [[1, 2]]}, "row's length"),
        ({"mode": "bench", "cases": [{"id": 0}]}, {"cases": [{"id": 0, "ms": [0.0], "ref_ms": [1.0]}]}, "positive"),
        ({"mode": "bench", "cases": [{"id": 0}]}, {"cases": []}, "ids"),
        ({"mode": "reference", "cases": [{"id": 0}]}, {"cases": [{"id": 0, "ms": [float("nan")]}]}, "finite"),
        ({"mode": "ab", "rounds": 2, "cases": [{"id": 0}]}, {"samples": [[[1.0, 1.0]]]}, "2 candidates"),
    ],
)
def test_what_the_request_rules_out_is_malformed(request_: dict[str, Any], report: dict[str, Any], needle: str) -> None:
    assert needle in check_report(request_, report)


def test_an_error_report_is_left_to_child_failure() -> None:
    assert check_report({"mode": "bench", "cases": [{"id": 0}]}, {"error": ERROR, "cases": []}) == ""


def test_a_deeply_nested_line_is_no_message() -> None:
    assert _parse(b"[" * 100_000) is None and _parse(b'{"a": 1}') == {"a": 1}


# --- fail closed ---------------------------------------------------------------------------------------------


def _walls(request: dict[str, Any], env: dict[str, str], report: dict[str, Any] | None) -> Walls:
    fake = SimpleNamespace(isolation=SimpleNamespace(summary=lambda: "bwrap: test"))
    return ChildPool._walls(fake, request, env, report)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("mode", "interpret", "seccomp", "down"),
    [
        ("check", True, "strict", False),
        ("check", True, None, True),  # a report naming no filter
        ("check", True, "spawn", True),  # a weaker filter than the mode's
        ("check", True, "none (prctl failed)", True),  # child/__main__.wall_refusal
        ("compile", False, "spawn", False),
        ("space", True, "strict", False),
    ],
)
def test_a_report_is_held_to_the_seccomp_profile_of_its_mode(
    mode: str, interpret: bool, seccomp: str | None, down: bool
) -> None:
    report: dict[str, Any] = {} if seccomp is None else {"seccomp": seccomp}
    walls = _walls({"mode": mode}, {"TRITON_INTERPRET": "1"} if interpret else {}, report)
    assert bool(walls.problem) is down, walls
    assert walls.summary().startswith("bwrap: test; seccomp ")


def test_the_harness_own_limit_error_comes_before_any_filter() -> None:
    report = {"error": {**ERROR, "kind": "evaluator_limit", "stage": "harness"}}
    assert _walls({"mode": "check"}, {"TRITON_INTERPRET": "1"}, report).problem == ""


@pytest.fixture
def job() -> Job:
    return Job(
        load_task_file(ROOT / "task_double.py"),
        load_variant(ROOT / "control_double.py"),
        {"BLOCK": 256, "num_warps": 4},
    )


def _outcome(status: str, report: dict[str, Any] | None, walls: Walls | None = None) -> ChildOutcome:
    return ChildOutcome(status, report, 0, "", 1.0, Path("/nonexistent"), walls=walls)


def test_walls_down_is_the_evaluators_error_never_ok(job: Job) -> None:
    walls = Walls("bwrap: test", "unknown", "the child reports seccomp 'absent' where 'strict' ...")
    result = child_failure(job, _outcome("walls_down", None, walls), "correctness check")
    assert result is not None and (result.verdict, result.reason) == (Verdict.CRASHED, "wall_not_installed")
    assert result.message.startswith("evaluator error, not the candidate's")
    assert job.walls == {"correctness check": "bwrap: test; seccomp unknown"}


def test_the_childs_refusal_maps_to_wall_not_installed(job: Job) -> None:
    report = wall_refusal("strict", OSError("seccomp(SET_MODE_FILTER) failed"), "n")
    typed, why = validate_report("check", report)
    assert why == "" and typed is not None
    assert _walls({"mode": "check"}, {"TRITON_INTERPRET": "1"}, typed).problem  # the pool stops it first
    result = child_failure(job, _outcome("done", typed), "correctness check")  # and the kind alone too
    assert result is not None and (result.verdict, result.reason) == (Verdict.CRASHED, "wall_not_installed")


def test_a_malformed_report_is_rejected(job: Job) -> None:
    outcome = _outcome("malformed", None)
    outcome.malformed = "cases: Input should be a valid list"
    result = child_failure(job, outcome, "correctness check")
    assert result is not None and (result.verdict, result.reason) == (Verdict.REJECTED, "malformed_report")


def test_a_filter_the_kernel_refuses_is_a_seccomp_error() -> None:
    """install() raises when the kernel refuses the program (here one whose jump leaves it: EINVAL), which the
    child turns into wall_refusal; in a fresh interpreter, since NO_NEW_PRIVS stays set."""
    code = textwrap.dedent("""
        import runpy, sys
        mod = runpy.run_path(sys.argv[1])
        install = mod["install"]
        install.__globals__["program"] = lambda profile, arch=None: [(0x15, 9, 9, 0)]  # JEQ past the end
        try:
            install("strict")
        except mod["SeccompError"] as exc:
            print("refused:", exc)
    """)
    from warpforge.evaluator.sandbox.child import seccomp

    done = subprocess.run(
        [sys.executable, "-I", "-c", code, seccomp.__file__], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.startswith("refused: seccomp(SET_MODE_FILTER, TSYNC) failed"), done.stdout + done.stderr
    assert seccomp_profile("check", True) == "strict" and seccomp_profile("check", False) == "spawn"


# --- the space stage's rows are SPACE's own values -----------------------------------------------------------


class _Pool:
    def __init__(self, report: dict[str, Any]) -> None:
        self.report = report

    @contextmanager
    def running(self, *args: Any, **kwargs: Any) -> Any:
        yield _outcome("done", self.report, Walls("bwrap: test", "strict"))


@pytest.mark.parametrize(
    ("rows", "ok"), [([[256, 4]], True), ([["256", 4]], False), ([[True, 4]], False), ([[512, 4]], False)]
)
def test_space_rows_are_mapped_back_to_space_values(job: Job, rows: list[list[Any]], ok: bool) -> None:
    failure, configs = space_stage(_Pool({"names": ["BLOCK", "num_warps"], "feasible": rows}), job)  # type: ignore[arg-type]
    if ok:
        assert failure is None and configs == [{"BLOCK": 256, "num_warps": 4}]
        assert type(configs[0]["BLOCK"]) is int
    else:
        assert failure is not None and failure.reason == "malformed_report" and configs == []


def test_a_check_case_without_its_facts_is_malformed() -> None:
    assert "kinds" in check_report({"mode": "check"}, {"cases": [{"id": 0, "aliases": []}]})


@pytest.mark.parametrize("obj", [{"out": "x"}, {"out": [1.0]}, [1], {"out": [], "inputs_after": [[1]]}])
def test_a_saved_case_of_other_shape_is_not_read(obj: object) -> None:
    import io

    import torch

    from warpforge.evaluator.sandbox.readback import load_saved

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    assert load_saved(buffer.getvalue()) is None
    assert load_saved(buffer.getvalue()[:40]) is None  # truncated: torch.load's own error
    good = io.BytesIO()
    torch.save({"out": [torch.ones(2)], "inputs_after": [torch.zeros(2), 3]}, good)
    assert load_saved(good.getvalue()) is not None


def test_a_lone_surrogate_from_the_child_becomes_a_replacement_character() -> None:
    msg = _parse(b'{"error": {"message": "x\\ud800y"}, "ok": ["\\ud83d\\ude00"]}')
    assert msg == {"error": {"message": "x\ufffdy"}, "ok": ["\U0001f600"]}


def test_doctor_says_a_profile_that_does_not_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import warpforge.evaluator.sandbox.isolation as isolation
    from warpforge.doctor import _seccomp

    monkeypatch.setattr(isolation, "probe_seccomp", lambda: {"strict": "installs", "spawn": "does not install: x"})
    check = _seccomp()
    assert not check.ok and check.required and "wall_not_installed" in check.detail
