"""The untrusted side: runs one candidate in a spawned child and reports raw facts, never verdicts.

Started as ``python -I -m warpforge.evaluator.child RESULT_FD`` by evaluator/sandbox.py. It imports
torch and Triton, caps its address space at what it holds then plus the parent's budget (when asked),
then blocks on one JSON request line. Modes:

- ``check`` (child_check.py): run ``launch`` on input files the trusted side wrote (seeds the child
  never sees), with fresh allocations prefilled with a sentinel; save outputs and post-call inputs,
  plus a second-sentinel rerun and a ghost replay (kernels disabled) of one case;
- ``compile``: capture each ``@triton.jit`` launch on fake tensors (no memory, any shape) and compile
  it ahead of time for a target GPU, reporting registers, spills and shared memory;
- ``space``: apply ``constraints`` to every configuration of SPACE (the feasible set for search);
- ``reference``, ``bench``, ``ab`` (child_bench.py): time the reference, the candidate on fresh inputs
  for every timed call, or two candidates interleaved.

The report goes to a private pipe and echoes the request's nonce; the child then leaves with
``os._exit`` so that no candidate ``atexit`` hook or lingering thread runs after the report.
"""

from __future__ import annotations

import json
import os
import re
import resource
import sys
import time
from pathlib import Path
from typing import Any

from warpforge.evaluator.sandbox import AS_LIMIT_ENV


def _compile_target(target: str) -> Any:
    from triton.backends.compiler import GPUTarget

    match = re.fullmatch(r"sm_?(\d+)a?", target)
    if not match:
        raise ValueError(f"unsupported target {target!r}: use sm_80, sm_90 ...")
    return GPUTarget("cuda", int(match.group(1)), 32)


def _resource_usage(cubin: bytes, scratch: Path) -> dict[str, dict[str, int]]:
    import subprocess

    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not tool.exists():
        return {}
    path = scratch / "kernel.cubin"
    path.write_bytes(cubin)
    text = subprocess.run([str(tool), "--dump-resource-usage", str(path)], capture_output=True, text=True,
                          timeout=60).stdout
    usage: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        if line.strip().startswith("Function "):
            current = line.strip().removeprefix("Function ").rstrip(":")
        elif current and "REG:" in line:
            usage[current] = {k: int(v) for k, v in re.findall(r"(REG|STACK|SHARED|LOCAL):(\d+)", line)}
    return usage


def run_compile(req: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """Capture the kernel launches of ``launch`` on fake tensors, then compile each for the target."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from triton.compiler import ASTSource, make_backend
    from triton.compiler import compile as triton_compile
    from triton.runtime.jit import JITFunction, create_function_from_signature

    from warpforge.evaluator.child_common import error_info, load_candidate
    from warpforge.kernels.task import load_task_file, parse_dtype

    captured: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []

    def capture(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        captured.append((self, args, kwargs))

    JITFunction.run = capture  # type: ignore[method-assign]
    try:
        module = load_candidate(scratch / req["candidate"])
    except BaseException as exc:  # noqa: BLE001
        return {"error": error_info(exc, "import")}
    task = load_task_file(req["task_path"])
    target = _compile_target(req["target"])
    backend = make_backend(target)
    kernels: list[dict[str, Any]] = []
    seen: set[str] = set()
    for case in req["cases"]:
        captured.clear()
        try:
            with FakeTensorMode():
                inputs = task.make_inputs(case["shape"], parse_dtype(case["dtype"]), 0, "cpu")
                module.launch(*inputs, **req["params"])
        except BaseException as exc:  # noqa: BLE001
            return {"error": error_info(exc, "trace"), "kernels": kernels}
        for fn, args, kwargs in captured:
            kwargs = {"debug": False, **kwargs}
            try:
                binder = create_function_from_signature(fn.signature, fn.params, backend)
                bound, specialization, options = binder(*args, **kwargs)
                options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
                key = json.dumps([fn.__name__, signature, sorted(map(str, constexprs.items())),
                                  sorted(map(str, options.__dict__.items()))])
                if key in seen:
                    continue
                seen.add(key)
                start = time.perf_counter()
                compiled = triton_compile(ASTSource(fn, signature, constexprs, attrs), target=target,
                                          options=options.__dict__)
                seconds = time.perf_counter() - start
            except BaseException as exc:  # noqa: BLE001
                return {"error": error_info(exc, "compile"), "kernels": kernels}
            usage = _resource_usage(compiled.asm["cubin"], scratch)
            regs = max((u.get("REG", 0) for u in usage.values()), default=None)
            stack = max((u.get("STACK", 0) for u in usage.values()), default=None)
            kernels.append({
                "kernel": fn.__name__, "shape": case["shape"], "dtype": case["dtype"], "registers": regs,
                "spill_bytes": stack, "shared_bytes": int(compiled.metadata.shared),
                "num_warps": int(compiled.metadata.num_warps), "compile_s": seconds,
            })
    return {"kernels": kernels, "target": req["target"]}


def run_space(req: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """Apply the variant's constraints to every configuration of its SPACE, for every benchmark shape."""
    import itertools

    from warpforge.evaluator.child_common import error_info, load_candidate

    try:
        module = load_candidate(scratch / req["candidate"])
    except BaseException as exc:  # noqa: BLE001
        return {"error": error_info(exc, "import")}
    space: dict[str, list[Any]] = req["space"]
    names = list(space)
    feasible = []
    fn = getattr(module, "constraints", None)
    try:
        for values in itertools.product(*(space[n] for n in names)):
            params = dict(zip(names, values))
            if fn is None or all(fn(dict(params), dict(shape)) for shape in req["shapes"]):
                feasible.append(list(values))
    except BaseException as exc:  # noqa: BLE001
        return {"error": error_info(exc, "constraints")}
    return {"names": names, "feasible": feasible}


def _address_space() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    # -I ignores PYTHONDONTWRITEBYTECODE: no __pycache__ next to the candidate (any file there that the
    # harness did not write is the candidate's: rejected, wrote_files).
    sys.dont_write_bytecode = True
    import torch
    import triton.runtime.jit  # noqa: F401 - warm while waiting for the request

    limit = os.environ.get(AS_LIMIT_ENV)
    if limit:
        # After the imports, so the limit is what the candidate may add whatever this torch build maps
        # (a CUDA build maps several GB of libraries): a runaway allocation fails with MemoryError here.
        cap = _address_space() + int(limit)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    from warpforge.evaluator import child_common
    from warpforge.evaluator.child_bench import run_ab, run_bench, run_reference
    from warpforge.evaluator.child_check import run_check

    if child_common.INTERPRET:
        import triton.runtime.interpreter  # noqa: F401
    child_common.RESULT_FD = int(sys.argv[1])
    line = sys.stdin.readline()
    req = json.loads(line)
    scratch = Path(req["scratch"])
    handlers = {"check": run_check, "compile": run_compile, "bench": run_bench, "space": run_space,
                "reference": run_reference, "ab": run_ab}
    try:
        result = handlers[req["mode"]](req, scratch)
    except BaseException as exc:  # noqa: BLE001 - report the harness's own failure too
        result = {"error": child_common.error_info(exc, "harness")}
    import triton

    result["versions"] = {"torch": torch.__version__, "python": sys.version.split()[0], "triton": triton.__version__}
    result["nonce"] = req.get("nonce")
    child_common.emit(result)
    os._exit(0)


if __name__ == "__main__":
    main()
