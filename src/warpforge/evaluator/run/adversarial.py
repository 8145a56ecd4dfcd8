"""Adversarial fixtures: one reward hack per entry of a manifest, each with the verdict it must end in.

The manifest (``tests/evaluator/adversarial/manifest.json`` in a source checkout) lists, per fixture,
the task, the variant file, its parameters, the expected verdict and reason, and whether it needs a GPU.
Honest controls are included and must pass. ``run_manifest`` evaluates every fixture that applies to a
backend and says which ended as expected; ``benchmarks/gpu_check.py`` runs it on a GPU, the test suite
on the interpreter (tests/evaluator/test_adversarial.py). On a GPU, a fixture marked ``poisons_device``
(a hang, an illegal memory access) is followed by the honest control, which must still pass within 5%
of its time before.

Example::

    >>> from warpforge.evaluator.run.adversarial import run_manifest
    >>> outcomes = run_manifest("interpret")                      # doctest: +SKIP
    >>> sum(o.passed for o in outcomes), len(outcomes)            # doctest: +SKIP
    (30, 30)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.evaluator.run.backend import Backend, get_backend
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.supervisor import ChildPool
from warpforge.kernels.task import get_task, load_task_file
from warpforge.kernels.taskdef import Task, TaskError
from warpforge.kernels.variant import TEMPLATES_DIR, VariantError, load_variant

MANIFEST = Path(__file__).resolve().parents[4] / "tests" / "evaluator" / "adversarial" / "manifest.json"
# A control after a device-poisoning fixture must keep its time within 5%.
CONTROL_SLOWDOWN = 1.05


@dataclass(frozen=True)
class Fixture:
    """One manifest entry."""

    name: str
    attack: str
    defence: str
    task: str
    variant: str
    params: dict[str, Any]
    expected_verdict: str
    expected_reasons: tuple[str, ...]
    gpu_only: bool = False
    backends: tuple[str, ...] = ()
    timeout_s: float | None = None
    host_memory_gb: float | None = None
    poisons_device: bool = False
    control: bool = False
    gpu_shapes: tuple[dict[str, int], ...] = ()
    # Evaluated with the "core" static rules only, to prove the run-time defence behind the strict rules
    # (the strict rules must reject such a fixture too: test_adversarial checks it).
    runtime_only: bool = False

    def applies_to(self, backend_name: str) -> bool:
        if self.backends and backend_name not in self.backends:
            return False
        return not self.gpu_only or backend_name == "cuda"

    @property
    def expected(self) -> str:
        reason = "|".join(r for r in self.expected_reasons if r)
        return self.expected_verdict + (f": {reason}" if reason else "")


@dataclass
class FixtureOutcome:
    """How one fixture ended, and whether that is what the manifest expects."""

    fixture: str
    expected: str
    verdict: str
    reason: str
    message: str
    seconds: float
    passed: bool
    control_ratio: float | None = None  # control's time after / before, for device-poisoning fixtures
    notes: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)  # the result's own list of what it did not check

    def __str__(self) -> str:
        got = self.verdict + (f": {self.reason}" if self.reason else "")
        extra = f", control x{self.control_ratio:.3f}" if self.control_ratio is not None else ""
        return f"{self.fixture}: expected {self.expected}, got {got} ({self.seconds:.1f} s{extra})"


def load_manifest(path: str | Path | None = None) -> list[Fixture]:
    """The fixtures of a manifest file (default: the source checkout's tests/evaluator/adversarial)."""
    manifest = Path(path) if path else MANIFEST
    if not manifest.is_file():
        raise FileNotFoundError(
            f"adversarial manifest {manifest} not found: pass its path (it lives in a source "
            "checkout under tests/evaluator/adversarial/)"
        )
    fixtures = []
    for entry in json.loads(manifest.read_text())["fixtures"]:
        reasons = entry.get("expected_reason", "")
        fixtures.append(
            Fixture(
                name=entry["name"],
                attack=entry.get("attack", ""),
                defence=entry.get("defence", ""),
                task=entry["task"],
                variant=entry["variant"],
                params=dict(entry.get("params", {})),
                expected_verdict=entry["expected_verdict"],
                expected_reasons=tuple(reasons) if isinstance(reasons, list) else (reasons,),
                gpu_only=bool(entry.get("gpu_only", False)),
                backends=tuple(entry.get("backends", ())),
                timeout_s=entry.get("timeout_s"),
                host_memory_gb=entry.get("host_memory_gb"),
                poisons_device=bool(entry.get("poisons_device", False)),
                control=bool(entry.get("control", False)),
                gpu_shapes=tuple(entry.get("gpu_shapes", ())),
                runtime_only=bool(entry.get("runtime_only", False)),
            )
        )
    Verdict(fixtures[0].expected_verdict) if fixtures else None  # a typo in a verdict fails loudly here
    return fixtures


def _task(fixture: Fixture, root: Path) -> Task:
    path = root / fixture.task
    return load_task_file(path) if fixture.task.endswith(".py") else get_task(fixture.task)


def fixture_job(fixture: Fixture, root: Path, backend_name: str) -> Job:
    """The evaluation job of a fixture (variants are read as files, never imported here)."""
    if fixture.variant.startswith("template:"):
        variant_path = TEMPLATES_DIR / (fixture.variant.removeprefix("template:") + ".py")
    else:
        variant_path = root / fixture.variant
    task = _task(fixture, root)
    job = Job(task, load_variant(variant_path).for_task(task.name), dict(fixture.params))  # ModelNew: no TASK
    if fixture.timeout_s is not None:
        job.timeout_s = float(fixture.timeout_s)
    if fixture.host_memory_gb is not None:
        job.host_memory_gb = float(fixture.host_memory_gb)
    if fixture.runtime_only:
        job.static_rules = "core"
    if fixture.gpu_shapes and backend_name == "cuda":
        job.shapes = [dict(s) for s in fixture.gpu_shapes]
    return job


def matches(fixture: Fixture, result: EvalResult) -> bool:
    return result.verdict.value == fixture.expected_verdict and result.reason in fixture.expected_reasons


def run_fixture(backend: Backend, fixture: Fixture, root: Path) -> FixtureOutcome:
    """Evaluate one fixture on ``backend`` and compare with its expectation."""
    start = time.monotonic()
    try:
        job = fixture_job(fixture, root, backend.name)
    except VariantError as exc:
        if exc.reason:  # refused by the grammar's source rules before a Variant exists (as `warpforge eval` is)
            found = EvalResult(verdict=Verdict.REJECTED, reason=exc.reason, message=str(exc))
            return FixtureOutcome(
                fixture.name,
                fixture.expected,
                found.verdict.value,
                found.reason,
                found.message,
                time.monotonic() - start,
                matches(fixture, found),
            )
        return FixtureOutcome(fixture.name, fixture.expected, "error", "fixture_unloadable", str(exc), 0.0, False)
    except (TaskError, OSError) as exc:  # a broken manifest entry is a failed fixture, not a crash
        return FixtureOutcome(fixture.name, fixture.expected, "error", "fixture_unloadable", str(exc), 0.0, False)
    result = backend.evaluate(job)
    return FixtureOutcome(
        fixture.name,
        fixture.expected,
        result.verdict.value,
        result.reason,
        result.message,
        time.monotonic() - start,
        matches(fixture, result),
        unchecked=list(result.unchecked),
    )


def run_manifest(
    backend_name: str,
    manifest: str | Path | None = None,
    names: Iterable[str] | None = None,
    pool: ChildPool | None = None,
    on_outcome: Callable[[FixtureOutcome], None] | None = None,
) -> list[FixtureOutcome]:
    """Evaluate every fixture that applies to ``backend_name``; one outcome per fixture, in manifest order.

    ``on_outcome`` sees each outcome as soon as it is known: on a GPU the whole manifest takes minutes,
    and a caller stopped at its time limit still has the fixtures that finished (benchmarks/gpu_check.py).
    """
    path = Path(manifest) if manifest else MANIFEST
    root = path.parent
    wanted = set(names) if names is not None else None
    fixtures = [f for f in load_manifest(path) if f.applies_to(backend_name) and (wanted is None or f.name in wanted)]
    backend = get_backend(backend_name, pool=pool)
    control = next((f for f in load_manifest(path) if f.control), None)
    try:
        baseline = _control_time(backend, control, root) if backend.measures and control else None
        outcomes = []
        for fixture in fixtures:
            outcome = run_fixture(backend, fixture, root)
            if fixture.poisons_device and baseline is not None and control is not None:
                after = _control_time(backend, control, root)
                outcome.control_ratio = (after / baseline) if after else None
                ok = outcome.control_ratio is not None and outcome.control_ratio <= CONTROL_SLOWDOWN
                outcome.passed = outcome.passed and ok
                if not ok:
                    outcome.notes.append(
                        f"the control after this fixture was not within {CONTROL_SLOWDOWN:.2f}x of its time before"
                    )
            outcomes.append(outcome)
            if on_outcome is not None:
                on_outcome(outcome)
        return outcomes
    finally:
        backend.close()


def _control_time(backend: Backend, control: Fixture, root: Path, runs: int = 2) -> float | None:
    """The control's time: the least of ``runs`` evaluations, None if any of them is not ``ok``.

    Each evaluation is a fresh child timing its own median, and the before and after readings are
    minutes apart; the least of two keeps one slow child (a clock ramp, say) from reading as a device
    left poisoned by the fixture. A guess from review, not a measurement: the first GPU run failed the
    manifest without saying which fixture (benchmarks/results/gpu_session_H200_2026-11-29.md).
    """
    times = []
    for _ in range(runs):
        result = backend.evaluate(fixture_job(control, root, backend.name))
        if result.verdict is not Verdict.OK or result.objective_ms is None:
            return None
        times.append(result.objective_ms)
    return min(times)
