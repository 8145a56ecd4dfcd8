"""Export of a PyTorch-module problem (KernelBench format) through its generated task module (export/bypath.py).

- the generated module against the by-path loader (kernels/kernelbench.py) on a problem with weights, a derived
  global and a list-item global: the same inputs (bit for bit, at every check shape and seed), outputs, flops and
  bytes; it is the problem's text verbatim followed by the tail, and warpforge loads it as a task module;
- refusals: a problem defining a name of the task contract;
- end to end (slow tier) on the shipped 19_ReLU and KernelBench's 12_Gemm_Multiply_LeakyReLU, whose op takes
  the Linear's weight and bias): ``warpforge run --trials 1 --backend interpret`` into a temporary SQLite
  database, ``warpforge export --allow-untimed``; the package's kernel is the stored source that was verified ok
  (launch wrapped only); in a fresh process where importing warpforge raises, the op called on the problem's own
  inputs (its file's get_inputs() and Model at small sizes) equals the Model in float64 within the task's
  tolerance, and the generated tests pass (under TRITON_INTERPRET=1; the Gemm case also on the reference path,
  torch.compile and the AOT-dispatch opcheck included); after the
  matched copy is removed from the cache, a re-export writes it again and the package is byte-identical.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from warpforge.cli import app
from warpforge.db.queries import Reader
from warpforge.export.bypath import MARK, load_task_text, op_name, task_module_source
from warpforge.export.source import SourceError, wrap_launches
from warpforge.kernels.task import load_task_file

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = ROOT / "src" / "warpforge" / "data" / "problems" / "level1"
LEVEL2 = PROBLEMS.parent / "level2"  # shipped: the same bytes as KernelBench's

# Weights (a Linear and a LayerNorm), a global derived from two others, and sizes in a list global.
PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """A projection, a norm and a scale."""

    def __init__(self, sizes, eps):
        super().__init__()
        self.proj = nn.Linear(sizes[0], sizes[1])
        self.norm = nn.LayerNorm(sizes[1], eps=eps)
        self.register_buffer("scale", torch.rand(sizes[1]) + 0.5)

    def forward(self, x, y):
        return self.norm(self.proj(x)) * self.scale + y


batch = 24
sizes = [20, 36]
input_shape = (batch, sizes[0])


def get_inputs():
    return [torch.randn(*input_shape), torch.randn(batch, sizes[1])]


def get_init_inputs():
    return [sizes, 1e-5]
'''


def _load_generated(tmp_path: Path, text: str) -> tuple[Any, Any, str]:
    problem = tmp_path / "my_problem.py"
    problem.write_text(text)
    task = load_task_file(problem)
    source = task_module_source(task, task.model.__self__.module, text)  # type: ignore[union-attr]
    return task, load_task_text(source, op_name(task.name), problem), source


def test_generated_module_gives_what_the_bypath_loader_gives(tmp_path: Path) -> None:
    task, gen, source = _load_generated(tmp_path, PROBLEM)
    assert source.startswith(PROBLEM.rstrip("\n") + "\n") and MARK in source
    assert task.param_names == ("scale", "proj.weight", "proj.bias", "norm.weight", "norm.bias")  # state_dict order
    assert gen.name == "my_problem" and gen.shapes == task.shapes and gen.check_shapes == task.check_shapes
    assert len(task.check_shapes) >= 2 and task.check_shapes != task.shapes  # derived sizes are exercised
    for shape in task.check_shapes + task.shapes:
        for seed in (0, 3):
            want, got = (
                task.make_inputs(shape, torch.float32, seed, "cpu"),
                gen.make_inputs(shape, torch.float32, seed, "cpu"),
            )
            assert len(want) == len(got) == 7
            assert all(torch.equal(w, g) for w, g in zip(want, got)), (shape, seed)
            assert torch.equal(task.reference(*want), gen.reference(*got))
        assert gen.flops(shape, torch.float32) == task.flops(shape, torch.float32)
        assert gen.bytes_moved(shape, torch.float32) == task.bytes_moved(shape, torch.float32)
    # the names reference() takes: Model.forward's, then the state's
    import inspect

    assert list(inspect.signature(gen.reference).parameters) == [
        "x",
        "y",
        "scale",
        "proj_weight",
        "proj_bias",
        "norm_weight",
        "norm_bias",
    ]
    # written to a file, warpforge loads it as a task module (not as a KernelBench problem) with the same inputs
    path = tmp_path / "gen" / "my_problem_task.py"
    path.parent.mkdir()
    path.write_text(source)
    again = load_task_file(path)
    assert again.init_inputs is None and again.param_names == ()
    shape = task.check_shapes[0]
    assert all(
        torch.equal(a, b)
        for a, b in zip(
            again.make_inputs(shape, torch.float32, 1, "cpu"), task.make_inputs(shape, torch.float32, 1, "cpu")
        )
    )


def test_a_problem_defining_a_contract_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"defines SHAPES, which the exported task module defines"):
        _load_generated(tmp_path, PROBLEM + "\nSHAPES = [1]\n")


def test_op_names_are_identifiers() -> None:
    assert op_name("19_ReLU") == "op_19_ReLU" and op_name("my_relu") == "my_relu" and op_name("a-b") == "op_a_b"


# --- end to end ---------------------------------------------------------------------------------------------------
BLOCKED = """
import sys


