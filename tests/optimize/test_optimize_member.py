"""A region matched to a family's member is searched, exported and patched as that member
(``elementwise[gelu_tanh]``, kernels/members.py): a forward step with a tanh-GELU module gets the member's kernel
and the same outputs; a training step patches it too, with torch autograd of the member's reference as the
backward, since the family has no backward kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from warpforge.optimize.flow import _patchable, reference_backward
from warpforge.optimize.match import CallMatch

# A KernelBench-format file: the activation is the only region a task computes (the affine map around it is
# loose tensor ops of the model), so the run is one one-trial campaign, one export and the proof.
MODEL = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.GELU(approximate="tanh")

    def forward(self, x):
        return self.act(x * 1.5) - 0.25


batch_size = 4
dim = 96


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""


def _region(match: CallMatch) -> SimpleNamespace:
    return SimpleNamespace(match=match, source="module")


def test_a_member_is_patchable_and_trains_with_its_references_backward() -> None:
    match = CallMatch("elementwise", "gelu_tanh", {"M": 4, "N": 96}, (0,), (False,), has_backward=False)
    assert match.task_name == "elementwise[gelu_tanh]"
    region = _region(match)
    assert _patchable(region, train=False) == "" and _patchable(region, train=True) == ""  # type: ignore[arg-type]
    assert not reference_backward(region, train=False)  # type: ignore[arg-type]
    assert reference_backward(region, train=True)  # type: ignore[arg-type]
    with_kernel = _region(CallMatch("layernorm", "", {"M": 4, "N": 96}, (0, 1, 2), (False,) * 3, has_backward=True))
    assert not reference_backward(with_kernel, train=True)  # type: ignore[arg-type]


@pytest.mark.slow
def test_optimize_patches_a_gelu_member_and_the_outputs_match(tmp_path: Path) -> None:
    target = tmp_path / "gelu_model.py"
    target.write_text(MODEL)
    out = tmp_path / "opt"
    env = dict(
        os.environ, WARPFORGE_DB=f"sqlite:///{tmp_path / 'wf.db'}", XDG_CACHE_HOME=str(tmp_path / "cache"), COLUMNS="80"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "warpforge.cli",
            "optimize",
            str(target),
            "--infer",
            "--trials",
            "3",
            "--out",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    act = next(r for r in report["regions"] if r["name"].endswith("act"))
    assert act["task"].startswith("elementwise[gelu_tanh]") and act["patched"], act
    assert report["checks"]["outputs_match"] and report["checks"]["kernel_calls"][act["name"]] >= 1, report["checks"]
    assert list(report["trials"]) == ["elementwise[gelu_tanh]"]
    patches = json.loads((out / "patches.json").read_text())
    assert [(p["op"], p["task"]) for p in patches] == [("elementwise_gelu_tanh", "elementwise[gelu_tanh]")]
