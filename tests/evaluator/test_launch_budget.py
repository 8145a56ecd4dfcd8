"""The launch phase's budget by design, and the warm kernel cache (issue 27, part A), on the CPU.

On the H200 (2026-11-30) 13 of 35 fixtures, the honest control_softmax among them, timed out in phase
'launch' at 5 s. The phases are now each the work between two marks (sandbox.PhaseClock), our start-up has
its own budget, and the AOT stage's kernels are looked up, not compiled again, by later children.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from warpforge.evaluator.run.stages import CONTEXT_S, hang_bound_s, phase_budgets
from warpforge.evaluator.sandbox import kernel_cache
from warpforge.evaluator.sandbox.supervisor import PhaseClock

FIXTURES = Path(__file__).parent / "adversarial"


def test_hang_bound_arithmetic() -> None:
    assert hang_bound_s(0.0) == 5.0
    assert hang_bound_s(0.1) == pytest.approx(6.0)
    assert hang_bound_s(10.0) == 60.0  # capped


def test_each_phase_has_its_own_budget() -> None:
    budgets = phase_budgets(SimpleNamespace(timeout_s=90.0), 0.001)
    assert budgets == {"context": CONTEXT_S, "compile": 90.0, "launch": pytest.approx(5.01)}
    assert "launch" not in phase_budgets(SimpleNamespace(timeout_s=90.0), None)


def _trace(clock: PhaseClock, marks: list[tuple[str, float]]) -> list[float]:
    deadlines = []
    for name, at in marks:
        clock.on_mark(name, at)
        deadlines.append(clock.deadline())
    return deadlines


def test_the_launch_budget_covers_the_observed_call_only() -> None:
    """One check case on a GPU, as the child marks it: our context, the import, the compile call, the observed
    call, the harness's saving and the next case's inputs. Only context, compile and launch are bounded."""
    clock = PhaseClock(start=0.0, overall_s=480.0, budgets=phase_budgets(SimpleNamespace(timeout_s=120.0), 0.0))
    deadlines = _trace(
        clock,
        [
            ("context", 0.1),
            ("imported", 2.0),
            ("need", 2.1),
            ("compile", 2.2),
            ("launch", 4.0),
            ("launched", 4.1),
            ("need", 30.0),
            ("compile", 31.0),
        ],
    )
    assert deadlines == [0.1 + CONTEXT_S, 480.0, 480.0, 122.2, 9.0, 480.0, 480.0, 151.0]
    # Before issue 27, "launch" ran on to the next budgeted mark: saving and the input round trip were billed
    # to the candidate's 5 s (the 26 s here between 'launched' and the next 'compile' would have timed out).


def test_the_overall_deadline_never_moves() -> None:
    clock = PhaseClock(start=10.0, overall_s=20.0, budgets={"compile": 100.0})
    assert _trace(clock, [("compile", 11.0)]) == [30.0]
    assert clock.expired_phase() == ("", 20.0)
    clock.on_mark("launch", 12.0)
    assert clock.deadline() == 30.0


def test_an_expired_phase_is_named_with_its_limit() -> None:
    clock = PhaseClock(start=0.0, overall_s=100.0, budgets={"launch": 5.0})
    clock.on_mark("launch", 1.0)
    assert clock.deadline() == 6.0 and clock.expired_phase() == ("launch", 5.0)


@pytest.mark.slow
def test_the_aot_stage_warms_the_cache_and_a_later_child_compiles_nothing_again() -> None:
    """The AOT compile child writes its kernels into the candidate's warm cache; a second compiling child for
    the same candidate gets them seeded and adds no entry: every lookup hit (Triton writes an entry per miss).
    The same lookup is what the JIT does on a GPU in the check's and the benchmark's first call."""
    from warpforge.evaluator.run.stages import compile_stage, warm_cache
    from warpforge.evaluator.sandbox.job import Job
    from warpforge.evaluator.sandbox.supervisor import ChildPool
    from warpforge.kernels.task import load_task_file
    from warpforge.kernels.variant import load_variant

    job = Job(
        load_task_file(FIXTURES / "task_double.py"),
        load_variant(FIXTURES / "control_double.py"),
        {"BLOCK": 256, "num_warps": 4},
    )
    with ChildPool() as pool:
        first, resources = compile_stage(pool, job)
        assert first is None and resources
        warm = warm_cache(pool, job)
        compiled = kernel_cache.entries(warm)
        second, again = compile_stage(pool, job)
        assert second is None and len(again) == len(resources)
        assert kernel_cache.entries(warm) == compiled
    cold, warmed = job.kernel_cache
    assert cold.seeded == 0 and cold.added == len(compiled) > 0
    assert warmed.seeded == len(compiled) and warmed.added == 0


def test_harvest_keeps_regular_files_only_and_never_overwrites(tmp_path: Path) -> None:
    scratch, warm = tmp_path / "scratch", tmp_path / "warm"
    (scratch / kernel_cache.CACHE_NAME / "GOOD").mkdir(parents=True)
    (scratch / kernel_cache.CACHE_NAME / "GOOD" / "k.json").write_text("{}")
    (scratch / kernel_cache.CACHE_NAME / "LINK").mkdir()
    (scratch / kernel_cache.CACHE_NAME / "LINK" / "k.json").symlink_to("/etc/passwd")
    (warm / "OLD").mkdir(parents=True)
    (warm / "OLD" / "k.json").write_text("old")
    (scratch / kernel_cache.CACHE_NAME / "OLD").mkdir()
    (scratch / kernel_cache.CACHE_NAME / "OLD" / "k.json").write_text("planted")
    use = kernel_cache.harvest(scratch, warm, seeded=1)
    assert kernel_cache.entries(warm) == {"GOOD", "OLD"} and use.added == 2  # LINK counted, not kept
    assert (warm / "OLD" / "k.json").read_text() == "old"
