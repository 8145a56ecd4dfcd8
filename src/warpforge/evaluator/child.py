"""The untrusted side: runs one candidate in a spawned child and reports raw facts, never verdicts.

Started as ``python -I -m warpforge.evaluator.child RESULT_FD`` by evaluator/sandbox.py. It imports
torch, then blocks on one JSON request line. Modes:

- ``check``: run ``launch`` on input files the trusted side wrote (seeds the child never sees), with
  fresh allocations prefilled with a sentinel, and save outputs and post-call inputs for the trusted
  side to compare;
- ``compile``: capture each ``@triton.jit`` launch on fake tensors (no memory, any shape) and compile
  it ahead of time for a target GPU, reporting registers, spills and shared memory;
- ``space``: apply ``constraints`` to every configuration of SPACE (the feasible set for search);
- ``bench``: on a GPU, time the reference first (before the candidate is even imported, so it cannot
  slow the reference down), then the candidate, with ``triton.testing.do_bench`` (L2 flushed).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

_ORIGINAL_ALLOC = {name: getattr(torch, name) for name in ("empty", "empty_like", "empty_strided")}
_ORIGINAL_NEW_EMPTY = torch.Tensor.new_empty


def _report(fd: int, payload: dict[str, Any]) -> None:
    with os.fdopen(fd, "w") as out:
        json.dump(payload, out)


def _error(exc: BaseException, stage: str) -> dict[str, Any]:
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    text = str(exc).strip()
    if isinstance(exc, (ModuleNotFoundError, ImportError)) and stage == "import":
        kind = "import"
    elif isinstance(exc, SyntaxError):
        kind = "compile"
    elif "OutOfResources" in name:
        kind = "resources"
    elif module.startswith("triton") and ("Compil" in name or "compil" in module):
        kind = "compile"
    elif isinstance(exc, torch.cuda.OutOfMemoryError if hasattr(torch.cuda, "OutOfMemoryError") else MemoryError):
        kind = "oom"
    else:
        kind = "runtime"
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return {"stage": stage, "kind": kind, "type": name, "message": text[:4000], "traceback": "".join(tb)[-4000:]}


def _load_candidate(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("wf_candidate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["wf_candidate"] = module
    spec.loader.exec_module(module)
    return module


def _install_sentinel(value: float) -> None:
    """Fill every fresh float allocation with ``value`` so unwritten output cannot pass as written."""

    def filled(tensor: torch.Tensor) -> torch.Tensor:
        if tensor.is_floating_point() and tensor.device.type != "meta":
            tensor.fill_(value)
        return tensor

    for name, fn in _ORIGINAL_ALLOC.items():
        setattr(torch, name, lambda *a, _fn=fn, **k: filled(_fn(*a, **k)))
    torch.Tensor.new_empty = lambda self, *a, **k: filled(_ORIGINAL_NEW_EMPTY(self, *a, **k))  # type: ignore


def _as_tuple(out: Any) -> tuple[Any, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _storage_span(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _check_constraints(module: Any, params: dict[str, Any], shapes: list[dict[str, int]]) -> str | None:
    fn = getattr(module, "constraints", None)
    if fn is None:
        return None
    for shape in shapes:
        if not fn(dict(params), dict(shape)):
            return json.dumps(shape, sort_keys=True)
    return None


def run_check(req: dict[str, Any], scratch: Path) -> dict[str, Any]:
    device = req["device"]
    try:
        module = _load_candidate(scratch / req["candidate"])
    except BaseException as exc:  # noqa: BLE001 - any failure to import is the candidate's
        return {"error": _error(exc, "import")}
    try:
        bad_shape = _check_constraints(module, req["params"], req["constraint_shapes"])
    except BaseException as exc:  # noqa: BLE001
        return {"error": _error(exc, "constraints")}
    if bad_shape is not None:
        return {"invalid_config": bad_shape}
    cases = []
    for case in req["cases"]:
        inputs = torch.load(scratch / case["inputs"], weights_only=True)
        inputs = tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs)
        _install_sentinel(float(case["sentinel"]))
        start = time.perf_counter()
        try:
            out = module.launch(*inputs, **req["params"])
            _sync(device)
        except BaseException as exc:  # noqa: BLE001
            return {"error": _error(exc, "run"), "cases": cases}
        elapsed = time.perf_counter() - start
        outs = _as_tuple(out)
        kinds = [type(o).__name__ if type(o) is not torch.Tensor else "Tensor" for o in outs]
        spans = [_storage_span(x) for x in inputs if isinstance(x, torch.Tensor)]
        aliases = [
            type(o) is torch.Tensor and any(lo < _storage_span(o)[1] and _storage_span(o)[0] < hi for lo, hi in spans)
            for o in outs
        ]
        if all(k == "Tensor" for k in kinds):
            torch.save(
                {"out": [o.detach().to("cpu").clone() for o in outs],
                 "inputs_after": [x.detach().to("cpu").clone() if isinstance(x, torch.Tensor) else x for x in inputs]},
                scratch / f"out_{case['id']}.pt",
            )
        cases.append({"id": case["id"], "kinds": kinds, "aliases": aliases, "seconds": elapsed})
    return {"cases": cases}


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

    from warpforge.kernels.task import load_task_file, parse_dtype

    captured: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []

    def capture(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        captured.append((self, args, kwargs))

    JITFunction.run = capture  # type: ignore[method-assign]
    try:
        module = _load_candidate(scratch / req["candidate"])
    except BaseException as exc:  # noqa: BLE001
        return {"error": _error(exc, "import")}
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
            return {"error": _error(exc, "trace"), "kernels": kernels}
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
                return {"error": _error(exc, "compile"), "kernels": kernels}
            usage = _resource_usage(compiled.asm["cubin"], scratch)
            regs = max((u.get("REG", 0) for u in usage.values()), default=None)
            stack = max((u.get("STACK", 0) for u in usage.values()), default=None)
            kernels.append({
                "kernel": fn.__name__, "shape": case["shape"], "dtype": case["dtype"], "registers": regs,
                "spill_bytes": stack, "shared_bytes": int(compiled.metadata.shared),
                "num_warps": int(compiled.metadata.num_warps), "compile_s": seconds,
            })
    return {"kernels": kernels, "target": req["target"]}


def run_bench(req: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """GPU timing: the reference first, then the candidate, each with do_bench and an L2 flush."""
    import triton
    from triton.testing import do_bench

    from warpforge.kernels.task import load_task_file, parse_dtype

    quantiles = [0.2, 0.5, 0.8]
    task = load_task_file(req["task_path"])
    device = req["device"]
    cases: list[dict[str, Any]] = []
    prepared = []
    for case in req["cases"]:
        inputs = task.make_inputs(case["shape"], parse_dtype(case["dtype"]), int(case["seed"]), device)
        ref = do_bench(lambda: task.reference(*inputs), warmup=25, rep=100, quantiles=quantiles)
        prepared.append((case, inputs))
        cases.append({"shape": case["shape"], "dtype": case["dtype"], "ref_ms": list(ref)})
    try:
        module = _load_candidate(scratch / req["candidate"])
    except BaseException as exc:  # noqa: BLE001
        return {"error": _error(exc, "import")}
    for record, (case, inputs) in zip(cases, prepared):
        try:
            module.launch(*inputs, **req["params"])  # compile and warm outside the timed region
            _sync(device)
            wall = time.perf_counter()
            times = do_bench(lambda: module.launch(*inputs, **req["params"]), warmup=25, rep=100,
                             quantiles=quantiles)
            record["bench_wall_s"] = time.perf_counter() - wall
        except BaseException as exc:  # noqa: BLE001
            return {"error": _error(exc, "bench"), "cases": cases}
        record["ms"] = list(times)
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {"cases": cases, "device": {
        "name": props.name, "capability": f"{props.major}.{props.minor}", "sms": props.multi_processor_count,
        "memory": props.total_memory, "cuda": torch.version.cuda, "triton": triton.__version__,
    }}


def run_space(req: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """Apply the variant's constraints to every configuration of its SPACE, for every benchmark shape."""
    import itertools

    try:
        module = _load_candidate(scratch / req["candidate"])
    except BaseException as exc:  # noqa: BLE001
        return {"error": _error(exc, "import")}
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
        return {"error": _error(exc, "constraints")}
    return {"names": names, "feasible": feasible}


def main() -> None:
    result_fd = int(sys.argv[1])
    line = sys.stdin.readline()
    req = json.loads(line)
    scratch = Path(req["scratch"])
    handlers = {"check": run_check, "compile": run_compile, "bench": run_bench, "space": run_space}
    try:
        result = handlers[req["mode"]](req, scratch)
    except BaseException as exc:  # noqa: BLE001 - report the harness's own failure too
        result = {"error": _error(exc, "harness")}
    versions = {"torch": torch.__version__, "python": sys.version.split()[0]}
    try:
        import triton

        versions["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    result["versions"] = versions
    _report(result_fd, result)


if __name__ == "__main__":
    main()
