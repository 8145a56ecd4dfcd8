"""What a newcomer meets (issue 19): database URLs, eval's defaults and checks, backends checked before the
first evaluation, tasks by path, doctor without recordings, and output at 80 columns.

Each test names the old behaviour it guards against. Commands run as real processes at ``COLUMNS=80``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from sqlalchemy import create_engine, text

from warpforge.db.session import Database, DatabaseError, DatabaseURLError
from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.backend import BackendUnavailable, resolve_backend_name, usable_backend
from warpforge.evaluator.sandbox.supervisor import ChildPool
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import (
    VariantError,
    builtin_variants,
    check_params,
    check_space,
    first_config,
    load_variant,
    parse_variant,
)
from warpforge.preflight import pick_params

ROOT = Path(__file__).parents[2]
PLANTED = ROOT / "tests" / "evaluator" / "planted"
TASK = str(PLANTED / "task_double.py")
GOOD = PLANTED / "good.py"
KERNELBENCH = ROOT / "tests" / "kernels" / "kernelbench" / "relu.py"
no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the answer on a machine without a GPU")


def wf(
    *args: str, db: Path | None = None, env: dict[str, str] | None = None, columns: int = 80
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "COLUMNS": str(columns), **(env or {})}
    full.pop("TRITON_INTERPRET", None)  # the CLI chooses the interpreter itself, per child
    if db is not None:
        full["WARPFORGE_DB"] = f"sqlite:///{db}"
    return subprocess.run(
        [sys.executable, "-m", "warpforge.cli", *args], capture_output=True, text=True, env=full, timeout=900
    )


def one_line_error(proc: subprocess.CompletedProcess[str], code: int) -> str:
    """The error contract: the exit code, exactly one line on stderr (never wrapped by Rich), no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in proc.stderr
    return lines[0]


def variant_file(tmp_path: Path, space: str, constraints: str = "True", name: str = "v") -> Path:
    """good.py with another SPACE and constraints body (the kernel is the same correct one)."""
    source = GOOD.read_text()
    source = re.sub(r"SPACE = .*", f"SPACE = {space}", source)
    source = source.replace('return params["BLOCK"] >= 32 * params["num_warps"]', f"return {constraints}")
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return path


# --- 1. database URLs ------------------------------------------------------------------------------
def test_a_reader_on_a_missing_sqlite_file_is_an_error_and_creates_nothing(tmp_path: Path) -> None:
    # Old: Database(url) made tmp/typo/deeper and an empty database, and `results` showed an empty table.
    path = tmp_path / "typo" / "deeper" / "wf.db"
    with pytest.raises(DatabaseURLError, match="no database at") as info:
        Database(f"sqlite:///{path}", create=False)
    assert info.value.usage and str(path) in str(info.value)
    assert not (tmp_path / "typo").exists()
    Database(f"sqlite:///{path}").upgrade()  # a writer creates it
    assert Database(f"sqlite:///{path}", create=False).current_revision() is not None


def test_a_writer_says_when_it_creates_a_directory(tmp_path: Path) -> None:
    # Old: `db upgrade` (like `run`) made missing directories silently.
    path = tmp_path / "new" / "dir" / "wf.db"
    proc = wf("db", "upgrade", "--db", f"sqlite:///{path}")
    assert proc.returncode == 0, proc.stderr
    assert f"note: created directory {path.parent} for the database" in proc.stderr
    assert proc.stderr.count("created directory") == 1  # not again as a Rich "WARNING" line beside the note
    again = wf("db", "upgrade", "--db", f"sqlite:///{path}")
    assert "created directory" not in again.stderr  # said once, when it happens


@pytest.mark.parametrize(
    ("kind", "code", "needles"),
    [
        ("not_a_database", 2, ("is not a SQLite database", "move this file aside")),
        ("a_directory", 1, ("cannot open", "exists and is writable")),
        ("wrong_scheme", 2, ("unknown database scheme 'mysqll'", "sqlite:///PATH")),
        ("unparseable", 2, ("cannot parse database URL", "sqlite:///PATH")),
        (
            "unreachable_server",
            1,
            ("cannot connect to postgresql+psycopg://wf:***@127.0.0.1:1/none", "check the server is running"),
        ),
    ],
)
def test_a_bad_database_url_is_one_line_naming_it(
    kind: str, code: int, needles: tuple[str, ...], tmp_path: Path
) -> None:
    # Old: a non-database file gave a 295-line traceback; SQLite errors said "check the server is running".
    junk = tmp_path / "notes.db"
    junk.write_text("these are my notes, not a database\n" * 20)
    url = {
        "not_a_database": f"sqlite:///{junk}",
        "a_directory": f"sqlite:///{tmp_path}",
        "wrong_scheme": "mysqll://wf@localhost/wf",
        "unparseable": "wf.db",
        "unreachable_server": "postgresql+psycopg://wf:hunter2@127.0.0.1:1/none",
    }[kind]
    line = one_line_error(wf("db", "upgrade", "--db", url), code)
    for needle in needles:
        assert needle in line
    assert "hunter2" not in line
    if url.startswith("sqlite"):
        assert "server" not in line and str(tmp_path) in line
    assert junk.read_text().startswith("these are my notes")  # nothing written into the user's file


