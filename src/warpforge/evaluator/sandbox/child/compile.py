"""The child's ``compile`` and ``space`` modes (candidate code runs here: inside the sandbox).

- ``compile``: capture each ``@triton.jit`` launch of ``launch`` (and of a training variant's
  ``launch_forward`` and ``launch_backward``, child/backward.py) on fake tensors (no memory, any shape)
  and compile it ahead of time for a target GPU with Triton's real front end, reporting registers,
  spills, shared memory and the source hash of every kernel compiled;
- ``space``: apply ``constraints`` to every configuration of SPACE (the feasible set for search).
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path
from typing import Any


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
    text = subprocess.run(
        [str(tool), "--dump-resource-usage", str(path)], capture_output=True, text=True, timeout=60
    ).stdout
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

    from warpforge.evaluator.sandbox.child.backward import trace_training
    from warpforge.evaluator.sandbox.child.common import error_info, kernel_hash, load_candidate
    from warpforge.evaluator.sandbox.child.launcher import rebuild_arguments, spec_key
    from warpforge.evaluator.sandbox.child.launcher import specialization as launch_spec
    from warpforge.evaluator.sandbox.child.model_new import STATE_MISMATCH, StateMismatch, entry_for
    from warpforge.kernels.task import load_task_file
    from warpforge.kernels.taskdef import parse_dtype

    captured: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []

    def capture(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        launch_spec(self, args, kwargs, kernel_hash(self))  # typed as in the check (ArgumentRefused)
        captured.append((self, args, kwargs))

    JITFunction.run = capture  # type: ignore[method-assign]
    try:
        module = load_candidate(scratch / req["candidate"], sha256=req.get("candidate_sha256"))
    except BaseException as exc:  # noqa: BLE001 - any failure to import is the candidate's
        return {"error": error_info(exc, "import")}
    task = load_task_file(req["task_path"])
    entry = entry_for(module, req)
    target = _compile_target(req["target"])
    backend = make_backend(target)
    kernels: list[dict[str, Any]] = []
    seen: set[str] = set()
    hashes: set[str] = set()  # source hashes of every kernel compiled (the check may launch only these)
    specs: dict[str, str] = {}  # specialization key (child/launcher.py) -> "benchmark" | "check" | "interpreted"
    shapes_of: dict[str, dict[str, Any]] = {}  # benchmark specialization -> the case that met it
    reference_on_fakes = False  # set before the smallest-shape search (below), which alone calls trace

    def trace(shape: dict[str, Any], dtype: str) -> set[str]:
        """The specializations ``launch`` picks at ``shape`` (fake tensors, nothing compiled); empty on error, and
        where the task's own function is not defined at ``shape`` (a 3x5x7 kernel over a 4x4x8 input: its
        reference raises; the judge could compare nothing there)."""
        captured.clear()
        try:
            with FakeTensorMode():
                inputs = task.make_inputs(shape, parse_dtype(dtype), 0, "cpu")
                if reference_on_fakes:
                    task.reference(*inputs)
                call, args = entry.bind(inputs, {"shape": shape, "dtype": dtype})
                call(*args, **req["params"])
        except BaseException:  # noqa: BLE001 - a shape this variant refuses is no smaller shape
            captured.clear()
            return set()
        found = {spec_key(launch_spec(f, a, k, kernel_hash(f))) for f, a, k in captured}
        captured.clear()
        return found

    by_hash = {kernel_hash(v): v for v in vars(module).values() if isinstance(v, JITFunction)}
    requested = req.get("specs") or []  # specializations the interpreter ran that no case here compiled
    cases = [*req["cases"], *({"spec": spec} for spec in requested)]
    for case in cases:
        captured.clear()
        if "spec" in case:
            fn = by_hash.get(case["spec"]["hash"])
            if fn is None:  # not a module-level kernel of this source: reported as not compiled
                continue
            with FakeTensorMode():
                rebuilt, options = rebuild_arguments(case["spec"])
            captured.append((fn, tuple(rebuilt), options))
            case = {**case, "shape": None, "dtype": None}
        try:
            if "spec" not in case:
                with FakeTensorMode():
                    inputs = task.make_inputs(case["shape"], parse_dtype(case["dtype"]), 0, "cpu")
                    call, call_args = entry.bind(inputs, case)  # launch, or ModelNew with the reference's state
                    call(*call_args, **req["params"])
                    if req.get("training"):  # the backward's kernels are compiled (and allowed in the check) too
                        trace_training(module, task.reference, inputs, req["params"])
        except BaseException as exc:  # noqa: BLE001 - any failure of the traced launch is reported
            info = error_info(exc, "trace")
            if isinstance(exc, StateMismatch):
                info["kind"] = STATE_MISMATCH
            return {"error": info, "kernels": kernels, "compiled_hashes": sorted(hashes), "compiled_specs": specs}
        for fn, args, kwargs in captured:
            spec_id = spec_key(launch_spec(fn, args, kwargs, kernel_hash(fn)))
            if spec_id in specs:  # this specialization is compiled already
                continue
            specs[spec_id] = "interpreted" if "spec" in case else "check" if case.get("only_new") else "benchmark"
            if specs[spec_id] == "benchmark":
                shapes_of[spec_id] = {"shape": case["shape"], "dtype": case["dtype"]}
            hashes.add(kernel_hash(fn))
            kwargs = {"debug": False, **kwargs}
            try:
                binder = create_function_from_signature(fn.signature, fn.params, backend)
                bound, specialization, options = binder(*args, **kwargs)
                options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
                key = json.dumps(
                    [
                        fn.__name__,
                        signature,
                        sorted(map(str, constexprs.items())),
                        sorted(map(str, options.__dict__.items())),
                    ]
                )
                if key in seen:
                    continue
                seen.add(key)
                start = time.perf_counter()
                compiled = triton_compile(
                    ASTSource(fn, signature, constexprs, attrs), target=target, options=options.__dict__
                )
                seconds = time.perf_counter() - start
            except BaseException as exc:  # noqa: BLE001 - the candidate's kernels compiled: reported
                return {
                    "error": error_info(exc, "compile"),
                    "kernels": kernels,
                    "compiled_hashes": sorted(hashes),
                    "compiled_specs": specs,
                    "failed_spec": spec_id,
                }
            usage = _resource_usage(compiled.asm["cubin"], scratch)
            regs = max((u.get("REG", 0) for u in usage.values()), default=None)
            stack = max((u.get("STACK", 0) for u in usage.values()), default=None)
            kernels.append(
                {
                    "kernel": fn.__name__,
                    "source_hash": kernel_hash(fn),
                    "shape": case["shape"],
                    "dtype": case["dtype"],
                    "registers": regs,
                    "spill_bytes": stack,
                    "shared_bytes": int(compiled.metadata.shared),
                    "num_warps": int(compiled.metadata.num_warps),
                    "compile_s": seconds,
                }
            )
    spec_shapes: list[dict[str, Any]] = []
    if req.get("spec_budget") and shapes_of:
        # a reference that cannot run on fake tensors (one reading values) tells nothing of a smaller shape
        reference_on_fakes = _reference_runs_on_fakes(task, next(iter(shapes_of.values())))
        spec_shapes = _smallest_shapes(req, specs, shapes_of, trace, task.fixed_keys)
    return {
        "kernels": kernels,
        "target": req["target"],
        "compiled_hashes": sorted(hashes),
        "compiled_specs": specs,
        "spec_shapes": spec_shapes,
    }


def _reference_runs_on_fakes(task: Any, case: dict[str, Any]) -> bool:
    """Whether the task's reference runs on fake tensors at a benchmark case's shape."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from warpforge.kernels.taskdef import parse_dtype

    try:
        with FakeTensorMode():
            task.reference(*task.make_inputs(case["shape"], parse_dtype(case["dtype"]), 0, "cpu"))
    except BaseException:  # noqa: BLE001 - the task's own code, on fake tensors
        return False
    return True


