"""Layering rules the import graph alone does not show: only the database package speaks SQL.

Every query is behind the read layer (``db.queries.Reader``, ``db.agent_reads``) or the store (``db.store``,
``db.agent_store``); the one module that writes Optuna's tables (``search/engine/mirror.py``: it copies
in-memory studies into Optuna's RDB schema) is the exception the design names (docs/design.md §3.5).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).parents[1] / "src" / "warpforge"
ALLOWED = {
    "db",  # the read layer and the store
    "search/engine/mirror.py",  # writes Optuna's own tables, through Optuna's models
}


def _imports_sqlalchemy(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "sqlalchemy" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlalchemy":
            return True
    return False


def _allowed(rel: str) -> bool:
    return any(rel == a or rel.startswith(a + "/") for a in ALLOWED)


def test_the_check_sees_a_function_level_import(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from sqlalchemy import select\n    return select\n")
    assert _imports_sqlalchemy(f)
    f.write_text("import json\n")
    assert not _imports_sqlalchemy(f)


def test_only_the_database_package_imports_sqlalchemy() -> None:
    bad = sorted(
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if "templates" not in p.parts and not _allowed(str(p.relative_to(SRC))) and _imports_sqlalchemy(p)
    )
    assert not bad, "SQL outside the read layer and the store (add a Reader method or a store function): " + ", ".join(
        bad
    )


OPTUNA_PRIVATE = {
    "_study_id",
    "_trial_id",
    "_storage",
    "_get_trial",
    "_parzen_estimator_cls",
    "_parzen_estimator_parameters",
}


def _reaches_into_optuna(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            out += [f"imports {n}" for n in names if n.startswith("optuna") and "._" in n]
        if isinstance(node, ast.Attribute) and node.attr in OPTUNA_PRIVATE:
            out.append(f"{ast.unparse(node)} (line {node.lineno})")
    return out


def test_only_one_module_reaches_into_optuna_private_api() -> None:
    home = SRC / "search" / "optuna_private.py"
    assert _reaches_into_optuna(home)  # the check sees what that module does
    bad = {
        str(p.relative_to(SRC)): found
        for p in SRC.rglob("*.py")
        if p != home and "templates" not in p.parts and (found := _reaches_into_optuna(p))
    }
    assert not bad, f"Optuna's private API outside search/optuna_private.py: {bad}"


def test_an_unchecked_optuna_version_is_said(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    import optuna

    from warpforge.search import optuna_private

    optuna_private.check_version.cache_clear()
    monkeypatch.setattr(optuna, "__version__", "9.9.0")
    with caplog.at_level(logging.WARNING, logger="warpforge.search"):
        assert optuna_private.check_version() is False
    assert "Optuna 9.9.0" in caplog.text
    optuna_private.check_version.cache_clear()
    monkeypatch.undo()
    assert optuna_private.check_version() is True  # the installed one is checked


def test_only_the_cli_package_holds_typer_code() -> None:
    allowed: set[str] = set()
    bad = []
    for p in SRC.rglob("*.py"):
        rel = str(p.relative_to(SRC))
        if rel.startswith("cli/") or rel in allowed or "templates" in p.parts:
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n.split(".")[0] == "typer" for n in names):
                bad.append(rel)
                break
    assert not bad, f"Typer code outside warpforge/cli/: {bad}"


def _imported_modules(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            out.add(node.module or "")
    return out


def test_orm_rows_are_built_only_in_the_database_package() -> None:
    bad = sorted(
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if "templates" not in p.parts
        and p.relative_to(SRC).parts[0] != "db"
        and "warpforge.db.models" in _imported_modules(p)
    )
    assert not bad, "ORM rows built outside db/ (pass a typed record to a db/ store function): " + ", ".join(bad)


# Domain packages compute and return data; terminals and pages (cli/, dashboard/, the shared table helpers)
# print it.
DOMAIN = ("parallel", "kernels", "evaluator", "agent", "export", "db")


def test_domain_packages_print_no_rich_output() -> None:
    bad = sorted(
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if "templates" not in p.parts
        and p.relative_to(SRC).parts[0] in DOMAIN
        and any(m.split(".")[0] == "rich" for m in _imported_modules(p))
    )
    assert not bad, "Rich output from a domain package (return data, let cli/ render it): " + ", ".join(bad)


# The evaluator's parts, each importing only those below it (docs/design.md §2): ``result`` and ``gpus`` below
# all; ``static`` checks a candidate's exact bytes; ``sandbox`` runs it (the job, the supervisor and its walls,
# the child); ``judge`` decides from what ran; ``run`` drives a job through the stages and backends.
EVALUATOR_LAYERS = {"result": 0, "gpus": 0, "static": 1, "sandbox": 2, "judge": 3, "run": 4}


def _evaluator_part(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == ["warpforge", "evaluator"] and len(parts) > 2 else None


def evaluator_arrows_up(edges: dict[str, set[str]]) -> list[str]:
    """Imports from one part of the evaluator into a part at its layer or above (every import counts, also
    those inside functions)."""
    out = []
    for src, targets in sorted(edges.items()):
        a = _evaluator_part(src)
        for target in sorted(targets):
            b = _evaluator_part(target)
            if a is not None and b is not None and a != b and EVALUATOR_LAYERS[b] >= EVALUATOR_LAYERS[a]:
                out.append(f"{src} -> {target}")
    return out


def test_the_evaluator_check_sees_an_arrow_up() -> None:
    edges = {
        "warpforge.evaluator.sandbox.child.common": {"warpforge.evaluator.judge.compare"},
        "warpforge.evaluator.judge.judge": {"warpforge.evaluator.sandbox.job", "warpforge.evaluator.result"},
        "warpforge.evaluator.run.stages": {"warpforge.evaluator.judge.judge"},
    }
    assert evaluator_arrows_up(edges) == [
        "warpforge.evaluator.sandbox.child.common -> warpforge.evaluator.judge.compare"
    ]


def test_every_evaluator_part_has_a_layer() -> None:
    parts = {
        p.name.removesuffix(".py")
        for p in (SRC / "evaluator").iterdir()
        if p.name != "__init__.py" and (p.suffix == ".py" or (p / "__init__.py").is_file())
    }
    assert parts == set(EVALUATOR_LAYERS)


def test_no_arrow_up_inside_the_evaluator() -> None:
    from test_import_graph import graph

    found = evaluator_arrows_up(graph())
    assert not found, (
        "the evaluator's parts import only those below them (run > judge > sandbox > static > "
        "result, gpus): move what both need to the lower part: " + "; ".join(found)
    )