def test_database_errors_carry_their_exit_kind(tmp_path: Path) -> None:
    junk = tmp_path / "x.db"
    junk.write_bytes(b"\x00not sqlite" * 100)
    with pytest.raises(DatabaseURLError):
        Database(f"sqlite:///{junk}").upgrade()
    with pytest.raises(DatabaseError) as info:
        Database("postgresql+psycopg://nobody@127.0.0.1:1/none").upgrade()
    assert not info.value.usage  # a right URL whose server is down: a failure (1), not a usage error (2)


# --- 2. eval: defaults that satisfy constraints, SPACE and --params checked before anything runs ----------
def test_first_config_follows_space_order_among_feasible() -> None:
    variant = parse_variant(
        "TASK = 'double'\nSPACE = {'BLOCK': [128, 256], 'num_warps': [8, 4]}\ndef launch(x, **p):\n    pass\n"
    )
    assert first_config(variant, {}) == {"BLOCK": 128, "num_warps": 8}
    assert first_config(variant, {"num_warps": 4}) == {"BLOCK": 128, "num_warps": 4}
    feasible = [{"BLOCK": 256, "num_warps": 8}, {"BLOCK": 256, "num_warps": 4}]
    assert first_config(variant, {}, feasible) == {"BLOCK": 256, "num_warps": 8}
    assert first_config(variant, {"BLOCK": 128}, feasible) is None


@pytest.mark.slow
def test_pick_params_runs_constraints_in_a_child(tmp_path: Path) -> None:
    task = get_task(TASK)
    # BLOCK >= 32 * num_warps: (128, 8) breaks it, (128, 4) is the first in SPACE order that holds.
    tight = load_variant(
        variant_file(
            tmp_path,
            "{'BLOCK': [128, 256], 'num_warps': [8, 4]}",
            'params["BLOCK"] >= 32 * params["num_warps"]',
            "tight",
        )
    )
    never = load_variant(variant_file(tmp_path, "{'BLOCK': [128], 'num_warps': [4]}", "False", "never"))
    raises = load_variant(variant_file(tmp_path, "{'BLOCK': [128], 'num_warps': [4]}", "1 / 0", "raises"))
    with ChildPool() as pool:
        assert pick_params(pool, task, tight, {}, "sm_90", 120.0)[:2] == ({"BLOCK": 128, "num_warps": 4}, None)
        assert pick_params(pool, task, tight, {"BLOCK": 256}, "sm_90", 120.0)[0] == {"BLOCK": 256, "num_warps": 8}
        assert pick_params(pool, task, never, {}, "sm_90", 120.0)[:2] == (None, None)
        params, failure, _ = pick_params(pool, task, raises, {}, "sm_90", 120.0)
    assert params is None and failure is not None
    assert failure.verdict is Verdict.RUNTIME_ERROR and failure.reason == "constraints_failed"


@pytest.mark.slow
def test_eval_default_satisfies_the_constraints(tmp_path: Path) -> None:
    # Old: eval took each list's first value, (128, 8), and answered invalid_config: constraints_false.
    path = variant_file(
        tmp_path, "{'BLOCK': [128, 256], 'num_warps': [8, 4]}", 'params["BLOCK"] >= 32 * params["num_warps"]', "tight"
    )
    proc = wf("eval", TASK, str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["verdict"] == "ok" and result["params"] == {"BLOCK": 128, "num_warps": 4}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("space", "constraints", "params", "needles"),
    [
        (
            "{'BLOCK': [128, 256], 'num_warps': [2, 4]}",
            "True",
            '{"num_warps": 3}',
            ("num_warps=3 is not in SPACE['num_warps']", "choose one of [2, 4]"),
        ),
        (
            "{'BLOCK': [128, 256], 'num_warps': [2, 4]}",
            "True",
            '{"warps": 4}',
            ("unknown parameter 'warps'", "its SPACE has BLOCK, num_warps"),
        ),
        ("{'BLOCK': [128, 256], 'num_warps': [2, 4]}", "True", '{"num_warps": true}', ("num_warps=true is not in",)),
        ("{'BLOCK': [128], 'num_warps': [3, 4]}", "True", "{}", ("SPACE['num_warps'] has [3]", "power of two")),
        ("{}", "True", "{}", ("no SPACE to pick parameters from",)),
        ("{'BLOCK': [128], 'num_warps': [4]}", "False", "{}", ("no configuration of SPACE", "widen SPACE")),
    ],
)
def test_eval_checks_space_and_params_before_evaluating(
    space: str, constraints: str, params: str, needles: tuple[str, ...], tmp_path: Path
) -> None:
    # Old: num_warps 3 ran and ended in Triton's assertion; unknown names were an invalid_config verdict
    # (exit 1); a missing SPACE surfaced as KeyError; no feasible configuration was a verdict too.
    line = one_line_error(wf("eval", TASK, str(variant_file(tmp_path, space, constraints)), "--params", params), 2)
    for needle in needles:
        assert needle in line