def _smallest_shapes(
    req: dict[str, Any],
    specs: dict[str, str],
    shapes_of: dict[str, dict[str, Any]],
    trace: Any,
    fixed: frozenset[str] = frozenset(),
) -> list[dict[str, Any]]:
    """For each benchmark-shape specialization, the smallest shape (halving one dimension at a time, on fake
    tensors: milliseconds a try) whose launch has that same specialization, when its product of dimensions is
    within ``spec_budget``: the check interprets it there, so the compiled path of a benchmark shape is the
    judged path. One not found within the budget is reported with ``shape`` None. Keys that size nothing
    (``fixed``: a GroupNorm's group count, a flag) keep their value and are no dimension of the product: at
    another group count the reference is another function than the one the variant was specialized for."""
    budget = int(req["spec_budget"])
    floor = {k: int(v) for k, v in (req.get("spec_floor") or {}).items()}
    out = []

    def size(shape: dict[str, Any]) -> int:
        return math.prod(int(v) for d, v in shape.items() if d not in fixed)

    for key, kind in specs.items():
        if kind != "benchmark" or key not in shapes_of:
            continue
        shape, dtype = dict(shapes_of[key]["shape"]), shapes_of[key]["dtype"]
        for _ in range(256):
            if size(shape) <= budget:
                break
            moved = False
            for d in sorted((d for d in shape if d not in fixed), key=lambda d: -int(shape[d])):
                for value in (floor.get(d, 1), int(shape[d]) // 2):
                    if value < 1 or value >= int(shape[d]):
                        continue
                    trial = {**shape, d: value}
                    if key in trace(trial, dtype):
                        shape, moved = trial, True
                        break
                if moved:
                    break
            if not moved:
                break
        fits = size(shape) <= budget
        out.append(
            {
                "key": key,
                "shape": shape if fits else None,
                "dtype": dtype,
                "smallest": shape,
                "benchmark": shapes_of[key]["shape"],
            }
        )
    return out


def run_space(req: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """Apply the variant's constraints to every configuration of its SPACE, for every benchmark shape."""
    import itertools

    from warpforge.evaluator.sandbox.child.common import error_info, load_candidate
    from warpforge.kernels.space_values import expand

    try:
        module = load_candidate(scratch / req["candidate"], sha256=req.get("candidate_sha256"))
    except BaseException as exc:  # noqa: BLE001 - any failure to import is the candidate's
        return {"error": error_info(exc, "import")}
    space: dict[str, list[Any]] = req["space"]
    names = list(space)
    feasible = []
    fn = getattr(module, "constraints", None)
    try:
        for values in itertools.product(*(space[n] for n in names)):
            params = expand(dict(zip(names, values)))  # a configuration label: its values
            if fn is None or all(fn(dict(params), dict(shape)) for shape in req["shapes"]):
                feasible.append(list(values))
    except BaseException as exc:  # noqa: BLE001 - constraints() is the candidate's code
        return {"error": error_info(exc, "constraints")}
    return {"names": names, "feasible": feasible}
