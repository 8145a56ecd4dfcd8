"""GPU check of export's generated package: build it from hand-picked configurations, run its tests and bench.

The configurations are chosen by hand (one sensible config per op, NOT tuned, no campaign), keyed to the GPU
this runs on, so the package's own tests (Triton on CUDA, opcheck with aot_dispatch, torch.compile fullgraph,
torch.export, the --patch helper on a tiny Llama) and its bench.py (op vs eager reference vs torch.compile)
run as a user's would. Without a GPU it builds the package, says so and exits 0: nothing is measured.

    python benchmarks/export_gpu_check.py [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import triton

from warpforge.export.package import render_package, write_tree
from warpforge.export.plan import GpuTable, OpPlan, TunedEntry
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import builtin_variants

CHOICE = {
    "rmsnorm": ("single_pass", {"ROWS_PER_PROGRAM": 1, "num_warps": 8, "num_stages": 2}),
    "swiglu": ("flat", {"BLOCK": 4096, "num_warps": 8, "num_stages": 1}),
    "cross_entropy": ("online", {"BLOCK_V": 4096, "num_warps": 8, "num_stages": 2}),
}


def build(out: Path, gpu: str) -> None:
    plans = []
    for name, (vname, params) in CHOICE.items():
        task = get_task(name)
        v = next(x for x in builtin_variants(name) if x.name == vname)
        table = GpuTable(gpu, "recorded", params, tuple(TunedEntry(s, "float16", params, None, 0) for s in task.shapes))
        info = {
            "op": name,
            "task": name,
            "gpu": gpu,
            "gpus": [gpu],
            "timing_source": "recorded",
            "backend": "hand",
            "campaign": "export_gpu_check (hand-picked configurations, not a campaign)",
            "variant": v.name,
            "variant_hash": v.source_hash,
            "params": params,
            "objective_ms": None,
            "speedup_vs_eager": None,
            "speedup_vs_eager_interval": [None, None],
            "speedup_vs_torch_compile": None,
            "speedup_note": "hand-picked configuration, never tuned",
            "untimed": False,
            "date": None,
            "versions": {"torch": torch.__version__, "triton": triton.__version__},
        }
        plans.append(OpPlan(task, v.name, v.source_hash, v.source, (table,), info, False, ("float16",)))
    write_tree(out, render_package(plans, "wfk_gpu", patch=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="wfk-gpu-")) / "pkg"
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "NVIDIA H200"
    build(out, gpu)
    print(f"package written to {out}")
    if not torch.cuda.is_available():
        print("export_gpu_check: no CUDA GPU here; the package's GPU tests and bench.py need one. Nothing measured.")
        return 0
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "tests"]
    tests = subprocess.run(cmd, cwd=out, env={**os.environ, "PYTHONPATH": str(out)})
    bench = subprocess.run([sys.executable, "bench.py"], cwd=out, env={**os.environ, "PYTHONPATH": str(out)})
    return tests.returncode or bench.returncode


if __name__ == "__main__":
    sys.exit(main())
