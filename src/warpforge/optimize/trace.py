"""One step of a model, op by op: what runs, in which module, and what it costs on the target GPU's roofline.

:func:`trace_step` runs the step (forward, and backward for a training step) under a ``TorchDispatchMode``
and torch's own ``ModuleTracker``: every aten op is recorded with the innermost module whose forward (or
backward) it runs in, its FLOPs (torch.utils.flop_counter's formulas; one per output element for the ops it
has none for) and the bytes it reads and writes (its tensor inputs and outputs; views move nothing). On a CPU
an op's cost is its speed-of-light time on the target GPU, ``max(FLOPs / peak, bytes / bandwidth)``: an
estimate of the eager graph (each op a kernel reading and writing memory), never a time.

The same run records each module's first call (its inputs, keyword arguments and output), each call of a
``torch.nn.functional`` function with its module, and each call of a *helper*: a module-level function of the
model's own source files (where its module classes are defined) called with tensors, such as a rotary
embedding written as ``apply_rotary_pos_emb(q, k, cos, sin)``. Calls nest (a helper calling
``F.softmax``); an op belongs to the innermost. It also records each module's *stream* (its first call):
the torch calls its own forward makes, in order (a matmul, a masked_fill, an ``F.softmax``, a child module's
call), holding the tensors themselves so that identity gives the data flow; loose regions are cut from it
(optimize/loose.py). Regions are then matched by what they compute (optimize/regions.py), not by class or
function names.

Example::

    >>> trace = trace_step(model, inputs, loss_fn, train=True, gpu=peaks_for("H100"))  # doctest: +SKIP
    >>> trace.total_s                                                                   # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry
from torch.utils.module_tracker import ModuleTracker

from warpforge.evaluator.gpus import GpuPeaks

# Ops that allocate, alias or only read metadata: no kernel moves their bytes.
_FREE = {
    "empty",
    "empty_like",
    "empty_strided",
    "detach",
    "alias",
    "lift_fresh",
    "_unsafe_view",
    "view",
    "t",
    "transpose",
    "permute",
    "expand",
    "unsqueeze",
    "squeeze",
    "slice",
    "select",
    "split",
    "split_with_sizes",
    "as_strided",
    "unbind",
    "_reshape_alias",
    "reshape",
    "chunk",
    "narrow",
    "view_as",
    "diagonal",
    "movedim",
    "unflatten",
    "flatten",
    "sym_size",
    "sym_stride",
    "sym_numel",
    "_local_scalar_dense",
    "is_same_size",
    "sym_storage_offset",
}

# torch.nn.functional's functions by identity (many are C builtins whose __module__ is torch._C._nn).
_FUNCTIONAL = {
    id(f)
    for n, f in vars(torch.nn.functional).items()
    if callable(f) and not n.startswith("_") and not isinstance(f, type)
}


@dataclass(frozen=True)
class OpRecord:
    """One aten op of the step."""

    module: str  # the innermost module's path in the model ("" for the root), as named_modules names it
    op: str  # e.g. "mm", "_scaled_dot_product_flash_attention"
    backward: bool
    flops: float
    bytes: float
    dtype: torch.dtype
    seconds: float  # speed of light on the target GPU (estimate) or measured (GPU)
    call: str = ""  # the recorded functional call it runs in (forward) or differentiates (backward)


@dataclass
class ModuleCall:
    """A module's first call: what its forward received and returned (detached clones)."""

    path: str
    module: torch.nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    output: Any


@dataclass
class FunctionCall:
    """A ``torch.nn.functional`` call or a helper's call: a region a kernel could own."""

    path: str  # the innermost module calling it
    func: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    output: Any
    index: int  # which call of this function in this module (0: the first)
    name: str = ""  # the function's name (a helper: its global name in its module); default func.__name__
    parent: str = ""  # the key of the call it runs inside ("" for none)
    helper: bool = False  # a module-level function of the model's code, patched by its global name
    step_loss: bool = False  # the step's loss function, called on the model's output outside the model

    @property
    def key(self) -> str:
        return call_key(self.path, self.name or self.func.__name__, self.index)


