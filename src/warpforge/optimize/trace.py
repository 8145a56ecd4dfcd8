"""One step of a model, op by op: what runs, in which module, and what it costs on the target GPU's roofline.

:func:`trace_step` runs the step (forward, and backward for a training step) under a ``TorchDispatchMode``
and torch's own ``ModuleTracker``: every aten op is recorded with the innermost module whose forward (or
backward) it runs in, its FLOPs (torch.utils.flop_counter's formulas; one per output element for the ops it
has none for) and the bytes it reads and writes (its tensor inputs and outputs; views move nothing). On a CPU
an op's cost is its speed-of-light time on the target GPU, ``max(FLOPs / peak, bytes / bandwidth)``: an
estimate of the eager graph (each op a kernel reading and writing memory), never a time.

The same run records each module's first call (its inputs, keyword arguments and output) and each call of a
``torch.nn.functional`` function with its module, so regions are matched by what they compute
(optimize/regions.py), not by class names.

Example::

    >>> trace = trace_step(model, inputs, loss_fn, train=True, gpu=peaks_for("H100"))  # doctest: +SKIP
    >>> trace.total_s                                                                   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry
from torch.utils.module_tracker import ModuleTracker

from warpforge.evaluator.gpus import GpuPeaks

# Ops that allocate, alias or only read metadata: no kernel moves their bytes.
_FREE = {"empty", "empty_like", "empty_strided", "detach", "alias", "lift_fresh", "_unsafe_view", "view",
         "t", "transpose", "permute", "expand", "unsqueeze", "squeeze", "slice", "select", "split",
         "split_with_sizes", "as_strided", "unbind", "_reshape_alias", "reshape", "chunk", "narrow",
         "view_as", "diagonal", "movedim", "unflatten", "flatten", "sym_size", "sym_stride", "sym_numel",
         "_local_scalar_dense", "is_same_size", "sym_storage_offset"}

# torch.nn.functional's functions by identity (many are C builtins whose __module__ is torch._C._nn).
_FUNCTIONAL = {id(f) for n, f in vars(torch.nn.functional).items() if callable(f) and not n.startswith("_")
               and not isinstance(f, type)}


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
    """A ``torch.nn.functional`` call: a region a kernel could own."""

    path: str  # the innermost module calling it
    func: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    output: Any
    index: int  # which call of this function in this module (0: the first)

    @property
    def key(self) -> str:
        return call_key(self.path, self.func.__name__, self.index)


def call_key(path: str, func: str, index: int) -> str:
    return f"{path}::{func}#{index}"


@dataclass
class StepTrace:
    ops: list[OpRecord]
    modules: dict[str, ModuleCall]
    functions: list[FunctionCall]
    measured: bool = False  # True: OpRecord.seconds are GPU times from torch.profiler

    @property
    def total_s(self) -> float:
        return sum(o.seconds for o in self.ops)


def _bytes(values: Any) -> float:
    seen: set[tuple[int, int]] = set()
    total = 0
    for t in tree_flatten(values)[0]:
        if isinstance(t, torch.Tensor) and t.device.type != "meta":
            key = (t.untyped_storage().data_ptr(), int(t.storage_offset()))
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
        self.call = ""  # the functional call running now (its key)
        self.forward_nodes: dict[int, tuple[str, str]] = {}  # autograd sequence number -> (module path, call)
        self.paused = False  # while the recorder itself copies a call's tensors

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
        self.ops.append(OpRecord(where, name, backward, flops, moved, dtype,
                                 self.gpu.sol_ms(flops, moved, dtype) / 1e3, call))
        return out


class _Functions(TorchFunctionMode):
    """Records every ``torch.nn.functional`` call with the module it runs in (each a candidate region)."""

    def __init__(self, recorder: _Recorder) -> None:
        super().__init__()
        self.recorder = recorder
        self.calls: list[FunctionCall] = []
        self.depth = 0
        self.count: dict[tuple[str, str], int] = {}

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if self.depth or id(func) not in _FUNCTIONAL:
            return func(*args, **kwargs)
        path = self.recorder._where()
        key = (path, func.__name__)
        index = self.count.get(key, 0)
        self.count[key] = index + 1
        self.recorder.call = call_key(path, func.__name__, index)
        self.depth += 1  # a functional calling another (linear inside a user's function) is one call
        try:
            out = func(*args, **kwargs)
        finally:
            self.depth -= 1
            self.recorder.call = ""
        self.recorder.paused = True
        try:
            self.calls.append(FunctionCall(path, func, _detach(args), _detach(kwargs), _detach(out), index))
        finally:
            self.recorder.paused = False
        return out


def trace_step(model: torch.nn.Module, inputs: tuple[Any, ...], loss_fn: Callable[[Any], torch.Tensor] | None,
               gpu: GpuPeaks) -> StepTrace:
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
            recorder.paused = True
            try:
                calls[path] = ModuleCall(path, module, _detach(args), _detach(kwargs), _detach(output))
            finally:
                recorder.paused = False

    handles = [m.register_forward_hook(hook, with_kwargs=True) for m in model.modules()]
    functions = _Functions(recorder)
    try:
        with tracker, recorder, functions:
            out = model(*inputs)
            if loss_fn is not None:
                loss_fn(out).backward()
    finally:
        for h in handles:
            h.remove()
    return StepTrace(recorder.ops, calls, functions.calls)
