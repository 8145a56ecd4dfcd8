"""The package writer (export/package.py): layout, idempotence, stale files, refusals, hf-kernels metadata."""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from export_fill import decide, save

from warpforge.db.queries import Reader
from warpforge.export.op_plan import OpPlan
from warpforge.export.package import ExportUsageError, render_package, write_tree
from warpforge.export.plan import plan_task
from warpforge.kernels.task import get_task

A = "M=4096,N=4096"


def _plans(tmp_path: Path) -> list[OpPlan]:
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
    reader = Reader(url)
    return [plan_task(reader, get_task("rmsnorm")), plan_task(reader, get_task("swiglu"), allow_untimed=True)]


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_layout_python_and_no_warpforge_import(tmp_path: Path) -> None:
    files = render_package(_plans(tmp_path), "mykernels", patch=True)
    for path in (
        "pyproject.toml",
        "README.md",
        "bench.py",
        "tests/test_rmsnorm.py",
        "tests/test_swiglu.py",
        "tests/test_patch.py",
        "mykernels/__init__.py",
        "mykernels/rmsnorm.py",
        "mykernels/patch.py",
        "mykernels/_kernels/rmsnorm.py",
        "mykernels/_reference/swiglu.py",
        "mykernels/kernel_info.json",
    ):
        assert path in files, path
    for path, data in files.items():
        if path.endswith(".py"):
            tree = ast.parse(data.decode(), path)
            imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
            assert not any(m.split(".")[0] == "warpforge" for m in imported), path
        # docstrings too: the reference copies' examples ran `from warpforge.kernels.tasks import rmsnorm`, so
        # `pytest --doctest-modules` failed in the user's project (the AST check above sees no docstring)
        assert "warpforge" not in "\n".join(
            line for line in data.decode(errors="replace").splitlines() if ">>>" in line
        ), path
    assert ">>> from mykernels._reference import rmsnorm" in files["mykernels/_reference/rmsnorm.py"].decode()
    assert 'triton_op("mykernels::rmsnorm", mutates_args=())' in files["mykernels/rmsnorm.py"].decode()
    # rmsnorm and swiglu train: forward and backward ops tied by registered autograd, gradient tests generated
    for op in ("rmsnorm", "swiglu"):
        source = files[f"mykernels/{op}.py"].decode()
        assert f'triton_op("mykernels::{op}_fwd", mutates_args=())' in source
        assert f'triton_op("mykernels::{op}_bwd", mutates_args=())' in source
        assert f"{op}_fwd.register_autograd(_backward, setup_context=_setup_context)" in source
        assert "def test_gradients_match_reference" in files[f"tests/test_{op}.py"].decode()
    assert "mykernels/_training.py" in files
    assert "def test_patched_llama_trains_like_the_original" in files["tests/test_patch.py"].decode()
    assert '"triton==3.9.0"' in files["pyproject.toml"].decode()
    info = json.loads(files["mykernels/kernel_info.json"])
    assert info["rmsnorm"]["timing_source"] == "recorded" and info["rmsnorm"]["untimed"] is False
    assert info["rmsnorm"]["speedup_vs_eager_interval"] == [1.1, 1.3]
    assert info["swiglu"]["untimed"] is True
    readme = files["README.md"].decode()
    assert "never timed" in readme.lower() and "swiglu" in readme
    assert "--allow-untimed" in files["mykernels/swiglu.py"].decode()  # the one-time warning at import
    assert "--allow-untimed" not in files["mykernels/rmsnorm.py"].decode()
    configs = [p for p in files if p.startswith("mykernels/configs/rmsnorm/")]
    slug = "SYNTHETIC_TEST_GPU_recorded_labelled_test_data_not_a_measurement"
    assert configs == [f"mykernels/configs/rmsnorm/{slug}.json"]


def test_reexport_is_byte_identical_and_removes_stale_files(tmp_path: Path) -> None:
    plans = _plans(tmp_path)
    dest = tmp_path / "out"
    first = write_tree(dest, render_package(plans, "mykernels"))
    before = _digest(dest)
    again = write_tree(dest, render_package(plans, "mykernels"))
    assert first.written and again.written == () and again.removed == ()
    assert _digest(dest) == before
    only = write_tree(dest, render_package(plans[:1], "mykernels"))
    assert "mykernels/swiglu.py" in only.removed and not (dest / "mykernels/swiglu.py").exists()


def test_refuses_foreign_directories_and_bad_names(tmp_path: Path) -> None:
    plans = _plans(tmp_path)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("x")
    with pytest.raises(ExportUsageError, match="not written by warpforge export"):
        write_tree(foreign, render_package(plans, "mykernels"))
    for bad in ("My-Kernels", "torch", "1abc", "x"):
        with pytest.raises(ExportUsageError, match="namespace"):
            render_package(plans, bad)
    with pytest.raises(ExportUsageError, match="--format"):
        render_package(plans, "mykernels", fmt="wheel")


def test_hf_kernels_layout_metadata(tmp_path: Path) -> None:
    files = render_package(_plans(tmp_path), "mykernels", fmt="hf-kernels")
    assert "build/torch-universal/mykernels/__init__.py" in files and "pyproject.toml" not in files
    meta = json.loads(files["build/torch-universal/metadata.json"])
    assert meta["name"] == "mykernels" and meta["id"].startswith("mykernels_")
    kernels_rust = pytest.importorskip("kernels._rust")
    parsed = kernels_rust.Metadata.from_bytes(files["build/torch-universal/metadata.json"])
    assert parsed.name.python_name == "mykernels"


def test_generated_package_is_lint_clean(tmp_path: Path) -> None:
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        pytest.skip("ruff is not installed next to this Python")
    dest = tmp_path / "out"
    write_tree(dest, render_package(_plans(tmp_path), "mykernels", patch=True))
    # the package's own pyproject sets the line length and its first-party name
    run = subprocess.run([str(ruff), "check", "--select", "E,W,F,I", "."], cwd=dest, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:]
