"""An optimize run's package patches a model by itself (export/optimize_package.py, export/runtime/_patch.py):
``patch(model)`` and ``unpatch(model)``, the patcher written in without warpforge, versioned ``patches.json``, the
README's three lines, and the refusals of a wrong model or region."""

from __future__ import annotations

import ast
import fnmatch
import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import tomllib
import torch
from optimize_fill import MODEL, NS, write_optimize_package

from warpforge.optimize.patch_spec import load_patches


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, ModuleType]]:
    tmp = tmp_path_factory.mktemp("optpkg")
    dest = tmp / "package"
    write_optimize_package(tmp, dest)
    mp = pytest.MonkeyPatch()
    mp.setenv("TRITON_INTERPRET", "1")  # read when the package's ops are imported: the kernels in the interpreter
    mp.syspath_prepend(str(dest))
    try:
        yield dest, importlib.import_module(NS)
    finally:
        mp.undo()
        for name in [m for m in sys.modules if m == NS or m.startswith(NS + ".")]:
            del sys.modules[name]


def _model() -> tuple[torch.nn.Module, torch.Tensor]:
    namespace: dict[str, Any] = {}
    exec(compile(MODEL, "model.py", "exec"), namespace)
    torch.manual_seed(0)
    return namespace["Model"](*namespace["get_init_inputs"]()), namespace["get_inputs"]()[0]


def test_the_package_carries_its_patcher_and_imports_no_warpforge(package: tuple[Path, ModuleType]) -> None:
    dest, pkg = package
    for path in (dest / NS).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n.split(".")[0] == "warpforge" for n in names), (path, node.lineno)
    doc = json.loads((dest / NS / "patches.json").read_text())
    assert doc["format"] == "warpforge-patches" and doc["version"] == 1 and doc["model_prefix"] == ""
    assert [s.region for s in load_patches((dest / NS / "patches.json").read_text())] == ["act"]
    assert pkg.regions() == ["act"]
    readme = (dest / "README.md").read_text().splitlines()
    assert readme[2:7] == ["```", "pip install ./package", f"import {NS}", f"{NS}.patch(model)", "```"], readme[:8]
    assert "The kernels are untimed" in (dest / "README.md").read_text()
    # every data file of the package is one pip installs (patches.json was left out once)
    patterns = tomllib.loads((dest / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][NS]
    for path in (dest / NS).rglob("*"):
        rel = str(path.relative_to(dest / NS))
        if path.is_file() and path.suffix != ".py" and "__pycache__" not in rel:
            assert any(fnmatch.fnmatch(rel, p) for p in patterns), rel


def test_patch_runs_the_kernel_and_unpatch_restores(package: tuple[Path, ModuleType]) -> None:
    _, pkg = package
    model, x = _model()
    want = model(x)
    assert pkg.patch(model) == ["act"]
    got = model(x)
    # silu(a) * b by Triton's interpreter against torch's: fp32, one rounding each
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert pkg.patch_report(model) == {"kernel": {"act": 1}, "fallback": {}}
    with pytest.raises(RuntimeError, match="patched already"):
        pkg.patch(model)
    # a dtype the kernel was not verified for runs the original code, counted
    assert model.act(x.double(), x.double()).dtype == torch.float64
    assert pkg.patch_report(model) == {"kernel": {"act": 1}, "fallback": {"act": "dtype torch.float64 not verified"}}
    pkg.unpatch(model)
    assert "forward" not in model.act.__dict__ and "forward" not in model.__dict__
    torch.testing.assert_close(model(x), want, atol=0, rtol=0)
    assert pkg.patch_report(model) == {"kernel": {}, "fallback": {}}


def test_patch_refuses_an_unknown_region_and_another_model(package: tuple[Path, ModuleType]) -> None:
    _, pkg = package
    model, _ = _model()
    with pytest.raises(ValueError, match="no verified region named mlp; the regions are: act"):
        pkg.patch(model, regions=["mlp"])
    with pytest.raises(ValueError, match="the model has no module act"):
        pkg.patch(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    assert pkg.patch(model, regions=[]) == []


def test_export_writes_a_stored_runs_package_again(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from warpforge.cli import app
    from warpforge.db.optimize_store import OptimizeRunRecord, write_optimize_run

    made = write_optimize_package(tmp_path, tmp_path / "package")
    url = made["url"]

    def record(report: dict[str, Any]) -> OptimizeRunRecord:
        return OptimizeRunRecord(
            target="model.py",
            kind="kernelbench",
            mode="train",
            dtype="float32",
            gpu="H100",
            coverage=0.5,
            speedup=None,
            measured=False,
            regions=1,
            patched=1,
            report=report,
            warpforge_version="0",
        )

    write_optimize_run(url, record({"package_source": made["package_source"]}))
    write_optimize_run(url, record({}))  # a run stored without its package
    runner = CliRunner()
    res = runner.invoke(app, ["export", "--optimize-run", "1", "--dest", str(tmp_path / "again"), "--db", url])
    assert res.exit_code == 0, res.output
    assert "pip install" in res.output and f"{NS}.patch(model)" in res.output
    ours = sorted(p.relative_to(tmp_path / "package") for p in (tmp_path / "package").rglob("*") if p.is_file())
    assert ours == sorted(p.relative_to(tmp_path / "again") for p in (tmp_path / "again").rglob("*") if p.is_file())
    for rel in ours:  # the same bytes from the database alone
        assert (tmp_path / "package" / rel).read_bytes() == (tmp_path / "again" / rel).read_bytes(), rel
    res = runner.invoke(app, ["export", "--optimize-run", "2", "--dest", str(tmp_path / "x"), "--db", url])
    assert res.exit_code == 1 and "stored no package" in res.output
    res = runner.invoke(app, ["export", "--optimize-run", "9", "--dest", str(tmp_path / "x"), "--db", url])
    assert res.exit_code == 2 and "no optimize run 9" in res.output
    res = runner.invoke(app, ["export", "swiglu", "--optimize-run", "1", "--dest", str(tmp_path / "x"), "--db", url])
    assert res.exit_code == 2 and "name no tasks" in res.output
    res = runner.invoke(app, ["export", "--dest", str(tmp_path / "x"), "--db", url])
    assert res.exit_code == 2 and "--optimize-run ID" in res.output
