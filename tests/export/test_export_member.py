"""A family member as a task of its own, end to end: ``elementwise[gelu_tanh]`` searched by a campaign (judged on
the interpreter against the member's reference), then exported; in a fresh process where importing warpforge
raises, the package's op equals ``F.gelu(x, approximate="tanh")`` computed here, and its reference module's
``reference`` is that member's, not the family's default (erf GELU, which differs by up to ~1e-3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from warpforge.cli import app
from warpforge.db.queries import Reader

BLOCKED = """
import sys


class NoWarpforge:
    def find_spec(self, name, path=None, target=None):
        if name == "warpforge" or name.startswith("warpforge."):
            raise ImportError("warpforge is not importable in this process (blocked by the test)")
        return None


sys.meta_path.insert(0, NoWarpforge())
"""

CALL = (
    BLOCKED
    + """
import importlib
import torch
import torch.nn.functional as F

ns, op = sys.argv[1], sys.argv[2]
pkg = importlib.import_module(ns)
ref = importlib.import_module(ns + "._reference." + op)
x = torch.randn(7, 129, generator=torch.Generator().manual_seed(3)) * 3
want = F.gelu(x.double(), approximate="tanh")
out = getattr(pkg, op)(x)
atol, rtol = 1e-4, 1e-4
torch.testing.assert_close(out.double(), want, atol=atol, rtol=rtol)
torch.testing.assert_close(ref.reference(x.double()), want, atol=1e-12, rtol=1e-12)
assert (F.gelu(x.double()) - want).abs().max() > 1e-4  # the default member would have failed the line above
assert not any(m == "warpforge" or m.startswith("warpforge.") for m in sys.modules)
print("equal", tuple(out.shape), "max abs err %.3g" % (out.double() - want).abs().max().item())
"""
)


@pytest.mark.slow
def test_a_member_searched_then_exported_runs_without_warpforge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from warpforge.search.engine.campaign import CampaignSpec, run_campaign

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the member's generated files
    url = f"sqlite:///{tmp_path / 'wf.db'}"
    summary = run_campaign(
        CampaignSpec(name="member", tasks=["elementwise:gelu_tanh"], trials=1, backend="interpret", db_url=url, seed=0)
    )
    assert [t.task for t in summary.tasks] == ["elementwise[gelu_tanh]"]  # the alias runs the canonical name
    reader = Reader(url)
    ok = reader.evaluations(task="elementwise[gelu_tanh]", verdict="ok")
    assert ok.total == 1
    stored = reader.variant(ok.items[0].variant_hash).source
    assert "OP = 'gelu_tanh'" in stored and "TASK = 'elementwise[gelu_tanh]'" in stored

    dest = tmp_path / "pkg"
    res = CliRunner().invoke(
        app,
        [
            "export",
            "elementwise[gelu_tanh]",
            "--dest",
            str(dest),
            "--namespace",
            "mb",
            "--allow-untimed",
            "--db",
            url,
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    op = "elementwise_gelu_tanh"
    assert list(json.loads(res.stdout)["ops"]) == [op]
    info = json.loads((dest / "mb" / "kernel_info.json").read_text())[op]
    assert info["task"] == "elementwise[gelu_tanh]" and info["op"] == op
    assert (dest / "mb" / "_kernels" / f"{op}.py").read_text().count("OP = 'gelu_tanh'") == 1

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    env.update(PYTHONPATH=str(dest), TRITON_INTERPRET="1")
    call = subprocess.run([sys.executable, "-c", CALL, "mb", op], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert call.returncode == 0 and call.stdout.startswith("equal"), call.stdout + call.stderr[-3000:]
