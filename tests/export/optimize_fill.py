"""An optimize run's package without the run: swiglu's ``flat`` winner (stored ``ok`` through export_fill, exported
untimed) and one region's patch stated here, over a small model file in KernelBench's format whose ``act`` module
computes ``silu(a) * b`` (the swiglu task). What ``warpforge optimize`` would write for it, through the same
writer (optimize/flow.py ``write_package``), so the package's ``patch(model)``, its generated ``_patching.py``
and its own tests are exercised in seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from export_fill import save

MODEL = """import torch
import torch.nn.functional as F
from torch import nn

batch_size = 3
features = 8
hidden = 32


class SwiGLU(nn.Module):
    def forward(self, a, b):
        return F.silu(a) * b


class Model(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.gate = nn.Linear(features, hidden)
        self.up = nn.Linear(features, hidden)
        self.act = SwiGLU()
        self.down = nn.Linear(hidden, features)

    def forward(self, x):
        return self.down(self.act(self.gate(x), self.up(x)))


def get_inputs():
    return [torch.randn(batch_size, 5, features)]


def get_init_inputs():
    return [features, hidden]
"""

NS = "wf_patch_pkg"


def write_optimize_package(tmp: Path, dest: Path, ns: str = NS) -> dict[str, Any]:
    """Write the package into ``dest``; returns the package source (what the database would keep)."""
    from warpforge.db.queries import Reader
    from warpforge.export.plan import plan_task
    from warpforge.kernels.task import get_task
    from warpforge.optimize.flow import write_package
    from warpforge.optimize.patch_spec import PatchSpec, dump_patches

    url = f"sqlite:///{tmp / 'wf.db'}"
    save(url, "swiglu", "flat", {"BLOCK": 1024, "num_warps": 4, "num_stages": 1}, resources=[(32, 0, 0)])
    plan = plan_task(Reader(url), get_task("swiglu"), allow_untimed=True)
    # the act module's call: a and b [3, 5, 32], flattened to the task's [M, N] = [15, 32]
    spec = PatchSpec(
        region="act",
        module="act",
        op="swiglu",
        task="swiglu",
        shape={"M": 15, "N": 32},
        order=[0, 1],
        flatten=[True, True],
        ranks=[2, 2],
        dtypes=["float16", "bfloat16", "float32"],
    )
    source: dict[str, Any] = {
        "model_prefix": "",
        "target": {"model.py": MODEL},
        "settings": {
            "kind": "kernelbench",
            "file": "model.py",
            "batch": 3,
            "seq": 5,
            "dtype": "float32",
            "seed": 0,
            "steps": 2,
            "lr": 0.01,
            "train": True,
            "tolerances": {"output": 1e-4, "loss": 1e-4, "grad": 1e-3},
        },
        "summary": {
            "target": "model",
            "dtype": "float32",
            "batch": 3,
            "seq": 5,
            "train": True,
            "steps": 2,
            "untimed": True,
            "regions": [{"name": "act", "task": "swiglu", "status": "verified"}],
        },
    }
    write_package(dest, [plan], ns, dump_patches([spec]), source)
    # what the database keeps of a run (optimize/flow.py writes it beside report.json; the report stores it)
    stored = {"version": 1, "namespace": ns, "patches": dump_patches([spec]), "campaigns": {"swiglu": "c1"}, **source}
    return {"url": url, "plan": plan, "package_source": stored}