class NoWarpforge:
    def find_spec(self, name, path=None, target=None):
        if name == "warpforge" or name.startswith("warpforge."):
            raise ImportError("warpforge is not importable in this process (blocked by the test)")
        return None


sys.meta_path.insert(0, NoWarpforge())
"""

# The op on the problem's own inputs: its file imported as a module, its size globals set small, get_inputs() and
# Model(*get_init_inputs()) under a seed; compared with that Model in float64.
CALL = (
    BLOCKED
    + """
import importlib, importlib.util, json
import torch

problem_path, ns, op, sizes = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
spec = importlib.util.spec_from_file_location("the_problem", problem_path)
problem = importlib.util.module_from_spec(spec)
spec.loader.exec_module(problem)
for name, value in sizes.items():
    setattr(problem, name, value)
torch.manual_seed(7)
model = problem.Model(*problem.get_init_inputs()).eval()
inputs = list(problem.get_inputs())
pkg = importlib.import_module(ns)
ref = importlib.import_module(ns + "._reference." + op)
out = getattr(pkg, op)(*inputs, *model.state_dict().values())
with torch.no_grad():
    want = model.double()(*[x.double() for x in inputs])
atol, rtol = ref.TOLERANCES[torch.float32]
torch.testing.assert_close(out.double(), want, atol=atol, rtol=rtol)
assert not any(m == "warpforge" or m.startswith("warpforge.") for m in sys.modules)
print("equal", tuple(out.shape), "max abs err %.3g" % (out.double() - want).abs().max().item())
"""
)

PYTEST = (
    BLOCKED
    + """
import pytest

sys.exit(pytest.main(sys.argv[1:]))
"""
)

# (problem, small sizes for its globals, the generated tests also on the reference path: torch.compile of the
# reference takes ~30 s on 2 busy cores, so only the Gemm case runs it). Both slow: a campaign, an export and
# the package's own tests are ~40 s of the default tier's 12 minutes; the export's unit tests stay there.
CASES = [
    pytest.param(PROBLEMS / "19_ReLU.py", {"batch_size": 5, "dim": 300}, (True,), id="19_ReLU", marks=pytest.mark.slow),
    pytest.param(
        LEVEL2 / "12_Gemm_Multiply_LeakyReLU.py",
        {"batch_size": 5, "in_features": 40, "out_features": 24},
        (True, False),
        id="12_Gemm_Multiply_LeakyReLU",
        marks=pytest.mark.slow,
    ),
]


def _env(dest: Path, interpret: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    env["PYTHONPATH"] = str(dest)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    return env


@pytest.mark.parametrize("problem,sizes,interpret_modes", CASES)
def test_a_problem_run_then_exported_runs_without_warpforge(
    problem: Path,
    sizes: dict[str, int],
    interpret_modes: tuple[bool, ...],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not problem.is_file():
        pytest.skip(f"{problem} not found (KernelBench at ../shared/kernelbench)")
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(problem, work / problem.name)
    path = work / problem.name
    cache = tmp_path / "cache"  # the matched copy and its templates go here (platformdirs reads XDG_CACHE_HOME)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    url = f"sqlite:///{tmp_path / 'wf.db'}"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "warpforge.cli",
            "run",
            str(path),
            "--trials",
            "1",
            "--backend",
            "interpret",
            "--db",
            url,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert run.returncode == 0 and "ok" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]

    dest = tmp_path / "pkg"
    args = ["export", path.stem, "--dest", str(dest), "--namespace", "bp", "--allow-untimed", "--db", url, "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    op = op_name(path.stem)
    payload = json.loads(res.stdout)
    assert payload["ops"][op]["untimed"] is True

    # the kernel shipped is the stored source that was verified ok, its launches wrapped and nothing else
    reader = Reader(url)
    info = json.loads((dest / "bp" / "kernel_info.json").read_text())[op]
    assert info["task"] == path.stem and info["op"] == op
    ok = reader.evaluations(task=path.stem, verdict="ok", variant_hash=info["variant_hash"])
    assert ok.total >= 1 and any(e.params == info["params"] for e in ok.items)
    stored = reader.variant(info["variant_hash"]).source
    assert (dest / "bp" / "_kernels" / f"{op}.py").read_text() == wrap_launches(stored)
    searched = [p for p in cache.rglob(f"variants/{info['variant']}.py")]
    assert [p.read_text() for p in searched] == [stored]  # the matched, adapted template the campaign ran
    reference = (dest / "bp" / "_reference" / f"{op}.py").read_text()
    assert reference.startswith(problem.read_text().rstrip("\n"))  # the problem verbatim, then the contract tail

    call = subprocess.run(
        [sys.executable, "-c", CALL, str(path), "bp", op, json.dumps(sizes)],
        cwd=tmp_path,
        env=_env(dest, interpret=True),
        capture_output=True,
        text=True,
    )
    assert call.returncode == 0 and call.stdout.startswith("equal"), call.stdout + call.stderr[-3000:]
    for interpret in interpret_modes:
        tests = subprocess.run(
            [sys.executable, "-c", PYTEST, "-q", "-p", "no:cacheprovider", "-rs", str(dest / "tests")],
            cwd=tmp_path,
            env=_env(dest, interpret),
            capture_output=True,
            text=True,
        )
        assert tests.returncode == 0 and " passed" in tests.stdout, tests.stdout[-3000:]

    # the matched copy gone from the cache: export writes it again from the problem, and the same package
    shutil.rmtree(cache / "warpforge" / "matched")
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["written"] == []
