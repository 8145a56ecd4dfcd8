"""The CLI end to end, through real processes: verdicts, campaigns, storage, resume after kill -9, errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

PLANTED = Path(__file__).parents[1] / "evaluator" / "planted"
TASK = str(PLANTED / "task_double.py")
GOOD = str(PLANTED / "good.py")


def wf(*args: str, db: Path | None = None, check: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WARPFORGE_DB": f"sqlite:///{db}" if db else os.environ.get("WARPFORGE_DB", "")}
    env.pop("TRITON_INTERPRET", None)  # the CLI chooses the interpreter itself, per child
    proc = subprocess.run(
        [sys.executable, "-m", "warpforge.cli", *args],
        capture_output=True,
        text=True,
        env={k: v for k, v in env.items() if v},
        timeout=900,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def rows(db: Path, sql: str) -> list[tuple]:
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        out = [tuple(r) for r in conn.execute(text(sql))]
    engine.dispose()
    return out


def test_tasks_lists_builtin_and_task_files() -> None:
    data = json.loads(wf("tasks", "--task-file", TASK, "--json", check=True).stdout)
    names = {t["name"]: t for t in data}
    assert {"softmax", "rmsnorm", "layernorm", "matmul", "swiglu", "cross_entropy", "double"} <= set(names)
    for name in ("softmax", "rmsnorm", "layernorm", "matmul", "swiglu", "cross_entropy"):
        assert len(names[name]["templates"]) >= 2, name
        assert names[name]["check_shapes"], name


@pytest.mark.slow
@pytest.mark.parametrize(
    ("variant", "verdict", "code"), [("good", "ok", 0), ("wrong", "incorrect", 1), ("return_input", "rejected", 1)]
)
def test_eval_prints_the_verdict(variant: str, verdict: str, code: int) -> None:
    proc = wf("eval", TASK, str(PLANTED / f"{variant}.py"), "--params", '{"BLOCK": 128}', "--json")
    assert proc.returncode == code, proc.stderr
    result = json.loads(proc.stdout)
    assert result["verdict"] == verdict and result["params"] == {"BLOCK": 128, "num_warps": 2}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("eval", "no_such_task", GOOD), "unknown task 'no_such_task'"),
        (("eval", TASK, str(PLANTED / "malformed_space.py")), "SPACE must be a literal"),
        (("eval", TASK, GOOD, "--params", "{not json"), "--params is not valid JSON"),
        (("eval", "softmax", GOOD), "implements task 'double', not 'softmax'"),
        (("run", "softmax", "--sampler", "nope"), "unknown sampler 'nope'"),
        pytest.param(  # a campaign's start-up (database, a child for the constraints): 17 s on 2 cores
            ("run", TASK, "--variant-file", str(PLANTED / "no_valid_config.py")),
            "no configuration of its SPACE",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], needle: str, tmp_path: Path) -> None:
    proc = wf(*args, db=tmp_path / "wf.db")
    assert proc.returncode == 2, proc.stderr  # every case here is input that cannot work: nothing ran
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow  # ~15-50 s on 2 cores: the slow tier (`make test-slow`)
def test_campaign_stores_every_evaluation_and_reports_honestly(tmp_path: Path) -> None:
    db = tmp_path / "wf.db"
    proc = wf("run", TASK, "--variant-file", GOOD, "--trials", "4", "--campaign", "c", "--json", db=db)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    task = summary["tasks"][0]
    assert task["evaluations"] == 4 and task["measured"] == 0 and task["backend"] == "interpret"
    assert "0 of 4 evaluations measured" in task["timing"]
    assert rows(db, "select count(*) from wf_evaluations where objective_ms is not null") == [(0,)]
    assert rows(db, "select count(distinct params_key) from wf_evaluations") == [(4,)]
    listed = json.loads(wf("results", "--campaign", "c", "--json", db=db, check=True).stdout)
    assert len(listed) == 4 and all(r["verdict"] == "ok" and r["time_ms"] is None for r in listed)
    best = wf("best", "double", db=db)
    assert best.returncode == 1 and "no measured correct result" in best.stderr
    again = wf("run", TASK, "--variant-file", GOOD, "--campaign", "c", db=db)
    assert again.returncode == 1 and "--resume" in again.stderr


@pytest.mark.slow  # ~15-50 s on 2 cores: the slow tier (`make test-slow`)
def test_resume_after_kill_loses_nothing_and_repeats_nothing(tmp_path: Path) -> None:
    db = tmp_path / "wf.db"
    env = {**os.environ, "WARPFORGE_DB": f"sqlite:///{db}"}
    env.pop("TRITON_INTERPRET", None)
    cmd = [
        sys.executable,
        "-m",
        "warpforge.cli",
        "run",
        TASK,
        "--variant-file",
        GOOD,
        "--trials",
        "6",
        "--campaign",
        "k",
        "--json",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 600
    stored: list[tuple] = []
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if db.exists():
            try:
                stored = rows(db, "select id, params_key from wf_evaluations")
            except Exception:  # noqa: BLE001 - tables not created yet
                continue
        if len(stored) >= 2:
            break
    os.killpg(proc.pid, signal.SIGKILL)  # kill -9 the orchestrator and its children mid-campaign
    proc.wait()
    assert 2 <= len(stored) < 6
    before = rows(db, "select id, params_key from wf_evaluations")
    resumed = wf("run", TASK, "--variant-file", GOOD, "--trials", "6", "--campaign", "k", "--resume", "--json", db=db)
    assert resumed.returncode == 0, resumed.stderr
    after = rows(db, "select id, params_key from wf_evaluations")
    assert set(before) <= set(after)  # nothing completed was lost
    keys = [k for _, k in after]
    assert len(keys) == len(set(keys)) == 6  # nothing evaluated twice, and the budget was completed


@pytest.mark.slow
def test_read_only_database_fails_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    wf("db", "upgrade", db=path, check=True)
    before = path.read_bytes()
    proc = wf("run", TASK, "--variant-file", GOOD, "--trials", "1", "--db", f"sqlite:///file:{path}?mode=ro&uri=true")
    assert proc.returncode == 1
    assert "read-only" in proc.stderr and "Traceback" not in proc.stderr
    assert path.read_bytes() == before


@pytest.mark.slow
def test_doctor_and_db_upgrade(tmp_path: Path) -> None:
    up = json.loads(wf("db", "upgrade", "--json", db=tmp_path / "wf.db", check=True).stdout)
    assert up["revision"] == "0007_static_summary"  # head: 0007_static_summary
    checks = json.loads(wf("doctor", "--json", db=tmp_path / "wf.db").stdout)
    by_name = {c["name"]: c for c in checks}
    assert by_name["triton interpreter"]["ok"] and by_name["database"]["ok"]
    # found by installing each profile, not assumed (isolation.probe_seccomp): Linux x86_64 here
    assert by_name["seccomp"]["ok"] and by_name["seccomp"]["detail"] == "strict: installs; spawn: installs"
