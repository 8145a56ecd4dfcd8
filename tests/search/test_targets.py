"""Issue 20's verdicts under bench-search's table: default against Kernel Tuner's best, and the two goals."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from warpforge.cli import handle_errors
from warpforge.cli.bench import bench_search
from warpforge.evaluator.run.recorded_spaces import RecordedSpace, RecordedTime, write_cache
from warpforge.search.bench.harness import BenchRecord, space_digest
from warpforge.search.bench.kt_baseline import kt_available
from warpforge.search.bench.targets import absolute_targets, compare_to_kt, distinct


def _rec(space: str, sampler: str, budget: int, mean: float, se: float, digest: str = "") -> BenchRecord:
    return BenchRecord(space, sampler, budget, mean, se, 0.5, 100, 0.0, 0.0, 0.0, 0.0, 10, 1.0, digest=digest or space)


def test_one_standard_error_of_the_difference_decides() -> None:
    # se of the difference = hypot(0.03, 0.04) = 0.05 (a 3-4-5 triangle): -0.05 is met, -0.051 is not.
    level = compare_to_kt(
        [
            _rec("s/A", "wf-default", 100, 0.90, 0.03),
            _rec("s/A", "kt:pso", 100, 0.95, 0.04),
            _rec("s/A", "kt:mls", 100, 0.60, 0.01),
        ]
    )
    assert [(c.best_kt, c.se, c.met) for c in level] == [("kt:pso", pytest.approx(0.05), True)]
    behind = compare_to_kt([_rec("s/A", "wf-default", 100, 0.899, 0.03), _rec("s/A", "kt:pso", 100, 0.95, 0.04)])
    assert not behind[0].met


def test_best_kt_is_chosen_per_space_and_budget() -> None:
    recs = [
        _rec("s/A", "wf-default", 50, 0.8, 0.01),
        _rec("s/A", "wf-default", 100, 0.9, 0.01),
        _rec("s/A", "kt:pso", 50, 0.85, 0.01),
        _rec("s/A", "kt:mls", 50, 0.70, 0.01),
        _rec("s/A", "kt:pso", 100, 0.88, 0.01),
        _rec("s/A", "kt:mls", 100, 0.95, 0.01),
        _rec("s/B", "wf-default", 100, 0.5, 0.01),
    ]  # no kt rows for B: nothing to compare
    rows = compare_to_kt(recs)
    assert [(c.space, c.budget, c.best_kt) for c in rows] == [("s/A", 50, "kt:pso"), ("s/A", 100, "kt:mls")]
    assert [c.met for c in rows] == [False, False]  # 0.8 vs 0.85 and 0.9 vs 0.95, se 0.014 each


def test_a_space_held_by_two_files_counts_once() -> None:
    recs = [
        _rec("convolution_milo/A100", "wf-default", 100, 0.90, 0.01, digest="d1"),
        _rec("convolution_milo/A100_T4", "wf-default", 100, 0.90, 0.01, digest="d1"),
        _rec("gemm/X", "wf-default", 100, 1.00, 0.00, digest="d2"),
    ]
    assert [r.space for r in distinct(recs)] == ["convolution_milo/A100", "gemm/X"]
    a100, mean = absolute_targets(recs)
    assert a100.value == pytest.approx(0.90) and not a100.met  # goal 0.93
    assert mean.value == pytest.approx(0.95) and not mean.met  # (0.90 + 1.00) / 2, not (0.9 + 0.9 + 1) / 3
    assert "2 distinct spaces" in mean.what
    assert absolute_targets([_rec("convolution_milo/A100", "wf-default", 100, 0.97, 0.0)])[1].met


def test_a_file_passed_twice_and_t4_first_still_count_once() -> None:
    twice = [
        _rec("gemm/X", "wf-default", 100, 1.00, 0.0, digest="d2"),
        _rec("gemm/X", "kt:pso", 100, 0.9, 0.0, digest="d2"),
    ] * 2
    t4_first = [
        _rec("convolution_milo/A100_T4", "wf-default", 100, 0.80, 0.01, digest="d1"),
        _rec("convolution_milo/A100", "wf-default", 100, 0.80, 0.01, digest="d1"),
    ]
    recs = t4_first + twice
    assert len(compare_to_kt(recs)) == 1  # gemm/X once; A100 has no kt rows here
    a100, mean = absolute_targets(recs)
    assert a100.value == pytest.approx(0.80)  # found through the T4 file's identical records
    assert mean.value == pytest.approx(0.90) and "2 distinct spaces" in mean.what


def test_kt_rows_of_another_space_with_the_same_name_are_not_pooled() -> None:
    recs = [
        _rec("s/A", "wf-default", 100, 0.9, 0.01, digest="one"),
        _rec("s/A", "kt:pso", 100, 0.5, 0.01, digest="one"),
        _rec("s/A", "wf-default", 100, 0.7, 0.01, digest="two"),
        _rec("s/A", "kt:mls", 100, 0.99, 0.01, digest="two"),
    ]
    assert [(c.ours, c.best_kt) for c in compare_to_kt(recs)] == [(0.9, "kt:pso"), (0.7, "kt:mls")]


def test_digest_is_the_records_not_the_name() -> None:
    rows = {(1,): RecordedTime("ok", 2.0), (2,): RecordedTime("runtime")}
    a = RecordedSpace("A100", "conv", [8], {"x": [1, 2]}, dict(rows), source="a.json.gz")
    b = RecordedSpace("A100", "conv", [8], {"x": [1, 2]}, dict(reversed(list(rows.items()))), source="b.t4")
    c = RecordedSpace("A100", "conv", [8], {"x": [1, 2]}, {**rows, (1,): RecordedTime("ok", 2.5)})
    assert space_digest(a) == space_digest(b) != space_digest(c)


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("bench-search")(handle_errors(bench_search))  # as mounted: through the boundary
    app.command("noop")(lambda: None)
    return app


def _tiny(tmp_path: Path) -> Path:
    params = {"a": [1, 2, 3, 4], "b": [1, 2, 3]}
    rows = [({"a": a, "b": b}, float(1 + abs(a - 3) + abs(b - 2)), []) for a in params["a"] for b in params["b"]]
    return write_cache(tmp_path / "tiny.json.gz", "GPU", "tiny", 1, params, rows)


def test_save_json_writes_what_json_prints(tmp_path: Path) -> None:
    tiny, out = _tiny(tmp_path), tmp_path / "records.json"
    args = ["bench-search", str(tiny), "--samplers", "random", "--budgets", "3", "--repeats", "2", "--jobs", "1"]
    table = CliRunner().invoke(_app(), [*args, "--save-json", str(out)])
    assert table.exit_code == 0, table.output
    assert "fraction of the optimum" in table.stdout
    printed = CliRunner().invoke(_app(), [*args, "--json"])

    def timeless(text: str) -> list[dict[str, object]]:  # wall_s is the only field a rerun changes
        return [{k: v for k, v in r.items() if k != "wall_s"} for r in json.loads(text)]

    saved = timeless(out.read_text())
    assert saved == timeless(printed.stdout) and len(saved) == 1 and saved[0]["digest"]
    bad = CliRunner().invoke(_app(), [*args, "--save-json", str(tmp_path / "no" / "such" / "r.json")])
    assert bad.exit_code == 2 and "no such directory" in bad.output
    folder = CliRunner().invoke(_app(), [*args, "--save-json", str(tmp_path)])
    assert folder.exit_code == 2 and "is a directory" in folder.output


def test_save_json_failing_after_the_run_still_prints_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(self: Path, *args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    res = CliRunner().invoke(
        _app(),
        [
            "bench-search",
            str(_tiny(tmp_path)),
            "--samplers",
            "random",
            "--budgets",
            "3",
            "--repeats",
            "2",
            "--jobs",
            "1",
            "--save-json",
            str(tmp_path / "r.json"),
        ],
    )
    assert res.exit_code == 1 and "fraction of the optimum" in res.stdout
    assert "No space left on device; the records are not saved" in res.output and "Traceback" not in res.output


@pytest.mark.skipif(not kt_available(), reason="Kernel Tuner not installed (pip install 'warpforge[kt]')")
def test_table_prints_the_verdicts_with_kt_rows(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        _app(),
        [
            "bench-search",
            str(_tiny(tmp_path)),
            "--samplers",
            "wf-default",
            "--baselines",
            "kt:random_sample",
            "--budgets",
            "12",
            "--repeats",
            "2",
            "--jobs",
            "1",
        ],
    )
    assert res.exit_code == 0, res.output
    # 12 budget on a 12-configuration space: both reach the optimum, so the verdict is "met" at difference 0.
    assert "targets: wf-default against" in res.stdout and "issue" not in res.stdout and "+0.000" in res.stdout
    verdict = [line for line in res.stdout.splitlines() if "kt:random_sample" in line and "+0.000" in line]
    assert len(verdict) == 1 and re.search(r"│\s*met\s*│", verdict[0]), res.stdout  # the cell, not the legend
