"""Every built-in task exports into a package that imports and runs where warpforge cannot be imported.

A fixture campaign per task (export_fill.py: one evaluation of the task's first template, stored ``ok`` with a
configuration its ``constraints`` accept on the task's smallest correctness shape, and a decision accepting it)
is exported with ``--allow-untimed`` into one package. Then, in a fresh process where ``import warpforge``
raises, each op is called once on the CPU (its PyTorch reference) and, in another such process with
``TRITON_INTERPRET=1``, once through its Triton kernel in the interpreter, compared with the reference as the
package's own tests compare (``_testing.assert_matches_reference``, the task's tolerances).

The families that build their member from warpforge helpers (conv, conv_transpose, linear_chain,
linear_groupnorm, pool, channel_norm) failed the import before their references were generated self-contained
(export/standalone.py). Run directly (``python tests/export/test_export_all_tasks.py``) it prints the per-task
table.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import export_fill
import pytest
import torch
from typer.testing import CliRunner

from warpforge.cli import app
from warpforge.export.standalone import imports_warpforge
from warpforge.kernels.members import op_identifier
from warpforge.kernels.targets import constraint_shape
from warpforge.kernels.task import builtin_task_names, get_task
from warpforge.kernels.taskdef import dtype_name
from warpforge.kernels.variant import builtin_variants

BLOCKED = """
import sys
sys.modules["warpforge"] = None  # any `import warpforge...` now raises ImportError
"""

CALL = (
    BLOCKED
    + """
import importlib
import json
import traceback

import torch

ns, cases = sys.argv[1], json.loads(sys.argv[2])
pkg = importlib.import_module(ns)
from importlib import import_module
testing = import_module(ns + "._testing")
rows = {}
for op, case in cases.items():
    try:
        ref = import_module(f"{ns}._reference.{op}")
        inputs = ref.make_inputs(case["shape"], getattr(torch, case["dtype"]), 0, "cpu")
        out = getattr(pkg, op)(*inputs)
        testing.assert_matches_reference(out, ref.reference, inputs, *case["tol"])
        rows[op] = "ok"
    except Exception as exc:  # noqa: BLE001 - the test reports every op's failure, not the first
        rows[op] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:150] if str(exc) else ''}"
assert not any(m == "warpforge" or m.startswith("warpforge.") for m in sys.modules if sys.modules[m] is not None)
print(json.dumps(rows))
"""
)


def _smallest(shapes: list[dict[str, int]]) -> dict[str, int]:
    return min(shapes, key=lambda s: math.prod(int(v) for v in s.values()))


def _config(path: Path, shape: dict[str, int], configs: list[dict[str, Any]]) -> dict[str, Any]:
    """The first configuration the template's own ``constraints`` accept on ``shape`` (a template of ours)."""
    spec = importlib.util.spec_from_file_location(f"wf_template_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    accept = getattr(module, "constraints", lambda params, shape: True)
    found = [c for c in configs if accept(c, constraint_shape(shape))]
    assert found, f"{path}: no configuration of SPACE fits {shape}"
    # the least work per program first: the interpreter's time grows with the block sizes
    return min(found, key=lambda c: math.prod(v for v in c.values() if isinstance(v, int) and v > 0))


def fixture_package(tmp: Path) -> tuple[Path, str, dict[str, dict[str, Any]], dict[str, str]]:
    """One package of every built-in task's op; (dest, namespace, call cases per op, variant per task)."""
    url = f"sqlite:///{tmp / 'wf.db'}"
    cases: dict[str, dict[str, Any]] = {}
    variants: dict[str, str] = {}
    for name in builtin_task_names():
        task = get_task(name)
        variant = builtin_variants(name)[0]
        shape = _smallest(task.check_shapes or task.small_shapes)
        params = _config(Path(str(variant.path)), shape, variant.configs())
        ev = export_fill.save(url, name, variant.name, params, campaign=f"fixture-{name}")
        export_fill.decide(url, ev)
        # fp32 or fp16 where the task has them: the interpreter computes bf16 tl.dot wrongly (docs/export.md)
        dtype = next((d for d in (torch.float32, torch.float16) if d in task.dtypes), task.dtypes[0])
        cases[op_identifier(name)] = {"shape": shape, "dtype": dtype_name(dtype), "tol": list(task.tolerance(dtype))}
        variants[name] = variant.name
    dest = tmp / "pkg"
    res = CliRunner().invoke(
        app,
        [
            "export",
            *builtin_task_names(),
            "--dest",
            str(dest),
            "--namespace",
            "alltasks",
            "--allow-untimed",
            "--db",
            url,
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    return dest, "alltasks", cases, variants


def call_ops(dest: Path, ns: str, cases: dict[str, Any], interpret: bool, cwd: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    env["PYTHONPATH"] = str(dest)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    run = subprocess.run(
        [sys.executable, "-c", CALL, ns, json.dumps(cases)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    rows: dict[str, str] = json.loads(run.stdout.strip().splitlines()[-1])
    return rows


# One export of 31 tasks and two fresh processes (~90 s on 2 shared cores): the slow tier.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, Any], dict[str, str]]:
    return fixture_package(tmp_path_factory.mktemp("alltasks"))


def test_every_reference_is_standalone(package: tuple[Path, str, dict[str, Any], dict[str, str]]) -> None:
    dest, ns, cases, _ = package
    refs = sorted(p.stem for p in (dest / ns / "_reference").glob("*.py") if p.stem != "__init__")
    assert refs == sorted(cases)
    for path in (dest / ns).rglob("*.py"):  # read here with ast, not with the writer's own check
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n.split(".")[0] == "warpforge" for n in names), (path, node.lineno)


def test_every_op_runs_its_reference_without_warpforge(
    package: tuple[Path, str, dict[str, Any], dict[str, str]], tmp_path: Path
) -> None:
    dest, ns, cases, _ = package
    rows = call_ops(dest, ns, cases, interpret=False, cwd=tmp_path)
    assert rows == {op: "ok" for op in cases}


def test_every_op_runs_its_kernel_in_the_interpreter_without_warpforge(
    package: tuple[Path, str, dict[str, Any], dict[str, str]], tmp_path: Path
) -> None:
    dest, ns, cases, _ = package
    rows = call_ops(dest, ns, cases, interpret=True, cwd=tmp_path)
    assert rows == {op: "ok" for op in cases}


if __name__ == "__main__":  # the per-task table
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        dest, ns, cases, variants = fixture_package(Path(d))
        cpu = call_ops(dest, ns, cases, interpret=False, cwd=Path(d))
        interp = call_ops(dest, ns, cases, interpret=True, cwd=Path(d))
        print("| task | template | reference shipped | case | CPU reference | TRITON_INTERPRET=1 |")
        print("|---|---|---|---|---|---|")
        for name in builtin_task_names():
            op = op_identifier(name)
            text = (dest / ns / "_reference" / f"{op}.py").read_text()
            shipped = (
                "verbatim"
                if not imports_warpforge(get_task(name).path.read_text())
                else (
                    "generated, warpforge written in" if "written in at export" in text else "generated, import dropped"
                )
            )
            c = cases[op]
            shape = ",".join(f"{k}={v}" for k, v in c["shape"].items())
            print(f"| {name} | {variants[name]} | {shipped} | {shape} {c['dtype']} | {cpu[op]} | {interp[op]} |")
