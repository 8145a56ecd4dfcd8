"""An exported op shows the task's signature and docstring (issue 31: ``help(pkg.rmsnorm)`` showed
``(*args, **kwargs)`` and torch.library's generic docstring)."""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

import torch
from test_package import _plans

from warpforge.export.package import render_package, write_tree
from warpforge.kernels.task import get_task


def test_exported_op_has_the_tasks_signature_docstring_and_still_computes(tmp_path: Path) -> None:
    files = render_package(_plans(tmp_path), "sigkernels", patch=False)
    write_tree(tmp_path / "pkg", files)
    sys.path.insert(0, str(tmp_path / "pkg"))
    try:
        pkg = importlib.import_module("sigkernels")
        task = get_task("rmsnorm")
        expected = list(inspect.signature(task.reference).parameters)  # the task file's own reference
        assert list(inspect.signature(pkg.rmsnorm).parameters) == expected
        first_line = task.description.split(".")[0]
        assert first_line in (pkg.rmsnorm.__doc__ or "") and "*args" not in str(inspect.signature(pkg.rmsnorm))
        assert pkg.rmsnorm.custom_op is not None
        inputs = task.make_inputs(task.check_shapes[0], torch.float32, 0, "cpu")  # shape, dtype, seed, device
        torch.testing.assert_close(pkg.rmsnorm(*inputs), task.reference(*inputs))
    finally:
        sys.path.remove(str(tmp_path / "pkg"))
        for name in [m for m in sys.modules if m == "sigkernels" or m.startswith("sigkernels.")]:
            del sys.modules[name]
