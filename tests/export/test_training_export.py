"""Training export (export/source.py ``training_facts``, templates ``op.py.j2``/``test_op.py.j2``): a training
variant becomes ``<op>_fwd``/``<op>_bwd`` custom ops tied by registered autograd.

The generic path is checked on a fixture task of our own (fixtures/scale_rows.py: a float scalar input, the
gradient of one input of three, a variant that saves two tensors), rmsnorm and swiglu on the package tests
(test_package.py) and the fresh-venv round trip (test_roundtrip.py, slow).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from warpforge.export.op_plan import GpuTable, OpPlan
from warpforge.export.package import render_package, write_tree
from warpforge.export.source import SourceError, training_facts
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import builtin_variants

FIXTURES = Path(__file__).parent / "fixtures"


def _fixture_plan() -> OpPlan:
    task = get_task(str(FIXTURES / "scale_rows.py"))
    source = (FIXTURES / "scale_rows_train.py").read_text()
    params = {"BLOCK_N": 32, "num_warps": 1}
    info = {
        "op": task.name,
        "task": task.name,
        "gpu": None,
        "gpus": [],
        "timing_source": "untimed",
        "backend": "interpret",
        "campaign": "fixture",
        "variant": "scale_rows_train",
        "variant_hash": "0" * 64,
        "params": params,
        "objective_ms": None,
        "speedup_vs_eager": None,
        "speedup_vs_eager_interval": [None, None],
        "speedup_vs_torch_compile": None,
        "speedup_note": "test fixture",
        "versions": {},
        "date": None,
        "untimed": True,
    }
    return OpPlan(
        task,
        "scale_rows_train",
        "0" * 64,
        source,
        (GpuTable("untimed", "untimed", params, ()),),
        info,
        True,
        ("float32",),
    )


def test_training_facts_of_the_builtin_templates() -> None:
    for task_name, n_saved in (("rmsnorm", 1), ("swiglu", 0)):
        task = get_task(task_name)
        for v in builtin_variants(task_name):
            facts = training_facts(task, v.source)
            assert facts is not None and facts.grad_inputs == (0, 1) and facts.n_saved == n_saved, v.name
    # a forward-only task (no GRAD_INPUTS) exports forward-only even with a backward in the variant
    assert training_facts(get_task("matmul"), builtin_variants("matmul")[0].source) is None


def test_training_facts_refuse_an_unreadable_saved_tuple() -> None:
    task = get_task("rmsnorm")
    source = next(v for v in builtin_variants("rmsnorm") if v.name == "single_pass").source
    opaque = source.replace("return y.view(x.shape), (rstd,)", "saved = (rstd,)\n    return y.view(x.shape), saved")
    assert opaque != source
    with pytest.raises(SourceError, match=r"return \(out, \(saved, \.\.\.\)\)"):
        training_facts(task, opaque)
    two_ways = source.replace(
        "    return y.view(x.shape), (rstd,)",
        "    if m > 1:\n        return y.view(x.shape), ()\n    return y.view(x.shape), (rstd,)",
    )
    with pytest.raises(SourceError, match="same number of saved tensors"):
        training_facts(task, two_ways)


def test_fixture_op_trains_through_its_kernels(tmp_path: Path) -> None:
    """In this process (the Triton interpreter without a GPU: tests/conftest.py): the forward op returns the
    output and the two saved tensors, the backward gives x's gradient and None for s and alpha."""
    files = render_package([_fixture_plan()], "trainfix")
    op_source = files["trainfix/scale_rows.py"].decode()
    assert 'triton_op("trainfix::scale_rows_fwd"' in op_source and "register_autograd" in op_source
    assert "trainfix/_training.py" in files
    write_tree(tmp_path / "pkg", files)
    sys.path.insert(0, str(tmp_path / "pkg"))
    try:
        pkg = importlib.import_module("trainfix")
    finally:
        sys.path.remove(str(tmp_path / "pkg"))
    ref = importlib.import_module("trainfix._reference.scale_rows")
    x, s, alpha = ref.make_inputs({"M": 7, "N": 33}, torch.float32, 0, "cpu")
    out, f, rows = pkg.scale_rows.forward_op(x, s, alpha)
    torch.testing.assert_close(out, ref.reference(x, s, alpha))
    torch.testing.assert_close(f, s * alpha)
    assert rows.tolist() == [7] and rows.dtype == torch.int32
    xg, sg = x.clone().requires_grad_(True), s.clone().requires_grad_(True)
    y = pkg.scale_rows(xg, sg, alpha)
    grad_out = torch.randn_like(y)
    y.backward(grad_out)
    torch.testing.assert_close(xg.grad, grad_out * (s * alpha)[:, None])
    assert sg.grad is None  # not a trained input: its gradient is None, not a wrong number


