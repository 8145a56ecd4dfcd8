"""A newcomer, round four: bad option values are usage errors (exit 2, one line on stderr, with ``--json`` too),
an LLM run whose every call failed says why and exits 1, by-path tasks are named by what works.

Old behaviour each test guards against (named in each): ``best matmul --shape M=abc`` (or ``4096``, ``X=1``)
exited 1 as "no measured result" and with ``--json`` printed ``[]`` with nothing on stderr; ``results --verdict
okk`` listed nothing and exited 0; ``plan predict --tp 0`` was an internal ZeroDivisionError; ``run --target
sm_999`` ran and crashed every configuration; ``--time-budget -5`` ran; ``export --format foo`` first looked up
the winner and exited 1 when there was none.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from warpforge.cli import app, main
from warpforge.kernels.taskdef import TaskError, parse_shape_key

TEMPLATE = Path(__file__).resolve().parents[2] / "src" / "warpforge" / "kernels" / "templates" / "softmax"


def usage_error(*args: str) -> str:
    """Through the entry point (``main``), as a shell runs it: Click's own range errors are drawn there."""
    import contextlib
    import io
    import sys
    from unittest import mock

    stdout, stderr = io.StringIO(), io.StringIO()
    with (
        mock.patch.object(sys, "argv", ["warpforge", *args]),
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
        pytest.raises(SystemExit) as stop,
    ):
        main()
    assert stop.value.code == 2, (stop.value.code, stdout.getvalue(), stderr.getvalue())
    lines = [line for line in stderr.getvalue().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr.getvalue()
    assert stdout.getvalue() == "", "nothing on stdout for a refused command (a --json reader would parse it)"
    return lines[0]


# --- --shape ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("shape", "needle"),
    [
        ("M=abc", "M must be a positive integer, got 'abc'"),
        ("4096", "each part is NAME=SIZE, got '4096'"),
        ("X=1", "matmul has no dimension 'X'; its shapes name K, M, N"),  # matmul.py's SHAPES name M, N, K
        ("M=4096", "also name K, N"),  # a stored key names every dimension: a partial one never matches
        ("M=0,N=1,K=1", "M must be a positive integer, got '0'"),
        ("M=1,M=2,N=1", "M is given twice"),
    ],
)
@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_a_bad_shape_is_a_usage_error(stored_db: Path, shape: str, needle: str, json_flag: tuple[str, ...]) -> None:
    # Old: exit 1 "no measured correct result ... for shape M=abc"; with --json "[]" and an empty stderr.
    line = usage_error("best", "matmul", "--shape", shape, "--db", f"sqlite:///{stored_db}", *json_flag)
    assert needle in line and "e.g. --shape K=4096,M=4096,N=4096" in line


def test_a_good_shape_in_any_order_is_the_stored_key() -> None:
    assert parse_shape_key("N=4096, K=8,M=2", ("K", "M", "N")) == "K=8,M=2,N=4096"
    assert parse_shape_key("Q=3") == "Q=3"  # no known dimensions (nothing stored): the syntax alone
    with pytest.raises(TaskError, match="positive integer"):
        parse_shape_key("Q=-3")


def test_a_good_shape_without_a_result_is_still_exit_1(stored_db: Path) -> None:
    res = CliRunner().invoke(
        app, ["best", "matmul", "--shape", "N=4096,K=4096,M=4096", "--db", f"sqlite:///{stored_db}"]
    )
    assert res.exit_code == 1 and "for shape K=4096,M=4096,N=4096" in res.stderr


# --- every other parsed option ---------------------------------------------------------------------------------
PREDICT = ["plan", "predict", "--model", "llama3-70b", "--cluster", "dgx-h100"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["results", "--verdict", "okk"], "unknown verdict 'okk': use one of ok, incorrect,"),
        ([*PREDICT, "--tp", "0"], "'--tp'"),  # old: internal error (ZeroDivisionError), exit 1
        ([*PREDICT, "--pp", "0", "--json"], "'--pp'"),
        ([*PREDICT, "--cp", "0"], "'--cp'"),
        (
            ["plan", "export", "--model", "llama3-70b", "--cluster", "dgx-h100", "--format", "megatron", "--tp", "0"],
            "'--tp'",
        ),
        (["run", "softmax", "--target", "sm_999", "--trials", "1"], "unknown --target 'sm_999'"),
        (["run", "softmax", "--time-budget", "-5", "--json"], "--time-budget must be a positive number"),
        (["eval", "softmax", str(TEMPLATE / "online.py"), "--target", "foo"], "unknown --target 'foo'"),
        (["eval", "softmax", str(TEMPLATE / "online.py"), "--timeout", "0"], "--timeout must be a positive number"),
        (["export", "rmsnorm", "--dest", "DEST", "--format", "foo"], "unknown --format 'foo'"),  # old: exit 1
    ],
)
def test_every_parsed_option_is_checked_before_anything_runs(
    stored_db: Path, tmp_path: Path, args: list[str], needle: str
) -> None:
    args = [str(tmp_path / "out") if a == "DEST" else a for a in args]
    db = ["--db", f"sqlite:///{stored_db}"] if args[0] in ("results", "export", "run") else []
    assert needle in usage_error(*args, *db)
    assert not (tmp_path / "out").exists()


