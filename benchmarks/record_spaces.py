"""Record every template's whole SPACE on the benchmark shapes of a CUDA GPU, in Kernel Tuner's cache format.

One file per (GPU, task, variant, shape, dtype) under ``src/warpforge/recordings/`` (see
evaluator/run/replay.py for the layout). Each configuration is evaluated by the ``cuda`` backend: checked
for correctness on the GPU, then timed with ``triton.testing.do_bench`` (L2 flushed). A correct
configuration is recorded with ``times = [p20, p50, p80]`` of its do_bench samples; a compile failure
as ``CompilationFailedConfig``; anything else that is not ``ok`` as ``RuntimeFailedConfig``.
Configurations outside ``constraints`` are not written (the format's rule for restrictions).

A file is written only when its whole feasible space was measured, so that an absent configuration
always means "violates the constraints", never "ran out of time". Without a GPU the script says so
and exits 0.

    python benchmarks/record_spaces.py [--tasks softmax,rmsnorm] [--budget-s 3000] [--max-space 500]
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.backend import get_backend
from warpforge.evaluator.run.recorded_spaces import write_cache
from warpforge.evaluator.run.recordings import PACKAGE_RECORDINGS, recording_path
from warpforge.evaluator.run.stages import space_stage
from warpforge.evaluator.sandbox.job import Job
from warpforge.kernels.task import builtin_task_names, get_task
from warpforge.kernels.taskdef import dtype_name
from warpforge.kernels.variant import builtin_variants


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default=",".join(builtin_task_names()))
    parser.add_argument("--budget-s", type=float, default=3000.0, help="stop starting new files after this")
    parser.add_argument("--max-space", type=int, default=600, help="skip variants with more feasible configs")
    parser.add_argument("--out", type=Path, default=PACKAGE_RECORDINGS)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("record_spaces: no CUDA GPU here; recordings must come from a real GPU. Nothing recorded.")
        return 0
    gpu = torch.cuda.get_device_name(0)
    target = "sm_{}{}".format(*torch.cuda.get_device_capability(0))  # constraints judged with this GPU's limits
    start = time.monotonic()
    backend = get_backend("cuda")
    written = 0
    try:
        for task_name in args.tasks.split(","):
            task = get_task(task_name)
            dtype = task.dtypes[0]
            for variant in builtin_variants(task.name):
                failure, configs = space_stage(backend.pool, Job(task, variant, {}, target=target))
                if failure is not None or not configs or len(configs) > args.max_space:
                    print(f"skip {task.name}/{variant.name}: {failure.message if failure else len(configs)} configs")
                    continue
                for shape in task.shapes:
                    if time.monotonic() - start > args.budget_s:
                        print(f"budget of {args.budget_s:.0f} s spent; {written} files written")
                        return 0
                    records = []
                    ref_ms = None
                    for params in configs:
                        result = backend.evaluate(Job(task, variant, params, shapes=[shape], dtypes=[dtype]))
                        if result.verdict is Verdict.OK and result.shapes:
                            s = result.shapes[0]
                            records.append((params, s.p50_ms, [s.p20_ms, s.p50_ms, s.p80_ms]))
                            ref_ms = ref_ms or [s.ref_p20_ms, s.ref_p50_ms, s.ref_p80_ms]
                        elif result.verdict is Verdict.COMPILE_ERROR:
                            records.append((params, "CompilationFailedConfig", []))
                        else:
                            records.append((params, "RuntimeFailedConfig", []))
                    meta = {
                        "shape": shape,
                        "dtype": dtype_name(dtype),
                        "reference_ms": ref_ms,
                        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                        "variant_hash": variant.source_hash,
                        "torch": torch.__version__,
                    }
                    path = recording_path(
                        args.out, gpu, task.name, variant.name, variant.source_hash, dtype_name(dtype), shape
                    )
                    write_cache(path, gpu, f"{task.name}/{variant.name}", meta, variant.space, records)
                    written += 1
                    print(f"wrote {path} ({len(records)} configs, {time.monotonic() - start:.0f} s)", flush=True)
    finally:
        backend.close()
    print(f"{written} recordings written for {gpu}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
