"""``warpforge export``: exit codes and one-line refusals (the reader is the stand-in, see export_reader.py)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from export_fill import save
from export_reader import StandInReader, decision_from
from typer.testing import CliRunner

from warpforge.cli import app

A = "M=4096,N=4096"


@pytest.fixture
def reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StandInReader:
    url = f"sqlite:///{tmp_path / 'wf.db'}"
    win = save(url, "rmsnorm", "single_pass", {"ROWS_PER_PROGRAM": 1, "num_warps": 8, "num_stages": 1},
               times={A: (0.1, 0.11, 0.12)})
    save(url, "swiglu", "flat", {"BLOCK": 1024, "num_warps": 4, "num_stages": 1}, resources=[(32, 0, 0)])
    r = StandInReader(url)
    r.add_decision(decision_from(r, win, low=1.1, high=1.3))
    try:
        import warpforge.db.queries as queries  # the real read layer, once it is on main

        monkeypatch.setattr(queries, "Reader", lambda url=None: r)
    except ImportError:
        monkeypatch.setitem(sys.modules, "warpforge.db.queries", types.SimpleNamespace(Reader=lambda url=None: r))
    return r


def test_exports_and_reports_json(reader: StandInReader, tmp_path: Path) -> None:
    dest = tmp_path / "out"
    res = CliRunner().invoke(app, ["export", "rmsnorm", "--dest", str(dest), "--namespace", "mykernels", "--json"])
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    assert payload["ops"]["rmsnorm"]["untimed"] is False and (dest / "mykernels" / "rmsnorm.py").is_file()
    again = CliRunner().invoke(app, ["export", "rmsnorm", "--dest", str(dest), "--namespace", "mykernels", "--json"])
    assert json.loads(again.stdout)["written"] == []


def test_untimed_task_is_refused_in_one_line_without_the_flag(reader: StandInReader, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["export", "swiglu", "--dest", str(tmp_path / "o")])
    assert res.exit_code == 1
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "no accepted winner" in lines[0] and "--allow-untimed" in lines[0]
    ok = CliRunner().invoke(app, ["export", "swiglu", "--dest", str(tmp_path / "o"), "--allow-untimed"])
    assert ok.exit_code == 0 and "NEVER TIMED" in ok.stdout


def test_wrong_gpu_is_refused(reader: StandInReader, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["export", "rmsnorm", "--dest", str(tmp_path / "o"), "--gpu", "A100"])
    assert res.exit_code == 1 and "no accepted result for GPU 'A100'" in res.stderr


@pytest.mark.parametrize("args", [["nosuchtask"], ["rmsnorm", "--namespace", "Bad-Name"],
                                  ["rmsnorm", "--format", "wheel"]])
def test_usage_errors_exit_2(reader: StandInReader, tmp_path: Path, args: list[str]) -> None:
    res = CliRunner().invoke(app, ["export", *args, "--dest", str(tmp_path / "o")])
    assert res.exit_code == 2, res.output
