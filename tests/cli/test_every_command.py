"""Every registered command, found by walking the Typer/Click tree (groups included), meets the error rule.

The rule (README "Exit codes", cli/boundary.py): an error is one line on stderr, never a traceback, with exit
code 1 (asked correctly, it failed) or 2 (asked wrongly, nothing ran). Two cases per command, through the real
entry point (``warpforge.cli.main``):

- a database that cannot exist (``--db`` naming a file under a regular file): a command that only reads says
  there is no database (usage, 2); a command that writes cannot create it (failure, 1);
- a bad option value (text where a number is expected; an unknown option where a command has no number).

A command added anywhere is found here; one that takes ``--db`` must say which kind it is in ``DB_EXIT``, and
one with a required argument needs a value in ``VALUES``, or this test fails and says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from warpforge.cli import app
from warpforge.cli.root import main

READS, WRITES = 2, 1
# Expected exit code with an impossible --db, per command: readers 2 (no database there), writers 1.
DB_EXIT = {
    "results": READS,
    "best": READS,
    "export": READS,
    "agent transcripts": READS,
    "dashboard": READS,
    "run": WRITES,
    "db upgrade": WRITES,
    "plan predict": WRITES,
    "plan search": WRITES,
    "optimize": WRITES,
}
# Commands whose answer is a report, not one line (the report is the product): checked for the exit code only.
REPORTS = {"doctor": 1}  # its check table, exit 1 when a required check (the database) fails
# A value for every required parameter (argument or option), by Click parameter name.
VALUES = {
    "task_names": ["rmsnorm"],
    "task_name": ["rmsnorm"],
    "task": ["rmsnorm"],
    "campaign": ["no-such-campaign"],
    "model": ["--model", "llama3-8b"],
    "cluster": ["--cluster", "dgx-h100"],
    "fmt": ["--format", "megatron"],
}


def _walk(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    if hasattr(command, "commands"):  # a group (Typer vendors Click, so no isinstance on click.Group)
        for name, sub in command.commands.items():
            yield from _walk(sub, (*path, name))
    else:
        yield " ".join(path), command


COMMANDS = dict(_walk(typer.main.get_command(app)))


def _required(name: str, command: Any, tmp: Path) -> list[str]:
    args: list[str] = []
    for p in command.params:
        # export's tasks are optional to the parser (--optimize-run ID stands for them) but one of the two is needed
        if not p.required and not (name == "export" and p.name == "task_names"):
            continue
        if p.name == "variant_file":
            args.append(str(tmp / "variant.py"))
        elif p.name == "space_files":
            args.append(str(tmp / "space.json"))
        elif p.name == "dest":
            args += ["--dest", str(tmp / "out")]
        elif p.name == "target":  # optimize, estimate: a model file in KernelBench's format
            model = tmp / "model.py"
            model.write_text(
                "import torch\nclass Model(torch.nn.Linear):\n    pass\n"
                "def get_inputs():\n    return [torch.randn(2, 4)]\n"
                "def get_init_inputs():\n    return [4, 4]\n"
            )
            takes_out = any("--out" in getattr(q, "opts", ()) for q in command.params)
            args += [str(model), *(["--out", str(tmp / "opt")] if takes_out else [])]
        else:
            assert p.name in VALUES, f"{name}: add a value for its required parameter {p.name!r} to VALUES"
            args += VALUES[p.name]
    return args


def _has_db(command: Any) -> bool:
    return any("--db" in getattr(p, "opts", ()) for p in command.params)


def _bad_option(command: Any) -> list[str]:
    for p in command.params:
        if p.param_type_name == "option" and not p.is_flag and p.bare_type() in ("int", "float"):
            return [p.opts[0], "not-a-number"]
    return ["--no-such-option"]


def _invoke(args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    monkeypatch.setattr("sys.argv", ["warpforge", *args])
    with pytest.raises(SystemExit) as info:
        main()
    code = info.value.code
    return (code if isinstance(code, int) else 1), capsys.readouterr().err


def test_the_walk_finds_the_groups_commands() -> None:
    # Known names from the README's command list: a walk that missed sub-groups would miss these.
    assert {"run", "results", "plan predict", "plan search", "agent transcripts", "db upgrade"} <= set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_impossible_database_is_one_line_and_the_documented_code(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    command = COMMANDS[name]
    if not _has_db(command):
        assert name not in DB_EXIT, f"{name} lost its --db option"
        pytest.skip(f"{name} takes no --db")
    assert name in DB_EXIT or name in REPORTS, f"{name} takes --db: say in DB_EXIT whether it reads or writes"
    (tmp_path / "afile").write_text("not a directory")
    url = f"sqlite:///{tmp_path / 'afile' / 'wf.db'}"
    extra = ["--check"] if name == "dashboard" else []  # never start a server, whatever happens
    code, err = _invoke([*name.split(), *_required(name, command, tmp_path), *extra, "--db", url], monkeypatch, capsys)
    if name in REPORTS:
        assert code == REPORTS[name], err
        return
    assert code == DB_EXIT[name], err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert str(tmp_path / "afile") in err  # it names the path it could not use


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_bad_option_value_is_one_line_and_exit_2(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    command = COMMANDS[name]
    bad = _bad_option(command)
    code, err = _invoke([*name.split(), *_required(name, command, tmp_path), *bad], monkeypatch, capsys)
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert bad[0] in err  # it names the option


@pytest.mark.parametrize("args", [["results"], ["agent", "transcripts", "c"], ["best", "rmsnorm"]])
def test_reading_commands_never_migrate(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database one migration behind head is said (run `warpforge db upgrade`), never changed by a reader."""
    from alembic import command
    from alembic.config import Config

    from warpforge.db.session import MIGRATIONS_DIR, Database

    url = f"sqlite:///{tmp_path / 'old.db'}"
    db = Database(url)
    db.upgrade()
    head = db.current_revision()
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = db.engine
    command.downgrade(cfg, "-1")
    older = db.current_revision()
    assert older != head
    code, err = _invoke([*args, "--db", url], monkeypatch, capsys)
    assert code == 1 and "warpforge db upgrade" in err and len(err.strip().splitlines()) == 1, err
    assert db.current_revision() == older  # untouched
