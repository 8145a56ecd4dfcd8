"""One evaluation traced call by call: the order in which the trusted side enters the evaluator's subpackages.

What "enters each subpackage once, in order" means for an orchestrated design, as checked here (the
evaluator package's docstring states the same contract):

- An *entry* is a new frame of a function in ``static/``, ``sandbox/`` or ``judge/`` whose nearest evaluator
  caller is in ``run/``: the doors the run stages open. What one of those parts then calls itself (the judge
  reading a dead child's saved outputs through ``sandbox.readback``) is inside that entry. Resuming a
  suspended generator frame is not a new entry: leaving a ``with pool.running(...)`` block resumes the
  sandbox context entered before its child started, and that only releases the scratch directory the
  judge has just read. ``result.py``, ``gpus.py`` and ``sandbox/job.py`` (the job a run describes, and the
  result it builds) are data every part reads, not a part.
- Entries, consecutive repeats collapsed, run: ``static`` once and first (the candidate's bytes, before
  anything of it runs), then the sandbox and the judge in phases. Each sandbox stretch starts at least one
  child and reads what it left, so the sandbox is never entered again for bookkeeping once judging began;
  each judge stretch works on finished children only, and decides whether another child runs. Early
  stopping needs that alternation: the task lint and the planned cases gate the check child (a task
  that cannot tell a kernel from a constant runs no child), and the check's verdict gates the
  interpreted specializations' late compile (interpret) or the timed runs (cuda).
- The contract module ``run/backend.py`` only dispatches: ``Backend.evaluate`` is its one frame, so
  nothing there is called back from the implementation or from the stages.

So "each once" holds for static and for the contract module; the sandbox and the judge are entered once
per phase, in that order. For the interpret backend and an honest variant whose interpreted specializations
the ahead-of-time compile already met, that is exactly: static; sandbox (the compile child); judge (the task
lint and the check's cases); sandbox (the check child); judge (the verdict). A variant with specializations
the compile had not met adds a sandbox stretch (their late compile), and a cuda evaluation a sandbox
stretch (the timed child) and a judge stretch (its rechecked calls); that timed phase is traced here under
the interpreter (``bench_stage``), since a whole cuda evaluation needs a GPU.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from inspect import CO_COROUTINE, CO_GENERATOR
from types import FrameType
from typing import Any, TypeVar

import pytest
import torch

from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.evaluator.run.interpret import InterpretBackend
from warpforge.evaluator.run.timing import BenchSettings, bench_stage
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.supervisor import ChildPool
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import builtin_variants

EVALUATOR = "warpforge.evaluator."
PARTS = ("static", "sandbox", "run", "judge")
# Data modules inside a part: the job sits below the judge (sandbox/job.py) but is read by every part.
DATA = {"warpforge.evaluator.sandbox.job"}
CONTRACT = "warpforge.evaluator.run.backend"
CHILD_START = "warpforge.evaluator.sandbox.supervisor.ChildPool.running"
EXPECTED = ["static", "sandbox", "judge", "sandbox", "judge"]
T = TypeVar("T")


def part_of(frame: FrameType) -> str | None:
    """The evaluator subpackage a frame's function belongs to; None outside the evaluator and for its data."""
    module = str(frame.f_globals.get("__name__", ""))
    if not module.startswith(EVALUATOR):
        return None
    if module in DATA:
        return None
    part = module[len(EVALUATOR) :].split(".", 1)[0]
    return part if part in PARTS else None


def qualname(frame: FrameType) -> str:
    return str(getattr(frame.f_code, "co_qualname", frame.f_code.co_name))  # co_qualname: Python 3.11+


def name_of(frame: FrameType) -> str:
    return f"{frame.f_globals.get('__name__', '?')}.{qualname(frame)}"


def evaluator_caller(frame: FrameType | None) -> FrameType | None:
    """The nearest frame up the stack in an evaluator subpackage (contextlib, importlib and torch skipped)."""
    while frame is not None and part_of(frame) is None:
        frame = frame.f_back
    return frame


@dataclass
class Entry:
    part: str
    function: str
    caller: str