def test_missing_space_is_named() -> None:
    variant = parse_variant("TASK = 'double'\ndef launch(x):\n    pass\n", name="bare")
    with pytest.raises(VariantError, match="no SPACE"):
        check_space(variant)
    good = load_variant(GOOD)
    check_params(good, {"BLOCK": 1024, "num_warps": 4})  # in SPACE: fine
    with pytest.raises(VariantError, match="BLOCK=512 is not in"):
        check_params(good, {"BLOCK": 512})


# --- 3. backends checked before the first evaluation -----------------------------------------------------
@no_gpu
def test_run_backend_cuda_without_a_gpu_stops_before_anything(tmp_path: Path) -> None:
    # Old: the campaign filled with `unsupported: no_cuda_device` rows and exited 0.
    db = tmp_path / "wf.db"
    line = one_line_error(wf("run", "softmax", "--backend", "cuda", "--campaign", "c", db=db), 2)
    assert "--backend cuda needs a CUDA GPU" in line and "--backend interpret" in line
    assert not db.exists()  # nothing stored, so the name "c" is still free


def test_run_backend_replay_without_recordings_stops_before_anything(tmp_path: Path) -> None:
    db = tmp_path / "wf.db"
    env = {"WARPFORGE_RECORDINGS": str(tmp_path / "none")}
    line = one_line_error(wf("run", "softmax", "--backend", "replay", "--campaign", "c", db=db, env=env), 2)
    assert "no recorded GPU times for 'softmax'" in line and "--backend interpret" in line
    assert not db.exists()


@no_gpu
def test_auto_never_picks_replay_without_recordings_of_these_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A recording of an older softmax template source: the task has recordings, its variants do not.
    stale = tmp_path / "rec" / "H100" / "softmax" / "online-000000000000" / "float16__M=1,N=1.json.gz"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"")
    monkeypatch.setenv("WARPFORGE_RECORDINGS", str(tmp_path / "rec"))
    variants = builtin_variants("softmax")
    assert resolve_backend_name("auto", "softmax") == "replay"  # the old choice: every row `unsupported`
    assert usable_backend("auto", "softmax", variants) == "interpret"
    with pytest.raises(BackendUnavailable, match="no recorded GPU times"):
        usable_backend("replay", "softmax", variants)
    online = next(v for v in variants if v.name == "online")
    current = stale.parents[1] / f"online-{online.source_hash[:12]}" / stale.name
    current.parent.mkdir()
    current.write_bytes(b"")
    assert usable_backend("auto", "softmax", variants) == "replay"
    assert usable_backend("replay", "softmax", variants) == "replay"


def campaigns(db: Path) -> list[str]:
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        names = [r[0] for r in conn.execute(text("select name from wf_campaigns"))]
        names += [r[0] for r in conn.execute(text("select study_name from studies"))]
    engine.dispose()
    return names


@pytest.mark.slow
def test_a_run_that_fails_before_its_first_evaluation_keeps_no_name(tmp_path: Path) -> None:
    # Old: the failed run stored campaign "nv" and the corrected re-run was told to pass --resume.
    db = tmp_path / "wf.db"
    line = one_line_error(
        wf("run", TASK, "--variant-file", str(PLANTED / "no_valid_config.py"), "--campaign", "nv", db=db), 2
    )  # the user's file: usage, as `eval` says it
    assert "no configuration of its SPACE" in line
    assert campaigns(db) == []


# --- 4. tasks by path ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_kernelbench_file_without_variants_gets_a_next_step(tmp_path: Path) -> None:
    # Old: "the template proposer has no variants for task 'cumsum'" after reserving the campaign name. A sort:
    # no template family computes it (a ReLU is the elementwise family's now, a cumsum the scan family's).
    db = tmp_path / "wf.db"
    line = one_line_error(wf("run", str(KERNELBENCH.with_name("sort.py")), "--campaign", "kb", db=db), 2)
    assert "task 'sort'" in line and "--variant-file FILE.py" in line and "--proposer llm" in line
    assert "TASK = 'sort'" in line
    assert not db.exists()


