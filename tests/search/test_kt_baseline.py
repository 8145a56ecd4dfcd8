"""bench-search --baselines kt: Kernel Tuner's budget accounting on a hand-made cache, seeding, collapse count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from warpforge.evaluator.run.recorded_spaces import RecordedSpace, RecordedTime, read_space, write_cache
from warpforge.search.bench.harness import bench, collapse
from warpforge.search.bench.kt_baseline import expand_baselines, run_kt

pytest.importorskip("kernel_tuner")

SPACES = Path(__file__).resolve().parents[2].parent / "shared" / "spaces"

# a in 1..4, b in 1..3: 12 combinations, 5 of them in the file. Absent (outside the restrictions): 7.
# In the file: (1,1) 2.0 ms, (2,2) 1.0 ms (the optimum), (3,3) 4.0 ms, (4,1) runtime failure, (4,3) compile failure.
IN_FILE = {(1, 1): 2.0, (2, 2): 1.0, (3, 3): 4.0, (4, 1): "RuntimeFailedConfig", (4, 3): "CompilationFailedConfig"}


def _toy(tmp_path: Path) -> Path:
    rows = [({"a": a, "b": b}, t, []) for (a, b), t in IN_FILE.items()]
    return write_cache(tmp_path / "toy.json.gz", "GPU", "toy", 1, {"a": [1, 2, 3, 4], "b": [1, 2, 3]}, rows)


def _by_hand(keys: tuple[tuple[int, ...], ...]) -> tuple[int, int, float]:
    """(evaluations, failures, fraction) of a run that evaluated ``keys``, from IN_FILE alone."""
    times = [IN_FILE[k] for k in keys]
    ok = [t for t in times if isinstance(t, float)]
    return len(keys), len(times) - len(ok), (1.0 / min(ok) if ok else 0.0)


def test_random_sample_exhausts_the_file(tmp_path: Path) -> None:
    rec = read_space(_toy(tmp_path))
    # Budget 5 = every configuration in the file: 5 distinct evaluations, both failures paid for,
    # none of the 7 absent ones (they would raise in Kernel Tuner's simulation runner), optimum found.
    run = run_kt(rec, "random_sample", seed=3, budget=5)
    assert (run.evaluations, run.failed, run.fraction, run.best_key) == (5, 2, 1.0, (2, 2))
    assert set(run.keys) == set(IN_FILE)
    # A budget beyond the space is clipped to it (Kernel Tuner adjusts max_fevals to the space size).
    assert run_kt(rec, "random_sample", seed=3, budget=50).evaluations == 5


@pytest.mark.parametrize("strategy", ["random_sample", "genetic_algorithm", "greedy_mls", "simulated_annealing"])
@pytest.mark.parametrize("budget", [2, 4])
def test_budget_counts_distinct_in_file_configs_and_failures(tmp_path: Path, strategy: str, budget: int) -> None:
    rec = read_space(_toy(tmp_path))
    for seed in range(3):
        run = run_kt(rec, strategy, seed=seed, budget=budget)
        assert set(run.keys) <= set(IN_FILE) and len(set(run.keys)) == len(run.keys)
        # never more than the budget; fewer only when the strategy ends on its own (GA on 5 configurations)
        assert 1 <= run.evaluations <= budget
        if strategy in ("random_sample", "greedy_mls"):
            assert run.evaluations == budget
        assert (run.evaluations, run.failed, run.fraction) == _by_hand(run.keys)


def test_bench_records_for_kt_rows(tmp_path: Path) -> None:
    path = _toy(tmp_path)
    recs = bench([path], ["kt:random_sample"], [5], repeats=3, jobs=1)
    (r,) = recs
    assert (r.sampler, r.mean, r.failed_evals, r.evaluations) == ("kt:random_sample", 1.0, 2.0, 5.0)
    assert (r.collapse, r.collapse_fraction) == (3, 1.0)  # exhausted: every repeat ends on the optimum


@pytest.mark.skipif(not (SPACES / "README.md").is_file(), reason="recorded spaces not found (../shared/spaces)")
@pytest.mark.parametrize("strategy", ["bayes_opt", "diff_evo", "genetic_algorithm"])
def test_same_seed_same_run(strategy: str) -> None:
    # bayes_opt and diff_evo draw scipy Latin hypercubes without a seed; they must still repeat.
    rec = read_space(SPACES / "pnpoly" / "RTX_3090.json.gz")
    a, b = (run_kt(rec, strategy, seed=7, budget=25) for _ in range(2))
    assert (a.keys, a.best_key, a.fraction, a.revisits) == (b.keys, b.best_key, b.fraction, b.revisits)
    assert a.evaluations == 25 and len(a.keys) == 25
    # ... and the seed is what decides it: another seed takes another path (a run that ignored its seed, or
    # seeded everything from a constant, would pass the line above).
    others = [run_kt(rec, strategy, seed=s, budget=25) for s in (8, 9)]
    assert any(o.keys != a.keys for o in others)


def test_collapse_count_by_hand() -> None:
    rec = RecordedSpace(
        "",
        "",
        None,
        {"x": [1, 2, 3]},
        {(1,): RecordedTime("ok", 1.0), (2,): RecordedTime("ok", 4.0), (3,): RecordedTime("ok", 2.0)},
    )
    assert collapse(rec, [(2,), (2,), (2,), (1,)]) == (3, 0.25)
    assert collapse(rec, [(3,), (1,), (3,), (1,)]) == (2, 1.0)  # a tie reports the faster configuration
    assert collapse(rec, [None, None]) == (0, None)


def test_collapse_in_bench_records(tmp_path: Path) -> None:
    rows = [({"x": x}, float(x), []) for x in (1, 2, 3, 4)]
    path = write_cache(tmp_path / "line.json", "GPU", "line", 1, {"x": [1, 2, 3, 4]}, rows)
    recs = {r.budget: r for r in bench([path], ["random"], [1, 4], repeats=6, jobs=1)}
    assert (recs[4].collapse, recs[4].collapse_fraction) == (6, 1.0)  # all 4 seen: all end on x=1
    assert 1 <= recs[1].collapse <= 6 and recs[1].collapse_fraction in {1.0, 0.5, 1 / 3, 0.25}


def test_expand_baselines() -> None:
    assert "kt:genetic_algorithm" in expand_baselines("kt") and "kt:brute_force" not in expand_baselines("kt")
    assert expand_baselines("kt:pso, kt:pso,kt:mls") == ["kt:pso", "kt:mls"]
    with pytest.raises(ValueError, match="unknown baseline 'optuna'"):
        expand_baselines("optuna")


def test_cli_baselines(tmp_path: Path) -> None:
    from tests.search.test_bench import _app

    path = _toy(tmp_path)
    runner = CliRunner()
    res = runner.invoke(
        _app(),
        [
            "bench-search",
            str(path),
            "--samplers",
            "random",
            "--baselines",
            "kt:random_sample",
            "--budgets",
            "2,5",
            "--repeats",
            "2",
            "--jobs",
            "1",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [(r["sampler"], r["budget"]) for r in rows] == [
        ("random", 2),
        ("random", 5),
        ("kt:random_sample", 2),
        ("kt:random_sample", 5),
    ]
    assert rows[-1]["collapse"] == 2 and rows[-1]["evaluations"] == 5
    res = runner.invoke(_app(), ["bench-search", str(path), "--baselines", "kt:nope", "--repeats", "1", "--jobs", "1"])
    assert res.exit_code == 2 and "unknown Kernel Tuner strategy 'nope'" in res.output