def call_key(path: str, func: str, index: int) -> str:
    return f"{path}::{func}#{index}"


@dataclass
class StreamEntry:
    """One step of a module's own forward (its first call), in order: a torch call its code makes (a tensor
    op, an ``F.softmax``, a metadata read such as ``x.size()``) or a child module's call."""

    path: str  # the module whose forward makes it
    name: str  # the torch function's name (``matmul``, ``masked_fill``, ``softmax``); a child's call: its path
    func: Any  # the torch function; a child's call: the child module
    args: tuple[Any, ...]  # as called: the tensors themselves, never copies (identity is the data flow)
    kwargs: dict[str, Any]
    output: Any = None
    key: str = ""  # the call key its aten ops carry (OpRecord.call); "" for a child's call
    # its place among the module's own tensor-returning torch calls, the positions a patch counts
    # (optimize/loose_patch.py); -1: a child's call or a call returning no tensor (``size``, ``item``)
    position: int = -1
    child: bool = False
    opaque: bool = False  # made inside a helper's call: part of that call, never of a loose region


def returns_tensors(value: Any) -> bool:
    """A tensor, or a tuple or list holding one (``split``): what a stream position is."""
    if isinstance(value, torch.Tensor):
        return True
    return isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in value)


@dataclass
class StepTrace:
    ops: list[OpRecord]
    modules: dict[str, ModuleCall]
    functions: list[FunctionCall]
    measured: bool = False  # True: OpRecord.seconds are GPU times from torch.profiler
    streams: dict[str, list[StreamEntry]] = field(default_factory=dict)  # module path -> its first call's stream
    returned: dict[str, Any] = field(default_factory=dict)  # module path -> what its first call returned (itself)

    @property
    def total_s(self) -> float:
        return sum(o.seconds for o in self.ops)


def _bytes(values: Any) -> float:
    seen: set[tuple[int, int]] = set()
    total = 0
    for t in tree_flatten(values)[0]:
        if isinstance(t, torch.Tensor):
            # the storage's identity, not its data pointer: a meta or fake tensor (warpforge estimate's real
            # sizes with nothing allocated) has none, and every one would count as the same
            key = (t.untyped_storage()._cdata, int(t.storage_offset()))
            if key in seen:
                continue
            seen.add(key)
            total += t.numel() * t.element_size()
    return float(total)


def _dtype(values: Any) -> torch.dtype:
    for t in tree_flatten(values)[0]:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            return t.dtype
    return torch.float32


def _flops(func: Any, args: Any, kwargs: Any, out: Any) -> float:
    formula = flop_registry.get(func._overloadpacket)
    if formula is not None:
        return float(formula(*args, **kwargs, out_val=out))
    return float(sum(t.numel() for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)))


def _detach(values: Any) -> Any:
    if isinstance(values, torch.Tensor):
        return values.detach().clone()
    if isinstance(values, (tuple, list)):
        return type(values)(_detach(v) for v in values)
    if isinstance(values, dict):
        return {k: _detach(v) for k, v in values.items()}
    return values


