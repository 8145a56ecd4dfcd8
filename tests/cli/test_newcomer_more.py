"""What a newcomer meets, the rest of issue 19: ``plan predict --db`` that cannot store, planner titles and their
legend, and Click's own usage errors as one line at 80 columns.

Old behaviour each test guards against (named in each): the prediction was dropped when storing failed; titles
said ``64 x dgx-h100`` for 64 GPUs; ``norc``/``z2``/``v2`` and rank gaps were not explained; a missing argument
came in Rich's boxed panel whose text wraps inside the box at 80 columns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from warpforge.cli.plan_render import gpus_label, legend

PREDICT = ["plan", "predict", "--model", "llama3-70b", "--cluster", "dgx-h100", "--tp", "8", "--pp", "4", "--dp", "2"]


def wf(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "COLUMNS": "80", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "warpforge.cli", *args], capture_output=True, text=True, env=full, timeout=300
    )


def one_line_error(proc: subprocess.CompletedProcess[str], code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert not any(ch in proc.stderr for ch in "╭╰│"), "a Rich panel"
    return lines[0]


# --- plan predict --db that cannot store ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "code", "needle"),
    [
        # a file that is not a database: the URL names no database (exit 2), found only when storing
        (
            lambda tmp: tmp.joinpath("notes.txt").write_text("hello") and f"sqlite:///{tmp / 'notes.txt'}",
            2,
            "is not a SQLite database",
        ),
        # a directory that cannot be made (under a regular file): right URL, cannot be used now (exit 1)
        (
            lambda tmp: tmp.joinpath("f").write_text("x") and f"sqlite:///{tmp / 'f' / 'sub' / 'wf.db'}",
            1,
            "cannot create",
        ),
    ],
)
def test_a_prediction_that_cannot_be_stored_is_still_printed(tmp_path: Path, make, code: int, needle: str) -> None:
    # Old: the DatabaseError came before printing: one error line and no prediction, exit 1 for both.
    url = make(tmp_path)
    proc = wf(*PREDICT, "--db", url)
    line = one_line_error(proc, code)
    assert "the prediction above was not stored" in line and needle in line
    assert "llama3-70b on 64 GPUs (8 x dgx-h100): tp8 pp4 dp2 mb1 sel z1" in proc.stdout
    assert "step time" in proc.stdout and "memory per GPU" in proc.stdout
    doc = wf(*PREDICT, "--db", url, "--json")
    assert doc.returncode == code
    payload = json.loads(doc.stdout)
    assert payload["stored"] == 0 and needle in payload["store_error"] and payload["step_time_s"] > 0


def test_a_url_with_an_unknown_scheme_stops_before_predicting() -> None:
    proc = wf(*PREDICT, "--db", "nosuchdialect://x")
    assert "unknown database scheme" in one_line_error(proc, 2) and proc.stdout == ""


def test_a_prediction_that_is_stored_says_so(tmp_path: Path) -> None:
    proc = wf(*PREDICT, "--db", f"sqlite:///{tmp_path / 'wf.db'}", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["stored"] == 1
    assert json.loads(proc.stdout)["store_error"] is None


# --- planner titles and legend -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("gpus", "per_node", "expected"),
    [
        (64, 8, "64 GPUs (8 x dgx-h100)"),  # old: "64 x dgx-h100"
        (8, 8, "8 GPUs (1 x dgx-h100)"),
        (4, 8, "4 GPUs of 1 x dgx-h100 (8 GPUs per node)"),
        (1, 8, "1 GPU of 1 x dgx-h100 (8 GPUs per node)"),
    ],
)
def test_titles_count_gpus_and_nodes_apart(gpus: int, per_node: int, expected: str) -> None:
    assert gpus_label(gpus, "dgx-h100", per_node) == expected


def test_legend_explains_every_abbreviation_shown_and_only_those() -> None:
    text = legend(["tp2 pp4 dp2 cp4 mb1 v2 norc z2", "tp8 pp1 dp8 mb2 full z3 fp8"])
    for needle in (
        "tp pp dp cp = tensor, pipeline, data, context parallel sizes",
        "mbN = N sequences per micro-batch",
        "vN = N interleaved model chunks per pipeline rank",
        "norc = no activation recompute",
        "full = full activation recompute",
        "zN = ZeRO stage N",
        "fp8 = FP8 GEMMs",
    ):
        assert needle in text, needle
    assert "sel =" not in text and "ep" not in text.split("=")[0]
    assert legend(["tp8 pp1 dp8 mb1 sel z1"]) == (
        "plan: tp pp dp = tensor, pipeline, data parallel sizes; mbN = N "
        "sequences per micro-batch; sel = selective activation recompute; "
        "zN = ZeRO stage N (z1 shards optimizer states, z2 also gradients, "
        "z3 also weights)"
    )


def test_plan_search_explains_its_rank_gaps() -> None:
    # llama3-70b on 8 DGX H100 nodes: the top 5 distinct layouts are ranks 1, 4, 5, 6, 7 (snapshots/plan_search.txt)
    proc = wf("plan", "search", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--no-store")
    flat = " ".join(proc.stdout.split())
    assert proc.returncode == 0 and "on 64 GPUs (8 x dgx-h100)" in flat and "64 x dgx-h100" not in flat
    assert "a gap is a faster plan with the same layout (tp, pp, dp, cp, ep) as one shown" in flat
    assert "norc = no activation recompute" in flat and "n/v: not validated" in flat


# --- Click's own usage errors -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["best"], "Missing argument 'TASK'. (see warpforge best --help)"),
        (["results", "--limit", "abc"], "Invalid value for '--limit'"),
        (["nosuchcommand"], "No such command 'nosuchcommand'."),
        (["plan", "predict", "--model", "llama3-70b"], "Missing option '--cluster'"),
        (["run", "softmax", "--nope"], "No such option: --nope"),
    ],
)
def test_usage_errors_are_one_line_exit_2(args: list[str], needle: str) -> None:
    # Old: "Usage: ...", "Try ...", then the message in a Rich panel ("╭─ Error ─...") wrapped inside the box.
    assert needle in one_line_error(wf(*args), 2)


def test_help_still_exits_0_and_no_arguments_shows_help() -> None:
    assert wf("best", "--help").returncode == 0
    bare = wf()
    assert bare.returncode == 2 and "Usage" in bare.stdout + bare.stderr
