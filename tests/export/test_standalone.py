"""A task module as a package ships it (export/standalone.py): the families that build their member from warpforge
helpers come out self-contained and compute what the task computes; an export that would import warpforge is
refused, naming the file."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from export_fill import save

from warpforge.db.queries import Reader
from warpforge.export.package import render_package
from warpforge.export.plan import plan_task
from warpforge.export.source import SourceError
from warpforge.export.standalone import imports_warpforge, standalone_source
from warpforge.kernels import fx_chain
from warpforge.kernels.task import builtin_task_names, get_task

# The families whose task modules import warpforge (kernels/fx_chain.py, channel_steps.py, taskdef.py, tasks/conv.py).
FAMILIES = ("channel_norm", "conv", "conv_transpose", "linear_chain", "linear_groupnorm", "pool")

RUN = """
import importlib.util, json, sys
sys.modules["warpforge"] = None  # any `import warpforge...` raises ImportError
import torch
out = {}
for name, path, shape in json.loads(sys.argv[1]):
    spec = importlib.util.spec_from_file_location("ref_" + name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    inputs = module.make_inputs(shape, torch.float32, 0, "cpu")
    torch.save(module.reference(*inputs), path + ".out")
    out[name] = module.DEFAULT_MEMBER
print(json.dumps(out))
"""


def _imports(text: str) -> set[str]:
    tree = ast.parse(text)
    return {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
        n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
    }


def test_the_families_that_import_warpforge_are_the_ones_written_in() -> None:
    assert sorted(n for n in builtin_task_names() if imports_warpforge(get_task(n).path.read_text())) == list(FAMILIES)


def test_generated_references_compute_the_task_without_warpforge(tmp_path: Path) -> None:
    cases = []
    for name in FAMILIES:
        task = get_task(name)
        text = standalone_source(task.path.read_text(), name)
        assert not any(m.split(".")[0] == "warpforge" for m in _imports(text)), name
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        cases.append((name, str(path), task.check_shapes[1]))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    run = subprocess.run(
        [sys.executable, "-c", RUN, json.dumps(cases)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-3000:]
    members = json.loads(run.stdout.strip().splitlines()[-1])
    for name, path, shape in cases:
        task = get_task(name)
        assert members[name] == task.member
        want = task.reference(*task.make_inputs(shape, torch.float32, 0, "cpu"))  # warpforge's own task module
        torch.testing.assert_close(torch.load(path + ".out"), want, atol=0, rtol=0)


def test_the_step_vocabulary_comes_from_fx_chain_and_matcher_code_is_left_out() -> None:
    text = standalone_source(get_task("conv").path.read_text(), "conv")
    tree = ast.parse(text)
    step_ops = next(n for n in tree.body if isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "STEP_OPS")
    assert isinstance(step_ops.value, ast.Dict)
    keys = [k.value for k in step_ops.value.keys if isinstance(k, ast.Constant)]
    assert keys == list(fx_chain.STEP_OPS)
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert {"make_inputs", "member", "conv", "apply_steps", "apply_channel_steps", "Hyper"} <= defined
    assert not defined & {"propose_members", "proposals", "hyper_of", "read_chain", "_Reader"}


def test_a_module_import_is_written_in_with_clashing_names_renamed() -> None:
    text = standalone_source(get_task("conv_transpose").path.read_text(), "conv_transpose")
    assert "DTYPES = _conv_DTYPES" in text and "_conv_DTYPES: list[torch.dtype] = [" in text
    assert "def inputs(" in text and "return inputs(shape, dtype, seed, device, transposed=True)" in text


def test_a_module_without_warpforge_ships_as_it_is() -> None:
    text = get_task("rmsnorm").path.read_text()
    assert standalone_source(text, "rmsnorm") == text


def test_an_export_that_would_import_warpforge_is_refused_naming_the_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'wf.db'}"
    save(url, "swiglu", "flat", {"BLOCK": 1024, "num_warps": 4, "num_stages": 1}, resources=[(32, 0, 0)])
    plan = plan_task(Reader(url), get_task("swiglu"), allow_untimed=True)
    render_package([plan], "mykernels")  # as stored: fine
    bad = plan.__class__(
        **{
            **plan.__dict__,
            "variant_source": plan.variant_source
            + "\n\ndef _helper():\n    from warpforge.kernels import fx_chain\n    return fx_chain\n",
        }
    )
    with pytest.raises(SourceError, match=r"mykernels/_kernels/swiglu\.py imports warpforge\.kernels"):
        render_package([bad], "mykernels")