class _Recorder(TorchDispatchMode):
    def __init__(self, tracker: ModuleTracker, names: dict[str, str], gpu: GpuPeaks) -> None:
        super().__init__()
        self.tracker, self.names, self.gpu = tracker, names, gpu
        self.ops: list[OpRecord] = []
        self.calls: list[str] = []  # the keys of the recorded calls running now, innermost last
        self.count: dict[tuple[str, str], int] = {}  # (module path, function) -> calls so far
        self.started: dict[str, int] = {}  # call key -> its place in the order calls began
        self.forward_nodes: dict[int, tuple[str, str]] = {}  # autograd sequence number -> (module path, call)
        self.paused = False  # while the recorder itself copies a call's tensors
        self.streaming = False  # while the model's forward runs: streams are recorded
        self.stack: list[str] = []  # the running modules' paths, innermost last (forward hooks)
        self.streams: dict[str, list[StreamEntry]] = {}
        self.open: set[str] = set()  # the modules whose first call runs now (their streams are recorded)
        self.positions: dict[str, int] = {}
        self.returned: dict[str, Any] = {}

    def stream(self) -> tuple[str, list[StreamEntry]] | None:
        """The innermost running module and its stream, while its first call records one."""
        if not self.streaming or self.paused or not self.stack or self.stack[-1] not in self.open:
            return None
        return self.stack[-1], self.streams[self.stack[-1]]

    def module_enters(self, path: str, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        parent = self.stream()
        if parent is not None:
            parent[1].append(StreamEntry(parent[0], path, module, args, kwargs, child=True))
        self.stack.append(path)
        if self.streaming and path not in self.streams:
            self.streams[path], self.positions[path] = [], 0
            self.open.add(path)

    def module_leaves(self, path: str, output: Any) -> None:
        self.stack.pop()
        if path in self.open:
            self.open.discard(path)
            self.returned[path] = output
        parent = self.stream()
        if parent is not None and parent[1] and parent[1][-1].child and parent[1][-1].name == path:
            parent[1][-1].output = output

    def streamed(
        self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any, key: str, opaque: bool
    ) -> None:
        """A torch call the innermost module's own code made (after it ran)."""
        found = self.stream()
        if found is None:
            return
        path, stream = found
        position = -1
        if returns_tensors(out):
            position = self.positions[path]
            self.positions[path] = position + 1
        stream.append(
            StreamEntry(
                path, getattr(func, "__name__", str(func)), func, args, kwargs, out, key, position, opaque=opaque
            )
        )

    @property
    def call(self) -> str:
        return self.calls[-1] if self.calls else ""

    def enter(self, name: str) -> tuple[str, str, int]:
        """A recorded call begins: (its module path, its parent call's key, its index)."""
        path = self._where()
        index = self.count.get((path, name), 0)
        self.count[(path, name)] = index + 1
        parent, key = self.call, call_key(path, name, index)
        self.started[key] = len(self.started)
        self.calls.append(key)
        return path, parent, index

    def copy(self, values: Any) -> Any:
        """Detached clones, made without recording their ops."""
        self.paused = True
        try:
            return _detach(values)
        finally:
            self.paused = False

    def _where(self) -> str:
        # ModuleTracker names nest ("Root.layers.0.mlp"): the longest name of a running module is the innermost
        inner = max(self.tracker.parents, key=len)
        return self.names.get(inner, "")

    def _backward_where(self) -> tuple[str, str]:
        # A backward op belongs to the module whose forward created the autograd node running it (by the
        # node's sequence number); ModuleTracker's backward view is coarser (it keeps modules whose backward
        # finished). AccumulateGrad and other graph-only nodes fall back to it.
        node = torch._C._current_autograd_node()
        if node is not None:
            found = self.forward_nodes.get(node._sequence_nr())
            if found is not None:
                return found
        return self._where(), ""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.paused:
            return out
        backward = torch._C._current_graph_task_id() != -1
        if backward:
            where, call = self._backward_where()
        else:
            where, call = self._where(), self.call
            # the autograd node of this op (if it has one) was numbered just before the op ran; setdefault: an
            # op without a node must not relabel the previous op's
            self.forward_nodes.setdefault(torch._C._autograd._get_sequence_nr() - 1, (where, call))
        name = func._overloadpacket.__name__
        if name in _FREE or func.is_view:
            return out
        flops = _flops(func, args, kwargs, out)
        moved = _bytes((args, kwargs)) + _bytes(out)
        dtype = _dtype((args, out))
        self.ops.append(
            OpRecord(where, name, backward, flops, moved, dtype, self.gpu.sol_ms(flops, moved, dtype) / 1e3, call)
        )
        return out


class _Functions(TorchFunctionMode):
    """Records every ``torch.nn.functional`` call with the module it runs in (each a candidate region)."""

    def __init__(self, recorder: _Recorder) -> None:
        super().__init__()
        self.recorder = recorder
        self.calls: list[FunctionCall] = []
        self.depth = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if self.depth:
            return func(*args, **kwargs)
        if id(func) not in _FUNCTIONAL:
            return self._loose(func, args, kwargs)
        path, parent, index = self.recorder.enter(func.__name__)
        self.depth += 1  # a functional calling another (linear inside a user's function) is one call
        try:
            out = func(*args, **kwargs)
        finally:
            self.depth -= 1
            self.recorder.calls.pop()
        args_c, kwargs_c, out_c = self.recorder.copy((args, kwargs, out))
        call = FunctionCall(path, func, args_c, kwargs_c, out_c, index, parent=parent)
        self.calls.append(call)
        self.recorder.streamed(func, args, kwargs, out, call.key, opaque=bool(parent))
        return out

    def _loose(self, func: Any, args: Any, kwargs: Any) -> Any:
        """A torch call of a module's own code (not a functional): in its stream, its ops under its own key."""
        rec = self.recorder
        if rec.stream() is None or rec._where() != rec.stack[-1]:
            # not a module's own code: torch's ModuleTracker reads autograd flags in its hooks between the
            # parent's last call and the child's first
            return func(*args, **kwargs)
        inside = bool(rec.calls)  # inside a helper's call: that call's op
        key = ""
        if not inside:
            rec.enter("~" + getattr(func, "__name__", "call"))
            key = rec.calls[-1]
        try:
            out = func(*args, **kwargs)
        finally:
            if not inside:
                rec.calls.pop()
        rec.streamed(func, args, kwargs, out, key, opaque=inside)
        return out


_GENERATOR_FLAGS = (
    inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
)


def model_files(model: torch.nn.Module) -> set[str]:
    """The source files of the model's module classes (not torch's, not warpforge's own wrappers)."""
    skip = (str(Path(torch.__file__).parent), str(Path(__file__).parents[1]))
    files: set[str] = set()
    for m in model.modules():
        try:
            file = inspect.getfile(type(m))
        except (TypeError, OSError):  # a class made at run time has no file
            continue
        if not file.startswith(skip):
            files.add(file)
    return files


def _arguments(frame: FrameType) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A frame's arguments as it was called (read at its 'call' event, before its body assigns)."""
    code, local = frame.f_code, frame.f_locals
    names = code.co_varnames
    n_pos, n_kw = code.co_argcount, code.co_kwonlyargcount
    args = [local[n] for n in names[:n_pos]]
    kwargs = {n: local[n] for n in names[n_pos : n_pos + n_kw]}
    at = n_pos + n_kw
    if code.co_flags & inspect.CO_VARARGS:
        args += list(local[names[at]])
        at += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        kwargs.update(local[names[at]])
    return tuple(args), kwargs


def helper_callable(value: Any) -> Any:
    """What a module-level name runs, as a function: the value itself when it is one (or wraps one with
    ``functools.wraps``), else the function an object calls from its ``forward``'s closure (transformers'
    ``use_kernel_forward_from_hub`` with the ``kernels`` package 0.19 makes Qwen3's ``apply_rotary_pos_emb`` an
    ``nn.Module`` instance that way: it only dispatches to hub kernels, which are never loaded here); None for
    anything else. ``inspect.unwrap(result).__code__`` is the code its frames run."""
    if not callable(value):
        return None
    if inspect.isfunction(inspect.unwrap(value)):
        return value
    forward = getattr(type(value), "forward", None)
    for cell in getattr(forward, "__closure__", None) or ():
        try:
            inner = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if inspect.isfunction(inner):
            return inner
    return None


class _Helpers:
    """Records each call of a module-level function of the model's source files that takes a tensor (through
    ``sys.setprofile``: a helper is plain Python, invisible to torch's modes)."""

    def __init__(self, recorder: _Recorder, files: set[str]) -> None:
        self.recorder, self.files = recorder, files
        self.calls: list[FunctionCall] = []
        self.running: list[tuple[FrameType, FunctionCall]] = []

    def _helper(self, frame: FrameType) -> Callable[..., Any] | None:
        code = frame.f_code
        if code.co_filename not in self.files or code.co_flags & _GENERATOR_FLAGS:
            return None
        # module level: reachable (and patchable) by its name
        target = helper_callable(frame.f_globals.get(code.co_name))
        if target is None or inspect.unwrap(target).__code__ is not code:
            return None
        return target  # type: ignore[no-any-return]

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and not self.recorder.paused:
            target = self._helper(frame)
            if target is None:
                return
            args, kwargs = _arguments(frame)
            if not any(isinstance(v, torch.Tensor) for v in (*args, *kwargs.values())):
                return
            path, parent, index = self.recorder.enter(frame.f_code.co_name)
            args, kwargs = self.recorder.copy((args, kwargs))
            call = FunctionCall(path, target, args, kwargs, None, index, frame.f_code.co_name, parent, helper=True)
            self.running.append((frame, call))
        elif event == "return" and self.running and self.running[-1][0] is frame:
            _, call = self.running.pop()
            self.recorder.calls.pop()
            call.output = self.recorder.copy(arg)
            self.calls.append(call)


def _loss(recorder: _Recorder, functions: _Functions, loss_fn: Callable[[Any], torch.Tensor], out: Any) -> torch.Tensor:
    """The step's loss on the model's output, recorded as a call of its own (its ops, forward and backward,
    carry its key) when it computes anything: a KernelBench target's mean square; a causal LM's loss is
    the model's own, returned as it is."""
    before = len(recorder.ops)
    _, parent, index = recorder.enter("step_loss")
    try:
        loss = loss_fn(out)
    finally:
        recorder.calls.pop()
    if len(recorder.ops) > before:
        args, loss_c = recorder.copy(((out,), loss))
        functions.calls.append(FunctionCall("", loss_fn, args, {}, loss_c, index, "step_loss", parent, step_loss=True))
    return loss


def trace_step(
    model: torch.nn.Module, inputs: tuple[Any, ...], loss_fn: Callable[[Any], torch.Tensor] | None, gpu: GpuPeaks
) -> StepTrace:
    """Run one step (``loss_fn`` given: forward, loss, backward) and record it op by op (see module doc)."""
    tracker = ModuleTracker()
    root = type(model).__name__
    names = {root if not path else f"{root}.{path}": path for path, _ in model.named_modules()}
    calls: dict[str, ModuleCall] = {}
    paths = {id(m): p for p, m in model.named_modules()}

    recorder = _Recorder(tracker, names, gpu)

    def hook(module: torch.nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        path = paths.get(id(module))
        if path is not None and path not in calls:
            args_c, kwargs_c, out_c = recorder.copy((args, kwargs, output))
            calls[path] = ModuleCall(path, module, args_c, kwargs_c, out_c)

    def enters(path: str) -> Callable[..., None]:
        def pre(module: torch.nn.Module, args: Any, kwargs: Any) -> None:
            recorder.module_enters(path, module, args, kwargs)

        return pre

    def leaves(path: str) -> Callable[..., None]:
        def post(module: torch.nn.Module, args: Any, output: Any) -> None:
            recorder.module_leaves(path, output)  # returns None: a forward hook's result replaces the output

        return post

    handles = [m.register_forward_hook(hook, with_kwargs=True) for m in model.modules()]
    for path, m in model.named_modules():
        handles.append(m.register_forward_pre_hook(enters(path), with_kwargs=True, prepend=True))
        handles.append(m.register_forward_hook(leaves(path)))
    functions = _Functions(recorder)
    helpers = _Helpers(recorder, model_files(model))
    previous = sys.getprofile()
    try:
        with tracker, recorder, functions:
            sys.setprofile(helpers)
            recorder.streaming = True
            try:
                out = model(*inputs)
            finally:
                recorder.streaming = False
                sys.setprofile(previous)
            if loss_fn is not None:
                _loss(recorder, functions, loss_fn, out).backward()
    finally:
        for h in handles:
            h.remove()
    ordered = sorted(functions.calls + helpers.calls, key=lambda c: recorder.started[c.key])
    return StepTrace(recorder.ops, calls, ordered, streams=recorder.streams, returned=recorder.returned)
