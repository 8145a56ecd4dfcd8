"""bench-search: exact random expectation, replay harness, and the Typer command."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from warpforge.cli import handle_errors
from warpforge.cli.bench import bench_search
from warpforge.evaluator.run.recorded_spaces import RecordedSpace, RecordedTime, read_space, write_cache
from warpforge.search.bench.harness import bench, random_expectation
from warpforge.search.samplers.registry import DEFAULT_SAMPLER

SPACES = Path(__file__).resolve().parents[2].parent / "shared" / "spaces"
needs_spaces = pytest.mark.skipif(
    not (SPACES / "README.md").is_file(), reason=f"recorded spaces not found at {SPACES} (../shared/spaces)"
)


def _readme_table() -> dict[str, list[float]]:
    """The README's 'Difficulty anchor' rows: space -> expected fraction at k = 20/50/100/200."""
    rows = {}
    for line in (SPACES / "README.md").read_text().splitlines():
        m = re.match(r"\|\s*([\w/]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|$", line)
        if m:
            rows[m.group(1)] = [float(v) for v in m.groups()[1:]]
    return rows


@needs_spaces
def test_random_expectation_matches_readme_table() -> None:
    table = _readme_table()
    assert len(table) == 7
    for name, expected in table.items():
        rec = read_space(SPACES / f"{name}.json.gz")
        got = [random_expectation(rec, k) for k in (20, 50, 100, 200)]
        assert got == pytest.approx(expected, abs=5e-4), name


def test_random_expectation_small_cases() -> None:
    ok = {(i,): RecordedTime("ok", float(i)) for i in (1, 2, 4)}
    rec = RecordedSpace("", "", None, {"x": [1, 2, 3, 4]}, {**ok, (3,): RecordedTime("compile")})
    # k = 1: mean of 1/1, 1/2, 1/4 and 0 (the failure)
    assert random_expectation(rec, 1) == pytest.approx((1 + 0.5 + 0.25 + 0) / 4)
    assert random_expectation(rec, 4) == pytest.approx(1.0)
    assert random_expectation(rec, 99) == pytest.approx(1.0)


def _tiny_cache(tmp_path: Path) -> Path:
    params = {"a": [1, 2, 3, 4], "b": [1, 2, 3]}
    records = [
        ({"a": a, "b": b}, float(1 + abs(a - 3) + abs(b - 2)), [])
        for a in params["a"]
        for b in params["b"]
        if (a, b) != (4, 3)
    ]
    records.append(({"a": 4, "b": 3}, "RuntimeFailedConfig", []))
    return write_cache(tmp_path / "tiny.json.gz", "GPU", "tiny", 1, params, records)


def test_bench_on_a_tiny_space_reaches_the_optimum_when_exhausted(tmp_path: Path) -> None:
    path = _tiny_cache(tmp_path)
    recs = bench([path], ["random", DEFAULT_SAMPLER], [2, 12, 50], repeats=3, jobs=1)
    assert [(r.sampler, r.budget) for r in recs] == [
        ("random", 2),
        ("random", 12),
        ("random", 50),
        (DEFAULT_SAMPLER, 2),
        (DEFAULT_SAMPLER, 12),
        (DEFAULT_SAMPLER, 50),
    ]
    for r in recs:
        assert 0 <= r.mean <= 1 and r.stderr >= 0 and r.repeats == 3
        if r.budget >= 12:  # 12 configurations: every one has been evaluated
            assert r.mean == 1.0 and r.random == pytest.approx(1.0)
            assert r.failed_evals == 1.0
        assert r.wasted_duplicate == 0  # random and the default pick among unseen rows directly


@needs_spaces
def test_measured_random_agrees_with_the_exact_expectation() -> None:
    (rec,) = bench([SPACES / "pnpoly" / "RTX_3090.json.gz"], ["random"], [20], repeats=40, jobs=2)
    assert abs(rec.mean - rec.random) < 4 * rec.stderr + 0.01


