"""What export chooses from stored decisions and evaluations, and what it refuses (export/plan.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from export_fill import GPU, decide, save

from warpforge.db.queries import Reader
from warpforge.export.op_plan import ExportRefused
from warpforge.export.plan import plan_task, static_rank
from warpforge.kernels.task import get_task

A = "M=4096,N=4096"
B = "M=8192,N=8192"
GENERAL = {"ROWS_PER_PROGRAM": 1, "num_warps": 8, "num_stages": 1}
FAST_B = {"ROWS_PER_PROGRAM": 2, "num_warps": 16, "num_stages": 2}
NOISY_A = {"ROWS_PER_PROGRAM": 4, "num_warps": 4, "num_stages": 1}


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'wf.db'}"


def _timed_db(url: str, accepted: bool = True) -> tuple[Reader, int]:
    win = save(url, "rmsnorm", "single_pass", GENERAL, times={A: (0.10, 0.11, 0.12), B: (0.50, 0.52, 0.54)})
    # Faster on B beyond noise (its p80 0.40 < the general's p20 0.50): adopted for B.
    save(url, "rmsnorm", "single_pass", FAST_B, times={A: (0.20, 0.21, 0.22), B: (0.38, 0.39, 0.40)})
    # Faster on A by p50 but its p80 (0.115) overlaps the general's p20 (0.10): noise, not adopted.
    save(url, "rmsnorm", "single_pass", NOISY_A, times={A: (0.095, 0.105, 0.115), B: (0.9, 1.0, 1.1)})
    decide(url, win, low=1.2, high=1.5, accepted=accepted)
    return Reader(url), win


def test_no_decision_is_refused(url: str) -> None:
    save(url, "rmsnorm", "single_pass", GENERAL, times={A: (0.1, 0.1, 0.1)})
    with pytest.raises(ExportRefused, match="no accepted winner"):
        plan_task(Reader(url), get_task("rmsnorm"))


def test_unaccepted_decision_is_refused(url: str) -> None:
    reader, win = _timed_db(url, accepted=False)
    with pytest.raises(ExportRefused, match="none accepted"):
        plan_task(reader, get_task("rmsnorm"))


def test_winner_never_verified_ok_is_refused(url: str) -> None:
    bad = save(
        url,
        "rmsnorm",
        "looped",
        {"BLOCK": 1024, "num_warps": 4, "num_stages": 1},
        verdict="incorrect",
        times={A: (0.05, 0.05, 0.05)},
    )
    decide(url, bad)
    reader = Reader(url)
    with pytest.raises(ExportRefused, match="no evaluation with verdict ok"):
        plan_task(reader, get_task("rmsnorm"))


def test_no_result_for_requested_gpu_is_refused(url: str) -> None:
    reader, _ = _timed_db(url)
    with pytest.raises(ExportRefused, match="no accepted result for GPU 'H100'"):
        plan_task(reader, get_task("rmsnorm"), gpu="H100")


def test_table_general_and_per_shape_entries(url: str) -> None:
    reader, win = _timed_db(url)
    plan = plan_task(reader, get_task("rmsnorm"), gpu="synthetic")
    assert plan.variant_name == "single_pass" and not plan.untimed
    (table,) = plan.tables
    assert table.gpu == GPU and table.timing_source == "recorded"
    assert dict(table.general) == GENERAL
    by_shape = {",".join(f"{k}={v}" for k, v in sorted(e.shape.items())): dict(e.params) for e in table.entries}
    assert by_shape == {A: GENERAL, B: FAST_B}
    assert plan.info["speedup_vs_eager_interval"] == [1.2, 1.5]
    assert plan.info["versions"]["triton"] == "3.9.0"
    assert plan.info["timing_source"] == "recorded" and plan.info["untimed"] is False


def test_untimed_needs_the_flag_and_ranks_by_static_facts(url: str) -> None:
    save(
        url,
        "rmsnorm",
        "single_pass",
        {"ROWS_PER_PROGRAM": 1, "num_warps": 4, "num_stages": 1},
        resources=[(128, 512, 0)],
    )  # spills
    best = {"ROWS_PER_PROGRAM": 2, "num_warps": 8, "num_stages": 1}
    save(url, "rmsnorm", "single_pass", best, resources=[(96, 0, 1024)])
    save(
        url, "rmsnorm", "single_pass", {"ROWS_PER_PROGRAM": 4, "num_warps": 8, "num_stages": 1}, resources=[(128, 0, 0)]
    )  # more registers
    save(url, "rmsnorm", "single_pass", {"ROWS_PER_PROGRAM": 8, "num_warps": 8, "num_stages": 1})  # unknown
    save(
        url,
        "rmsnorm",
        "looped",
        {"BLOCK": 1024, "num_warps": 1, "num_stages": 1},
        verdict="incorrect",
        resources=[(16, 0, 0)],
    )  # fewest registers but never ok
    reader = Reader(url)
    with pytest.raises(ExportRefused, match="--allow-untimed"):
        plan_task(reader, get_task("rmsnorm"))
    plan = plan_task(reader, get_task("rmsnorm"), allow_untimed=True)
    assert plan.untimed and dict(plan.tables[0].general) == best
    assert plan.info["untimed"] is True and plan.info["speedup_vs_eager"] is None
    assert "NEVER TIMED" in plan.info["speedup_note"]


def test_untimed_ranking_sees_every_shape_of_a_kernel(url: str) -> None:
    # One kernel compiled for two shapes: it spills on the first. Keyed by kernel name only the second (clean)
    # report would remain and this configuration would wrongly beat one that never spills.
    save(
        url,
        "rmsnorm",
        "single_pass",
        {"ROWS_PER_PROGRAM": 8, "num_warps": 4, "num_stages": 1},
        resources=[(96, 512, 0), (96, 0, 0)],
    )
    clean = {"ROWS_PER_PROGRAM": 2, "num_warps": 4, "num_stages": 1}
    save(url, "rmsnorm", "single_pass", clean, resources=[(100, 0, 0), (100, 0, 0)])
    plan = plan_task(Reader(url), get_task("rmsnorm"), allow_untimed=True)
    assert dict(plan.tables[0].general) == clean


def test_untimed_with_nothing_ok_is_refused(url: str) -> None:
    save(url, "rmsnorm", "single_pass", GENERAL, verdict="incorrect")
    with pytest.raises(ExportRefused, match="was ever verified ok"):
        plan_task(Reader(url), get_task("rmsnorm"), allow_untimed=True)


def test_static_rank_orders_spills_then_registers_then_shared() -> None:
    assert static_rank([{"spill_bytes": 0, "registers": 200, "shared_bytes": 0}]) < static_rank(
        [{"spill_bytes": 8, "registers": 32, "shared_bytes": 0}]
    )
    assert static_rank([{"spill_bytes": 0, "registers": 64, "shared_bytes": 9}]) < static_rank(
        [{"spill_bytes": 0, "registers": 64, "shared_bytes": 10}]
    )
    # the worst kernel of a multi-kernel launch counts; missing facts rank last
    assert (
        static_rank(
            [
                {"spill_bytes": 0, "registers": 64, "shared_bytes": 0},
                {"spill_bytes": 4, "registers": 32, "shared_bytes": 0},
            ]
        )[0]
        == 4
    )
    assert static_rank(None) > static_rank([{"spill_bytes": 1 << 20, "registers": 255, "shared_bytes": 1 << 20}])


def test_one_table_per_gpu_that_accepted_the_same_source(url: str) -> None:
    h100, a100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
    on_h100 = save(url, "rmsnorm", "single_pass", GENERAL, times={A: (0.1, 0.1, 0.1)}, gpu=h100, campaign="h")
    on_a100 = save(url, "rmsnorm", "single_pass", FAST_B, times={A: (0.2, 0.2, 0.2)}, gpu=a100, campaign="a")
    decide(url, on_h100)
    decide(url, on_a100)
    plan = plan_task(Reader(url), get_task("rmsnorm"))
    # each GPU's table holds its own decision's configuration; the newest decision (A100) is the primary
    assert {t.gpu: dict(t.general) for t in plan.tables} == {h100: GENERAL, a100: FAST_B}
    assert plan.info["gpu"] == a100
    narrowed = plan_task(Reader(url), get_task("rmsnorm"), gpu="h100")
    assert [t.gpu for t in narrowed.tables] == [h100] and narrowed.info["params"] == GENERAL