# --- an LLM run whose every call failed --------------------------------------------------------------------------
@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_a_run_whose_proposer_failed_exits_1_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, json_flag: tuple[str, ...]
) -> None:
    # Old: "llm agent: 2 calls (call_failed 2)" among the notes and exit 0. The campaign itself is stood in for
    # (a real one evaluates templates for a minute); the proposer's side is tests/agent/test_evolution.py's.
    from warpforge.search.engine import campaign
    from warpforge.search.engine.summary import CampaignSummary, TaskSummary, VariantSummary

    reason = "every LLM call failed (2 of 2): connection: m: cannot reach http://127.0.0.1:9/v1: is it running?"

    def fake(spec: object, **_: object) -> CampaignSummary:
        task = TaskSummary(
            "softmax",
            "interpret",
            1,
            0,
            "0 of 1 measured",
            [VariantSummary("online", "h", 1)],
            notes=["llm agent: 2 calls (call_failed 2)"],
            failure=reason,
        )
        return CampaignSummary("c1", "sqlite://", False, 0, [task], 1.0)

    monkeypatch.setattr(campaign, "run_campaign", fake)
    res = CliRunner().invoke(
        app,
        ["run", "softmax", "--trials", "1", "--campaign", "c1", "--db", f"sqlite:///{tmp_path / 'wf.db'}", *json_flag],
    )
    assert res.exit_code == 1, (res.stdout, res.stderr)
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: softmax: {reason}; the campaign searched the templates alone (warpforge agent "
        "transcripts c1 shows each call)"
    ]
    if json_flag:
        import json

        assert json.loads(res.stdout)["tasks"][0]["failure"] == reason


# --- by-path tasks -----------------------------------------------------------------------------------------------
# A KernelBench problem (its format: Model, get_inputs, get_init_inputs) written here, so no ../shared is needed.
PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


batch_size = 16
dim = 64


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
"""


@pytest.fixture
def by_path_db(tmp_path: Path) -> tuple[str, Path]:
    """A database holding one CPU campaign of a by-path problem (``run kb/23_Softmax.py``), stored as the
    campaign stores it: the task named by the file's stem, the spec naming the cached copy it ran (a problem
    matched to the softmax templates) and the user's file."""
    import json
    from datetime import datetime, timezone

    from warpforge.db.models import Campaign, Evaluation, VariantRecord
    from warpforge.db.session import Database

    problem = tmp_path / "kb" / "23_Softmax.py"
    problem.parent.mkdir()
    problem.write_text(PROBLEM)
    url = f"sqlite:///{tmp_path / 'wf.db'}"
    db = Database(url)
    db.upgrade()
    with db.session() as s:
        t0 = datetime(2026, 12, 2, 6, 0, tzinfo=timezone.utc)
        copy = tmp_path / "cache" / "matched" / "23_Softmax.py"  # what a matched problem runs from
        copy.parent.mkdir(parents=True)
        copy.write_text(PROBLEM)
        spec = {"tasks": [str(copy)], "task_files": [str(problem)], "backend": "interpret"}
        c = Campaign(name="kb-cpu", status="finished", spec=spec, created_at=t0, updated_at=t0)
        v = VariantRecord(source_hash="m" * 64, task="23_Softmax", name="multi_row", source="#", space={})
        params = {"TILE": 1024, "num_warps": 4, "num_stages": 1}
        facts = [
            {
                "kernel": "_softmax_2d_kernel",
                "target": "sm_90",
                "registers": 40,
                "spill_bytes": 0,
                "shared_bytes": 128,
                "compile_s": 0.5,
                "shape": {"M": 16, "N": 64},
                "dtype": "float32",
                "num_warps": 4,
            }
        ]
        s.add_all(
            [
                c,
                v,
                Evaluation(
                    campaign=c,
                    task="23_Softmax",
                    variant=v,
                    variant_hash=v.source_hash,
                    params=params,
                    params_key=json.dumps(params, sort_keys=True),
                    result={"resources": facts},
                    created_at=t0,
                    backend="interpret",
                    verdict="ok",
                    device="cpu (triton interpreter)",
                ),
            ]
        )
    return url, problem


