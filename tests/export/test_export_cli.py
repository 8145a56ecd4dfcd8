"""``warpforge export``: exit codes and one-line refusals, over a database filled through db/store.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from export_fill import decide, save
from typer.testing import CliRunner

from warpforge.cli import app

A = "M=4096,N=4096"


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'wf.db'}"
    win = save(
        url,
        "rmsnorm",
        "single_pass",
        {"ROWS_PER_PROGRAM": 1, "num_warps": 8, "num_stages": 1},
        times={A: (0.1, 0.11, 0.12)},
    )
    save(url, "swiglu", "flat", {"BLOCK": 1024, "num_warps": 4, "num_stages": 1}, resources=[(32, 0, 0)])
    decide(url, win, low=1.1, high=1.3)
    return url


def test_exports_and_reports_json(db: str, tmp_path: Path) -> None:
    dest = tmp_path / "out"
    args = ["export", "rmsnorm", "--dest", str(dest), "--namespace", "mykernels", "--json", "--db", db]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    assert payload["ops"]["rmsnorm"]["untimed"] is False and (dest / "mykernels" / "rmsnorm.py").is_file()
    again = CliRunner().invoke(app, args)
    assert json.loads(again.stdout)["written"] == []


def test_untimed_task_is_refused_in_one_line_without_the_flag(db: str, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["export", "swiglu", "--dest", str(tmp_path / "o"), "--db", db])
    assert res.exit_code == 1
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "no accepted winner" in lines[0] and "--allow-untimed" in lines[0]
    ok = CliRunner().invoke(app, ["export", "swiglu", "--dest", str(tmp_path / "o"), "--allow-untimed", "--db", db])
    assert ok.exit_code == 0 and "NEVER TIMED" in ok.stdout


def test_wrong_gpu_is_refused(db: str, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["export", "rmsnorm", "--dest", str(tmp_path / "o"), "--gpu", "A100", "--db", db])
    assert res.exit_code == 1 and "no accepted result for GPU 'A100'" in res.stderr


@pytest.mark.parametrize(
    "args", [["nosuchtask"], ["rmsnorm", "--namespace", "Bad-Name"], ["rmsnorm", "--format", "wheel"]]
)
def test_usage_errors_exit_2(db: str, tmp_path: Path, args: list[str]) -> None:
    res = CliRunner().invoke(app, ["export", *args, "--dest", str(tmp_path / "o"), "--db", db])
    assert res.exit_code == 2, res.output