@pytest.mark.slow  # ~15-50 s on 2 cores: the slow tier (`make test-slow`)
@needs_spaces
def test_default_beats_random_at_small_budget() -> None:
    (rec,) = bench([SPACES / "pnpoly" / "RTX_3090.json.gz"], [DEFAULT_SAMPLER], [50], repeats=6, jobs=2)
    assert rec.mean > rec.random + 0.03, (rec.mean, rec.random)


# --- the Typer command ------------------------------------------------------------------------------
def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("bench-search")(handle_errors(bench_search))  # as mounted: through the boundary

    @app.command("noop")
    def _noop() -> None:  # a second command keeps Typer in multi-command mode, as in cli/root.py
        pass

    return app


runner = CliRunner()


def test_cli_json(tmp_path: Path) -> None:
    path = _tiny_cache(tmp_path)
    res = runner.invoke(
        _app(),
        [
            "bench-search",
            str(path),
            "--samplers",
            "random,tpe",
            "--budgets",
            "3,6",
            "--repeats",
            "2",
            "--jobs",
            "1",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    records = json.loads(res.stdout)
    assert len(records) == 4
    assert {"space", "sampler", "budget", "mean", "stderr", "random"} <= records[0].keys()
    assert records[0]["space"] == f"{tmp_path.name}/tiny"


def test_cli_table(tmp_path: Path) -> None:
    path = _tiny_cache(tmp_path)
    res = runner.invoke(
        _app(), ["bench-search", str(path), "--samplers", "random", "--budgets", "3", "--repeats", "2", "--jobs", "1"]
    )
    assert res.exit_code == 0, res.output
    assert "fraction of the optimum" in res.stdout and "random (exact)" in res.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["missing.json.gz"], "no such file"),
        (["{tiny}", "--samplers", "nope"], "unknown sampler 'nope'"),
        (["{tiny}", "--budgets", "10,x"], "--budgets must be positive integers"),
        (["{bad}"], "not valid JSON"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{broken")
    tiny = _tiny_cache(tmp_path)
    argv = ["bench-search", *[a.format(tiny=tiny, bad=bad) for a in args], "--repeats", "1", "--jobs", "1"]
    res = runner.invoke(_app(), argv)
    assert res.exit_code == 2
    assert message in res.output
    assert "Traceback" not in res.output and isinstance(res.exception, SystemExit)  # a clean exit, not a crash
    assert res.output.strip().count("\n") == 0


def test_the_table_fits_80_columns_with_four_budgets_and_long_names() -> None:
    """Piped output (no terminal) used to print 160 columns; at 80, Rich squeezed 11 columns to a few characters
    each. Every line fits the width, and every mean and standard error is printed whole."""
    from rich.console import Console

    from warpforge.search.bench.harness import BenchRecord, render_table

    records = [
        BenchRecord(
            space="convolution_milo/RTX_A4000",
            sampler=s,
            budget=b,
            repeats=10,
            mean=0.912345,
            stderr=0.012345,
            random=0.5,
            wall_s=1.5,
            wasted_infeasible=0.0,
            wasted_duplicate=1.0,
            failed_evals=0.0,
            n_configs=1000,
            optimum_ms=1.0,
            evaluations=float(b),
            collapse=3,
            collapse_fraction=0.987,
        )
        for s in ("random", "tpe", "wf-default@4")
        for b in (20, 50, 100, 200)
    ]
    console = Console(width=80, record=True)
    console.print(render_table(records, console.width))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert text.count("0.912") == 12 and text.count("±0.012") == 12 and "wf-default@4" in text
    first_column = "".join(line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│"))
    assert "convolution_milo/RTX_A4000" in first_column  # folded in its cell, never cut
    # The random baseline on its own row, not on the space's; one header a column (old: "s/run" over "wasted").
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│")]
    (baseline,) = [r for r in rows if r[0] == "random (exact)"]
    assert baseline[1:] == ["0.500"] * 4
    assert all(r[1:] == [""] * (len(r) - 1) for r in rows if r[0].startswith("convolution_milo"))
    cost_header = [
        [c.strip() for c in line.split("┃")[1:-1]]
        for line in text.split("cost of each search")[1].splitlines()
        if line.startswith("┃")
    ]
    assert [cells[1:] for cells in cost_header] == [["", "", "", ""], ["s/run", "wasted", "evals", "same end"]]