def test_a_static_ranking_of_a_by_path_task_hints_at_its_file(by_path_db: tuple[str, Path]) -> None:
    # Old: "warpforge run 23_Softmax --backend cuda" and "warpforge export 23_Softmax ...": both "unknown task".
    url, problem = by_path_db
    for spelled in ("23_Softmax", str(problem)):  # by the stored name or by the path
        res = CliRunner().invoke(app, ["best", spelled, "--static", "--db", url])
        assert res.exit_code == 0, res.stderr
        text = " ".join(res.stdout.split())
        # the user's file, not the cached copy; compared without blanks: a long tmp_path (xdist's) folds mid-path
        assert f"warpforge run {problem} --backend cuda".replace(" ", "") in "".join(text.split())
        # a PyTorch-module problem is exported through a generated task module (export/bypath.py): offered
        assert f"warpforge export {problem} --allow-untimed".replace(" ", "") in "".join(text.split())
    res = CliRunner().invoke(app, ["results", "--task", str(problem), "--db", url, "--json"])
    assert res.exit_code == 0 and [r["task"] for r in __import__("json").loads(res.stdout)] == ["23_Softmax"]


def test_run_takes_a_by_path_task_by_its_stored_name(by_path_db: tuple[str, Path], tmp_path: Path) -> None:
    # Old: "warpforge run 23_Softmax" (the name best and results print) was "unknown task".
    from warpforge.cli.root import _by_stored_name
    from warpforge.cli.taskref import stored_file

    url, problem = by_path_db
    assert _by_stored_name(url, "23_Softmax", quiet=True) == str(problem)  # the user's file, not the cache's copy
    assert stored_file(url, "softmax") is None and stored_file(url, "24_LogSoftmax") is None
    for gone in (problem, problem.parents[1] / "cache" / "matched" / "23_Softmax.py"):
        gone.unlink()  # a file that is gone is not offered (the matched copy in the cache is the fallback)
    assert stored_file(url, "23_Softmax") is None
    # with no database, a shipped problem's name is answered with its path
    line = usage_error("run", "23_Softmax", "--db", f"sqlite:///{tmp_path / 'none.db'}")
    assert "unknown task '23_Softmax'" in line and "level1/23_Softmax.py" in line and "warpforge run " in line


def test_a_mistyped_task_names_the_close_one_and_the_stored_files(by_path_db: tuple[str, Path]) -> None:
    # Old: "(warpforge tasks lists them)", which lists no by-path task, and no suggestion for the typo.
    url, problem = by_path_db
    line = usage_error("results", "--task", "sotfmax", "--db", url)
    assert "unknown task 'sotfmax' (did you mean 'softmax'?)" in line
    assert f"this database also holds 23_Softmax ({problem})" in line
    assert "did you mean '23_Softmax'?" in usage_error("best", "23_Sofmax", "--db", url)


def test_a_by_path_winner_without_launch_is_refused_by_export_in_one_line(
    by_path_db: tuple[str, Path], tmp_path: Path
) -> None:
    # Old: "reference takes 0 positional arguments but make_inputs returns 1: name every input in reference's
    # signature", about code the user never wrote; by its stored name, "unknown task". A by-path problem exports
    # (tests/export/test_export_bypath.py); this stored winner's source has no launch to wrap in an op.
    url, problem = by_path_db
    for spelled in ("23_Softmax", str(problem)):
        line = usage_error("export", spelled, "--allow-untimed", "--dest", str(tmp_path / "out"), "--db", url)
        assert "23_Softmax: the winner multi_row" in line and "defines no launch function" in line
    assert not (tmp_path / "out").exists()


def test_a_task_module_or_problem_by_path_is_offered_for_export(tmp_path: Path) -> None:
    from warpforge.cli.taskref import exportable

    module = tmp_path / "mine.py"
    module.write_text("def make_inputs(shape, dtype, seed, device):\n    return ()\n")
    problem = tmp_path / "kb.py"
    problem.write_text(PROBLEM)
    other = tmp_path / "notes.py"
    other.write_text("X = 1\n")
    assert exportable(str(module)) and exportable(str(problem)) and exportable("softmax")
    assert not exportable(str(other))


# --- 80 columns: help ----------------------------------------------------------------------------------------------
def _help(*command: str) -> str:
    res = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert res.exit_code == 0, res.stderr
    return res.stdout


@pytest.mark.parametrize(
    "command",
    [(), ("run",), ("eval",), ("best",), ("plan", "predict"), ("plan", "search"), ("export",), ("dashboard",)],
)
def test_a_switch_shows_no_value_in_help(command: tuple[str, ...]) -> None:
    # Old (Typer 0.29's own help): "--compile <bool>", "--json <bool>", even "--help <bool>" and "-v <int>".
    text = _help(*command)
    assert "<bool>" not in text
    assert re.search(r"--help\s+Show this message", text), text
    if not command:
        assert re.search(r"--verbose\s+-v\s+log what happens", text), text