def test_a_variant_file_for_another_task_is_named(tmp_path: Path) -> None:
    line = one_line_error(wf("run", "softmax", "--variant-file", str(GOOD), db=tmp_path / "wf.db"), 2)
    assert "implements task 'double', which this run does not search (softmax)" in line


# --- 5. doctor ------------------------------------------------------------------------------------------------
@no_gpu
def test_doctor_points_to_replay_only_when_recordings_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Old: "times come only from recordings (--backend replay)" although none ship; it also created the database.
    # In-process (the interpreter check's child is covered by test_cli_e2e.py's doctor test).
    from warpforge.doctor import _cpu_plan, _database, _gpu, _recordings, recorded_tasks

    db = tmp_path / "sub" / "wf.db"
    monkeypatch.setenv("WARPFORGE_RECORDINGS", str(tmp_path / "none"))
    assert recorded_tasks() == []
    gpu, rec = _gpu([]), _recordings([])
    assert "replay" not in gpu.detail and "times nothing" in gpu.detail and not gpu.required
    assert not rec.ok and "record_spaces.py" in rec.detail
    assert "warpforge plan search" in _cpu_plan(False).detail
    database = _database(f"sqlite:///{db}")
    assert database.ok and "none yet" in database.detail
    assert not (tmp_path / "sub").exists()  # doctor only looks
    recording = tmp_path / "rec" / "H100" / "softmax" / "online-000000000000" / "float16__M=1,N=1.json.gz"
    recording.parent.mkdir(parents=True)
    recording.write_bytes(b"")
    monkeypatch.setenv("WARPFORGE_RECORDINGS", str(tmp_path / "rec"))
    assert recorded_tasks() == ["softmax"]
    assert "--backend replay" in _gpu(["softmax"]).detail and _recordings(["softmax"]).ok


# --- 6. 80 columns --------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_tasks_at_80_columns_cut_nothing() -> None:
    # Old: descriptions wrapped over 12 lines per task and shapes were cut ("M=4096,V=320…").
    proc = wf("tasks", "--task-file", str(KERNELBENCH))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in proc.stdout
    assert re.search(r"┃ task +┃ dtypes +┃ benchmark shapes +┃ templates +┃", proc.stdout)
    cells = {c.strip().removesuffix("*") for line in lines for c in line.split("│")}  # *: has a backward
    assert "single_pass*" in proc.stdout and "*: has a backward" in proc.stdout
    for name in ("softmax", "matmul", "cross_entropy", "relu"):
        task = get_task(str(KERNELBENCH) if name == "relu" else name)
        assert name in cells
        for shape in task.shapes:  # every shape whole, one per line
            assert ",".join(f"{k}={v}" for k, v in shape.items()) in cells
        for v in builtin_variants(name):
            assert v.name in cells
    assert "warpforge tasks --json" in proc.stdout  # where the folded descriptions are
    wide = wf("tasks", columns=160)
    assert "description" in wide.stdout and "Row softmax" in wide.stdout
    assert re.search(r"│ layernorm .*│ x +│", wide.stdout) and "grads" in wide.stdout


@pytest.mark.slow
def test_run_closing_lines_at_80_columns_and_reuse_announced(tmp_path: Path) -> None:
    # Old: the closing prose printed as one long soft-wrapped line, empty "best" columns were kept, nothing
    # said what to run next, and a resume or a reuse of stored results was not said on screen.
    db = tmp_path / "wf.db"
    two = variant_file(tmp_path, "{'BLOCK': [128, 256], 'num_warps': [2]}", "True", "two")
    first = wf("run", TASK, "--variant-file", str(two), "--trials", "2", "--campaign", "c1", db=db)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in first.stdout
    assert re.search(r"┃ variant +┃ feasible +┃ evaluated +┃ verdicts +┃\n", first.stdout)  # no empty best columns
    assert re.search(r"│ two +│ 2 +│ 2 +│ ok:2 +│", first.stdout)
    flat = " ".join(first.stdout.split())  # words are whole: the prose wraps only between them
    assert "0 of 2 evaluations measured: no GPU here" in flat
    assert (
        "next: warpforge best double --static ranks the ok configurations by compile facts (static, not a "
        "time); warpforge results --campaign c1 lists the verdicts; for times, run the same command with "
        "--backend cuda on a CUDA machine" in flat
    )
    resumed = wf("run", TASK, "--variant-file", str(two), "--trials", "2", "--campaign", "c1", "--resume", db=db)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed campaign c1: 0 interrupted configurations re-queued" in resumed.stdout
    second = wf("run", TASK, "--variant-file", str(two), "--trials", "2", "--campaign", "c2", db=db)
    assert second.returncode == 0, second.stderr
    assert "reused 2 stored results" in " ".join(second.stdout.split())