@dataclass
class Tracer:
    """A profile function recording entries, resumptions and every frame of the contract module."""

    entries: list[Entry] = field(default_factory=list)
    resumed: list[Entry] = field(default_factory=list)
    every_part: list[str] = field(default_factory=list)  # each evaluator frame's part, repeats collapsed
    contract: list[str] = field(default_factory=list)
    threads: set[int] = field(default_factory=set)
    # Generator frames kept alive so that a resumption is told from a new frame that reuses a freed id.
    _generators: dict[int, FrameType] = field(default_factory=dict)

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        part = part_of(frame)
        if part is None:
            return
        self.threads.add(threading.get_ident())
        if not self.every_part or self.every_part[-1] != part:
            self.every_part.append(part)
        if frame.f_globals.get("__name__") == CONTRACT:
            self.contract.append(qualname(frame))
        if part != "run":
            self._door(frame, part)

    def _door(self, frame: FrameType, part: str) -> None:
        caller = evaluator_caller(frame.f_back)
        if caller is None or part_of(caller) != "run":
            return
        entry = Entry(part, name_of(frame), name_of(caller))
        if frame.f_code.co_flags & (CO_GENERATOR | CO_COROUTINE):
            if id(frame) in self._generators:
                self.resumed.append(entry)
                return
            self._generators[id(frame)] = frame
        self.entries.append(entry)

    def trace(self, run: Callable[[], T]) -> T:
        sys.setprofile(self)
        threading.setprofile(self)  # type: ignore[arg-type]
        try:
            return run()
        finally:
            threading.setprofile(None)  # type: ignore[arg-type]
            sys.setprofile(None)
            self._generators.clear()


def stretches(entries: list[Entry]) -> Iterator[tuple[str, list[str]]]:
    """Consecutive entries into one part, with the functions entered."""
    part, functions = "", []
    for entry in entries:
        if entry.part != part and functions:
            yield part, functions
            functions = []
        part = entry.part
        functions.append(entry.function)
    if functions:
        yield part, functions


def parts(tracer: Tracer) -> list[str]:
    return [part for part, _ in stretches(tracer.entries)]


def show(tracer: Tracer) -> str:
    lines = [
        f"every evaluator frame's part, collapsed: {len(tracer.every_part)} stretches (the parts use one "
        "another's helpers; the entries are the doors run/ opens)",
        "entries, collapsed:",
    ]
    for part, functions in stretches(tracer.entries):
        distinct = list(dict.fromkeys(f.removeprefix(EVALUATOR) for f in functions))
        lines.append(f"  {part}: {', '.join(distinct)}")
    lines.append(f"resumed: {[e.function.removeprefix(EVALUATOR) for e in tracer.resumed]}")
    lines.append(f"contract frames: {tracer.contract}")
    return "\n".join(lines)


def cheapest_job(shapes: list[dict[str, int]] | None = None) -> Job:
    """Elementwise's flat template at its first configuration, one seed, no hidden shape, bf16 only (so the
    static question about tl.dot on bf16 is asked too), and by default its smallest check shape as the only
    benchmark shape (one ahead-of-time specialization per benchmark shape)."""
    task = get_task("elementwise")
    variant = next(v for v in builtin_variants("elementwise") if v.name == "flat")
    smallest = min(task.check_shapes, key=lambda s: sum(s.values()))
    return Job(
        task,
        variant,
        variant.configs()[0],
        seeds=1,
        hidden_shapes=0,
        dtypes=[torch.bfloat16],
        shapes=shapes or [dict(smallest)],
    )


@pytest.fixture(scope="module")
def traced() -> tuple[EvalResult, Tracer]:
    """The cheapest real evaluation, traced from ``Backend.evaluate`` in this (trusted) process."""
    job = cheapest_job()
    backend = InterpretBackend()
    tracer = Tracer()
    try:
        result = tracer.trace(lambda: backend.evaluate(job))
    finally:
        backend.close()
    print(f"every evaluator frame's part, collapsed: {' -> '.join(tracer.every_part)}")
    print(show(tracer))
    return result, tracer