def test_an_option_that_takes_a_value_says_so_in_help() -> None:
    # A blank type column reads as a switch: "--max-calls    --proposer llm: LLM call budget." looked like one.
    text = _help("plan", "search")
    assert re.search(r"--max-calls\s+INT\s", text) and re.search(r"--campaign\s+TEXT\s", text), text
    assert re.search(r"--variant-file\s+PATH\s", _help("run")), _help("run")


@pytest.mark.parametrize("command", [("plan", "predict"), ("plan", "search")])
def test_plan_help_choices_are_whole_words_at_80_columns(command: tuple[str, ...]) -> None:
    # Old: "Also export: megatron|torchtitan|de…" and "<any|megatron|torchti" / "tan|deepspeed>".
    text = _help(*command)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text and "torchti\n" not in text
    assert "megatron|" not in text  # the choices are said in words, which wrap between them
    assert "torchtitan" in text and "deepspeed" in text


def _command_paths(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if hasattr(command, "commands"):  # a group
        return [path] + [p for name, sub in command.commands.items() for p in _command_paths(sub, (*path, name))]
    return [path]


@pytest.mark.parametrize("command", _command_paths(typer.main.get_command(app)), ids=" ".join)
def test_no_help_cuts_a_word_at_80_columns(command: tuple[str, ...]) -> None:
    # Old: run --help cut "--unsafe-run-unsand…" (Typer's generic types took the option names' width) and its
    # "[env var: WARPFORGE_UNSAFE_RUN_UNSA…]".
    text = _help(*command)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text, "\n".join(line for line in text.splitlines() if "…" in line)


# --- said once: tests/cli/test_newcomer.py::test_a_writer_says_when_it_creates_a_directory counts it ---------


# --- docs that agreed with the tool ------------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]


def test_docs_say_what_the_tool_does() -> None:
    # Old: --check "0 usable, 1 not" (a missing database exits 2); the untimed ranking without occupancy
    # (best --static and export rank by it); the agent demo wrote server.txt and demo-llm.yaml into the checkout;
    # the README's database path was the machine's it was written on.
    dashboard = " ".join((ROOT / "docs" / "dashboard.md").read_text().split())
    assert "2 when the URL names no database" in dashboard
    export = " ".join((ROOT / "docs" / "export.md").read_text().split())
    assert "fewest spilled bytes, then highest occupancy" in export
    agent = (ROOT / "docs" / "agent.md").read_text()
    assert re.search(r">\s*server\.txt|cat > demo-llm\.yaml", agent) is None
    assert "/tmp/nc" not in (ROOT / "README.md").read_text()
    ignored = (ROOT / ".gitignore").read_text().split()
    assert "/server.txt" in ignored and "/demo-llm.yaml" in ignored


def test_dashboard_check_exits_2_without_a_database(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["dashboard", "--check", "--db", f"sqlite:///{tmp_path / 'none.db'}"])
    assert res.exit_code == 2, res.stderr


def test_doctor_folds_a_long_path_instead_of_cutting_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Old: "none under /tmp/.../a-rather-long-directory-name-for-re…": the path a user must fix was cut. The
    # checks are stood in for (the real ones probe Triton for 15-20 s); the table is the command's own.
    from warpforge import doctor

    long = tmp_path / ("a-rather-long-directory-name-for-recordings" * 2) / "recordings"
    monkeypatch.setattr(
        doctor,
        "run_checks",
        lambda db: [
            doctor.Check(
                "replay recordings", False, f"none under {long}: --backend replay has nothing to replay", required=False
            )
        ],
    )
    res = CliRunner().invoke(app, ["doctor"], env={"COLUMNS": "80"})
    assert res.exit_code == 0 and "…" not in res.stdout
    cells = "".join(line.split("│")[3].strip() for line in res.stdout.splitlines() if line.count("│") == 4)
    assert str(long) in cells


def test_eval_names_each_kernel_line_by_its_shape_and_dtype() -> None:
    # Old: "  _matmul_kernel [sm_90] registers=... spill=0B shared=...B" twelve times, nothing to tell them apart.
    from warpforge.cli.root import _resource_lines
    from warpforge.evaluator.result import Resources

    lines = _resource_lines(
        [
            Resources(
                kernel="_mm",
                target="sm_90",
                registers=128,
                spill_bytes=0,
                shared_bytes=65536,
                shape={"N": 512, "M": 256, "K": 64},
                dtype="float16",
                num_warps=4,
            ),
            Resources(kernel="_mm", target="sm_90", registers=96),
        ]
    )
    assert lines == [
        "  _mm [sm_90] K=64,M=256,N=512 float16 warps=4: registers=128 spill=0B shared=65536B",
        "  _mm [sm_90]: registers=96 spill=? shared=?",
    ]