@pytest.mark.slow  # two pytest runs in subprocesses: about 70 s each on 2 busy cores
@pytest.mark.parametrize("interpret", ["0", "1"])
def test_fixture_generated_tests_pass(tmp_path: Path, interpret: str) -> None:
    """The generated test suite of the fixture op: on the CPU reference path (torch.compile with backward,
    AOT-dispatch opcheck, export) and under the interpreter (the kernels' gradients)."""
    dest = tmp_path / "pkg"
    write_tree(dest, render_package([_fixture_plan()], "trainfix"))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_INTERPRET=interpret, PYTHONPATH=str(dest))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rs",
            str(dest / "tests" / "test_scale_rows.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-4000:]
    assert "failed" not in run.stdout
    if interpret == "0":
        assert "skipped" not in run.stdout.split("\n")[-2], run.stdout[-2000:]


CONSTANT_KEY_TASK = """
import torch
NAME = "masked_scale"
DESCRIPTION = "x * 2 (masked when CAUSAL; every shape has CAUSAL = 1, the judge never passes causal)"
SHAPES = [{"M": 64, "N": 32, "CAUSAL": 1}]
CHECK_SHAPES = [{"M": 3, "N": 5, "CAUSAL": 1}, {"M": 7, "N": 2, "CAUSAL": 1}]
DTYPES = [torch.float32]
def reference(x, causal=True):
    return x * 2 if causal else x
def make_inputs(shape, dtype, seed, device):
    return (torch.randn(shape["M"], shape["N"], generator=torch.Generator().manual_seed(seed)).to(dtype),)
def flops(shape, dtype):
    return 1.0
def bytes_moved(shape, dtype):
    return 1.0
"""


def test_a_defaulted_keyword_and_a_constant_shape_key_export(tmp_path: Path) -> None:
    """attention's contract: ``reference(q, k, v, causal=True)`` and a CAUSAL key that no tensor carries. The op
    takes the judged inputs only, and its config lookup reads CAUSAL as the constant every shape has."""
    from warpforge.export.runtime._config import shape_of
    from warpforge.export.source import op_signature, shape_map

    path = tmp_path / "masked_scale.py"
    path.write_text(CONSTANT_KEY_TASK)
    task = get_task(str(path))
    assert op_signature(task).names == ("x",)
    dims = shape_map(task)
    assert dims == {"CAUSAL": (-1, 1, -1), "M": (0, 0, 2), "N": (0, 1, 2)}
    assert shape_of((torch.zeros(4, 9),), dims) == {"CAUSAL": 1, "M": 4, "N": 9}


def test_saved_tensors_never_alias_the_output_or_inputs() -> None:
    """attention's launch_forward returns ``out, (out, lse)``: a custom op's outputs may alias nothing, so the
    package copies a saved tensor that is the output, an input or an earlier saved one, and keeps the rest."""
    from warpforge.export.runtime._training import unaliased

    out, x, lse = torch.ones(3), torch.zeros(3), torch.full((1,), 2.0)
    saved = unaliased(out, (out, x, lse, lse), (x,))
    assert saved[0] is not out and torch.equal(saved[0], out)
    assert saved[1] is not x and torch.equal(saved[1], x)
    assert saved[2] is lse and saved[3] is not lse