@pytest.mark.slow
def test_the_traced_evaluation_is_an_honest_ok(traced: tuple[EvalResult, Tracer]) -> None:
    result, tracer = traced
    assert result.verdict is Verdict.OK, result.message
    assert tracer.threads == {threading.main_thread().ident}, "the trusted side evaluates on one thread"


def test_static_then_sandbox_and_judge_in_phases(traced: tuple[EvalResult, Tracer]) -> None:
    _, tracer = traced
    assert parts(tracer) == EXPECTED, show(tracer)


def test_each_sandbox_stretch_starts_a_child(traced: tuple[EvalResult, Tracer]) -> None:
    _, tracer = traced
    for part, functions in stretches(tracer.entries):
        assert part != "sandbox" or CHILD_START in functions, show(tracer)


def test_each_judge_stretch_gates_the_next_child_or_decides(traced: tuple[EvalResult, Tracer]) -> None:
    _, tracer = traced
    judged = [set(functions) for part, functions in stretches(tracer.entries) if part == "judge"]
    assert "warpforge.evaluator.judge.compare.lint_task" in judged[0], show(tracer)
    assert "warpforge.evaluator.judge.judge.plan_cases" in judged[0], show(tracer)
    assert "warpforge.evaluator.judge.judge.judge_check" in judged[-1], show(tracer)


def test_leaving_a_sandbox_context_only_releases_its_scratch(traced: tuple[EvalResult, Tracer]) -> None:
    _, tracer = traced
    assert tracer.resumed and {e.function for e in tracer.resumed} == {CHILD_START}, show(tracer)


def test_the_contract_module_is_never_called_back(traced: tuple[EvalResult, Tracer]) -> None:
    _, tracer = traced
    assert tracer.contract == ["Backend.evaluate"], show(tracer)


def test_a_timed_phase_is_its_child_then_its_judgement() -> None:
    """The timed phase a GPU evaluation adds, run under the interpreter: the bench child, then the rechecks
    of its timed calls, which read their saved outputs inside the judge's entry."""
    job = cheapest_job([{"M": 1, "N": 97}])
    tracer = Tracer()
    with ChildPool() as pool:
        failure, shapes, _ = tracer.trace(
            lambda: bench_stage(
                pool, job, "cpu", True, job.shapes, job.dtypes[0], BenchSettings(warmup=1, reps=3, wall_calls=2)
            )
        )
    assert failure is None and shapes, failure and failure.message
    assert parts(tracer) == ["sandbox", "judge"], show(tracer)
    judged = dict(stretches(tracer.entries))["judge"]
    assert set(judged) == {"warpforge.evaluator.judge.timed.recheck_timed_call"}, show(tracer)


def _module(name: str, source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": name}
    exec(compile(source, name, "exec"), namespace)  # functions whose module name is an evaluator part's
    return namespace


SANDBOX = """
from contextlib import contextmanager

@contextmanager
def running():
    yield "outcome"

def read():
    return 1
"""
JUDGE = """
def decide(outcome, read):
    return read()
"""
RUN = """
def stage(sandbox, judge):
    with sandbox["running"]() as outcome:
        judge["decide"](outcome, sandbox["read"])
    sandbox["read"]()
"""


def test_the_tracer_counts_doors_not_nested_calls_nor_resumptions() -> None:
    """What an entry is, on three stand-in modules: a read the judge makes itself is inside its entry, leaving
    the sandbox's with-block resumes its entry, and a read after the verdict is a new entry."""
    sandbox = _module(EVALUATOR + "sandbox.stand_in", SANDBOX)
    judge = _module(EVALUATOR + "judge.stand_in", JUDGE)
    run = _module(EVALUATOR + "run.stand_in", RUN)
    tracer = Tracer()
    tracer.trace(lambda: run["stage"](sandbox, judge))
    assert [(e.part, e.function.rsplit(".", 1)[-1]) for e in tracer.entries] == [
        ("sandbox", "running"),
        ("judge", "decide"),
        ("sandbox", "read"),
    ]
    assert [e.function.rsplit(".", 1)[-1] for e in tracer.resumed] == ["running"]
    assert tracer.contract == []
