"""Machinery shared by the child's modes: the report pipe, error classes, candidate loading, and probes.

Everything here runs in the untrusted child. The probes only *record facts* (which torch operators a
launch called, which threads it left running, which harness functions or global flags changed, how
many kernel launches it made); the trusted side (evaluator/judge/judge.py) turns facts into verdicts.
Anything captured here is captured before the candidate is imported, so a candidate that later
replaces ``torch.save`` or ``time.perf_counter`` does not change what the harness calls.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import json
import linecache
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

RESULT_FD = -1  # set by child.main: the private pipe to the trusted parent
SAVE = torch.save  # captured before any candidate code runs
LOAD = torch.load
PERF = time.perf_counter
ORIGINAL_ALLOC = {name: getattr(torch, name) for name in ("empty", "empty_like", "empty_strided")}
ORIGINAL_NEW = {name: getattr(torch.Tensor, name) for name in ("new_empty", "new_empty_strided")}
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
# What the OS sandbox answers: EPERM (seccomp, other processes), EACCES (permissions), EROFS (read-only
# system and environment), ENETUNREACH (no network).
SANDBOX_ERRNOS = {errno.EPERM, errno.EACCES, errno.EROFS, errno.ENETUNREACH}


_STDIN = bytearray()  # bytes read from the parent's stdin pipe and not yet consumed


def _read_stdin(n: int) -> bytes:
    """Exactly ``n`` bytes from stdin (raw fd 0: the request line and the data frames share it)."""
    while len(_STDIN) < n:
        chunk = os.read(0, max(1 << 16, n - len(_STDIN)))
        if not chunk:
            raise EOFError("the parent closed the request pipe")
        _STDIN.extend(chunk)
    out = bytes(_STDIN[:n])
    del _STDIN[:n]
    return out


def read_line() -> bytes:
    """The request: one JSON line."""
    while b"\n" not in _STDIN:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        _STDIN.extend(chunk)
    end = _STDIN.find(b"\n")
    end = len(_STDIN) if end < 0 else end + 1
    return _read_stdin(end)


def need(**what: Any) -> bytes:
    """Ask the parent for data (``mark: need``) and wait for its length-prefixed answer."""
    mark("need", **what)
    size = int.from_bytes(_read_stdin(8), "little")
    if size == 0:
        raise RuntimeError(f"the parent refused to send {what}: each case's inputs are sent once, after import")
    return _read_stdin(size)


def emit(payload: dict[str, Any]) -> None:
    """One newline-delimited JSON message to the parent (marks, then the report)."""
    os.write(RESULT_FD, (json.dumps(payload) + "\n").encode())


def mark(name: str, **data: Any) -> None:
    """A progress mark: the parent timestamps it and may start a phase deadline (sandbox/supervisor.py)."""
    emit({"mark": name, **data})


def error_info(exc: BaseException, stage: str) -> dict[str, Any]:
    """Classify an exception into a kind the trusted side maps to a verdict (stages.child_failure)."""
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    text = str(exc).strip()
    low = text.lower()
    rule = getattr(exc, "rule", None) if name == "ArgumentRefused" else None
    if rule is not None:  # child/launcher.py: an argument the compiled kernel could not receive
        kind = "argument"
    elif name == "InterpreterLayout":  # child/faithful.py: this Triton's interpreter is not the one expected
        kind = "interpreter_layout"
    elif isinstance(exc, (ModuleNotFoundError, ImportError)) and stage == "import":
        kind = "import"
    elif isinstance(exc, SystemExit):
        kind = "exit"
    elif isinstance(exc, OSError) and exc.errno in SANDBOX_ERRNOS:
        kind = "sandbox"
    elif isinstance(exc, SyntaxError):
        kind = "compile"
    elif "OutOfResources" in name:
        kind = "resources"
    elif module.startswith("triton") and ("Compil" in name or "compil" in module):
        kind = "compile"
    elif (
        isinstance(exc, (MemoryError, torch.OutOfMemoryError))
        or "can't allocate memory" in low
        or "out of memory" in low
    ):
        kind = "oom"
    elif "illegal memory access" in low or "illegal address" in low:
        kind = "illegal_memory_access"
    # Not the bare "device-side assert": every torch CUDA error ends "... to enable device-side assertions".
    elif "device-side assert triggered" in low:
        kind = "device_assert"
    else:
        kind = "runtime"
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    info = {"stage": stage, "kind": kind, "type": name, "message": text[:4000], "traceback": "".join(tb)[-4000:]}
    if rule is not None:
        info["rule"] = str(rule)
    return info


class UnverifiedCandidate(ImportError):
    """The candidate file is not the bytes the trusted side checked."""


def load_candidate(path: Path, name: str = "wf_candidate", *, sha256: str | None) -> Any:
    """Import a variant from exactly the bytes the trusted side checked.

    The file is read once; its SHA-256 must be the request's (computed by the judge on the bytes its
    grammar checked), it is decoded as strict UTF-8 (the grammar refused any other coding cookie, so
    the text checked and the text run are the same), compiled from those bytes, and its lines are pinned
    in ``linecache`` (``mtime`` None: never re-read) so ``inspect.getsource``, which ``@triton.jit`` uses
    to compile a kernel, sees that text too, whatever happens to the file afterwards.
    """
    data = path.read_bytes()
    if sha256 is None or hashlib.sha256(data).hexdigest() != sha256:
        raise UnverifiedCandidate(
            f"{path.name} is not the source the evaluator checked (SHA-256 "
            f"{hashlib.sha256(data).hexdigest()[:16]}, expected {(sha256 or 'none')[:16]})"
        )
    text = data.decode("utf-8")
    filename = str(path)
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    spec = importlib.util.spec_from_loader(name, loader=None, origin=filename)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__file__ = filename
    sys.modules[name] = module
    exec(compile(text, filename, "exec", dont_inherit=True), module.__dict__)
    return module


def as_tuple(out: Any) -> tuple[Any, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _python_function(kernel: Any) -> Any:
    """The plain function under a JITFunction, InterpretedFunction, autotuner or heuristics wrapper."""
    import types

    fn = kernel
    for _ in range(8):
        if isinstance(fn, types.FunctionType) or not hasattr(fn, "fn"):
            break
        fn = fn.fn
    return fn


def _own_source(fn: Any, kernel: Any) -> str:
    import inspect
    import re
    import textwrap

    try:
        src = textwrap.dedent(inspect.getsource(fn))
        found = re.search(r"^def\s+\w+\s*\(", src, re.MULTILINE)
        return src[found.start() :] if found else src
    except (OSError, TypeError):
        return repr(kernel)


def kernel_hash(kernel: Any, _seen: frozenset[int] = frozenset()) -> str:
    """SHA-256 (16 hex digits) of a kernel's Python source from its ``def`` on, however it is wrapped
    (JITFunction, InterpretedFunction, autotuner, heuristics), together with the hash of every jit
    function it names as that name is bound *now* (at launch time) in its globals, recursively: a helper
    rebound after the kernel was defined hashes differently from the helper the AOT stage compiled.
    The same kernel hashes the same in the compile and check modes."""
    fn = _python_function(kernel)
    parts = [_own_source(fn, kernel)]
    code, env = getattr(fn, "__code__", None), getattr(fn, "__globals__", {})
    seen = _seen | {id(fn)}
    for name in sorted(set(code.co_names) if code is not None else ()):
        bound = env.get(name)
        helper = _python_function(bound) if bound is not None and hasattr(bound, "fn") else None
        if helper is not None and id(helper) not in seen:
            parts.append(f"{name}={kernel_hash(bound, seen)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


class KernelGate:
    """Wraps Triton's launch entry points (``JITFunction.run``, and ``InterpretedFunction.run`` under
    TRITON_INTERPRET; autotuners and heuristics call these too).

    It counts launches, tells the operator recorder when execution is inside Triton (the interpreter
    moves arguments with torch copies that are not the candidate's), and in ghost mode turns every
    launch into a no-op: if ``launch`` still returns the right answer, the kernels did not compute it.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.depth = 0
        self.ghost = False
        self.kernels: set[str] = set()  # source hashes of the kernels launched (compare with the AOT stage)
        # each launch's specialization (child/launcher.py), by key: the judge has each one compiled for the target
        self.specs: dict[str, dict[str, Any]] = {}
        self.refused: list[dict[str, str]] = []  # arguments the compiled kernel could not receive (rule, message)

    def install(self) -> KernelGate:
        from triton.runtime.jit import JITFunction

        classes: list[Any] = [JITFunction]
        if INTERPRET:
            from triton.runtime.interpreter import InterpretedFunction

            classes.append(InterpretedFunction)
        for cls in classes:
            cls.run = self._wrap(cls.run)
        return self

    def _wrap(self, original: Any) -> Any:
        gate = self

        def run(kernel: Any, *args: Any, **kwargs: Any) -> Any:
            from warpforge.evaluator.sandbox.child.launcher import ArgumentRefused, spec_key, specialization

            gate.calls += 1
            source_hash = kernel_hash(kernel)
            gate.kernels.add(source_hash)
            try:
                spec = specialization(kernel, args, kwargs, source_hash)
            except ArgumentRefused as exc:
                gate.refused.append({"rule": exc.rule, "message": str(exc)[:400]})
                raise
            gate.specs[spec_key(spec)] = spec
            if gate.ghost:
                return None
            gate.depth += 1
            try:
                return original(kernel, *args, **kwargs)
            finally:
                gate.depth -= 1

        return run


class OpRecorder(TorchDispatchMode):
    """Records the name of every torch operator ``launch`` dispatches outside Triton's own launches.

    A dispatch mode sees operators however they were reached (``getattr(torch, "mm")``, ``x @ y``,
    ``torch.ops.aten.mm``, the task's reference), which the static AST check cannot. A cast is recorded
    as ``_to_copy(dtype)`` so the trusted side can tell a device move from a precision change.
    """

    def __init__(self, gate: KernelGate) -> None:
        super().__init__()
        self.gate = gate
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if self.gate.depth > 0 and INTERPRET:
            # Inside an interpreted launch only the interpreter's own argument moves are allowed
            # (grid.PLUMBING_OPS, and only while it moves arguments); the recorder never pauses.
            from warpforge.evaluator.sandbox.child.grid import PLUMBING_OPS, Phase

            name = str(func.overloadpacket.__name__)
            if Phase.now != "plumbing" or name not in PLUMBING_OPS:
                self.ops.add(f"in_kernel:{name}")
        elif self.gate.depth == 0:
            name = str(func.overloadpacket.__name__)
            if (
                name == "_to_copy"
                and args
                and isinstance(args[0], torch.Tensor)
                and kwargs.get("dtype") not in (None, args[0].dtype)
            ):
                name = "_to_copy(dtype)"
            self.ops.add(name)
        return func(*args, **kwargs)


class Sentinel:
    """Every fresh allocation is prefilled with a sentinel, so unwritten output shows (integer and boolean
    ones with ``sentinel.exact_sentinel``: the dtype's minimum or maximum, True or False).

    ``torch.empty``, ``empty_like``, ``empty_strided``, ``Tensor.new_empty`` and ``new_empty_strided``
    are replaced; the caching allocator's free blocks are poisoned too (0xFF bytes are NaN in every
    float format), so memory freed by an earlier computation, such as a reference's output, cannot
    pass as this launch's result.
    """

    def __init__(self) -> None:
        self.installed: dict[str, Any] = {}

    def install(self, value: float) -> None:
        from warpforge.evaluator.sandbox.sentinel import exact_sentinel

        def filled(tensor: torch.Tensor) -> torch.Tensor:
            if tensor.device.type == "meta" or tensor.is_complex():
                return tensor
            # integers and booleans too: an unfilled int64 output held a freed copy of the right answer
            tensor.fill_(value if tensor.is_floating_point() else exact_sentinel(tensor.dtype, value))
            return tensor

        def factory(fn: Any) -> Any:
            def patched(*a: Any, **k: Any) -> torch.Tensor:
                return filled(fn(*a, **k))

            return patched

        def method(fn: Any) -> Any:
            def patched(self_: torch.Tensor, *a: Any, **k: Any) -> torch.Tensor:
                return filled(fn(self_, *a, **k))

            return patched

        for name, fn in ORIGINAL_ALLOC.items():
            self.installed[f"torch.{name}"] = factory(fn)
            setattr(torch, name, self.installed[f"torch.{name}"])
        for name, fn in ORIGINAL_NEW.items():
            self.installed[f"Tensor.{name}"] = method(fn)
            setattr(torch.Tensor, name, self.installed[f"Tensor.{name}"])

    def tampered(self) -> list[str]:
        """Allocation functions the candidate put back or replaced (to dodge the sentinel)."""
        out = []
        for key, fn in self.installed.items():
            owner, name = key.split(".", 1)
            current = getattr(torch if owner == "torch" else torch.Tensor, name)
            if current is not fn:
                out.append(key)
        return out

    @staticmethod
    def poison(inputs: tuple[Any, ...]) -> None:
        """Fill and free blocks the size of each input twice over, so reused memory reads as NaN."""
        blocks = []
        for x in inputs:
            if isinstance(x, torch.Tensor) and x.numel():
                for _ in range(2):
                    b = ORIGINAL_ALLOC["empty"](x.untyped_storage().nbytes(), dtype=torch.uint8, device=x.device)
                    b.fill_(255)
                    blocks.append(b)
        del blocks


def _watched() -> dict[str, Any]:
    """The functions the harness relies on for saving, timing and synchronizing."""
    ev = torch.cuda.Event
    return {
        "time.perf_counter": time.perf_counter,
        "time.monotonic": time.monotonic,
        "time.time": time.time,
        "torch.save": torch.save,
        "torch.load": torch.load,
        "torch.equal": torch.equal,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda.Event": ev,
        "Event.record": getattr(ev, "record", None),
        "Event.elapsed_time": getattr(ev, "elapsed_time", None),
        "Event.synchronize": getattr(ev, "synchronize", None),
        "Event.query": getattr(ev, "query", None),
        "Tensor.clone": torch.Tensor.clone,
        "Tensor.to": torch.Tensor.to,
        "Tensor.cpu": torch.Tensor.cpu,
        "Tensor.detach": torch.Tensor.detach,
        "Tensor.copy_": torch.Tensor.copy_,
        "threading.enumerate": threading.enumerate,
        "os.write": os.write,
        "json.dumps": json.dumps,
    }


class Watch:
    """Identity snapshot of the harness's functions, global numeric flags and live threads."""

    def __init__(self) -> None:
        self.ids = {k: id(v) for k, v in _watched().items()}
        self.threads = {t.ident for t in threading.enumerate()}
        self.state = global_state()
        self.jit_runs = _jit_runs()

    def tampered(self) -> list[str]:
        now = {k: id(v) for k, v in _watched().items()}
        changed = sorted(k for k, v in now.items() if self.ids.get(k) != v)
        if _jit_runs() != self.jit_runs:
            changed.append("triton launch (JITFunction.run)")
        return changed

    def state_changed(self) -> list[str]:
        now = global_state()
        return sorted(k for k in set(now) | set(self.state) if now.get(k) != self.state.get(k))

    def new_threads(self) -> int:
        return sum(1 for t in threading.enumerate() if t.ident not in self.threads and t.is_alive())


def _jit_runs() -> list[int]:
    from triton.runtime.jit import JITFunction

    runs = [id(JITFunction.run)]
    if INTERPRET:
        from triton.runtime.interpreter import InterpretedFunction

        runs.append(id(InterpretedFunction.run))
    return runs


def global_state() -> dict[str, str]:
    """Process-wide numeric settings a candidate could flip (TF32, matmul precision, env knobs)."""
    b = torch.backends
    state = {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda.matmul.allow_tf32": b.cuda.matmul.allow_tf32,
        "cuda.matmul.allow_fp16_reduced_precision_reduction": b.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "cuda.matmul.allow_bf16_reduced_precision_reduction": b.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "cudnn.allow_tf32": b.cudnn.allow_tf32,
        "cudnn.benchmark": b.cudnn.benchmark,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "default_dtype": torch.get_default_dtype(),
        "grad_enabled": torch.is_grad_enabled(),
    }
    prefixes = ("TRITON_", "TORCH_", "CUBLAS", "CUDA_", "NVIDIA_")
    # CUDA_MODULE_LOADING may be set by torch's own lazy CUDA initialisation.
    env = {f"env.{k}": v for k, v in os.environ.items() if k.startswith(prefixes) and k != "CUDA_MODULE_LOADING"}
    return {k: str(v) for k, v in {**state, **env}.items()}
