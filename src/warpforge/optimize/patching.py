"""Winners patched into a model by module path: each matched region's call runs the exported op instead.

A :class:`PatchSpec` is what the match found (optimize/match.py), in data: which module (or which
functional call inside it), which op, which of the call's tensors go where, flattened or not, reduced or not.
:func:`apply_patches` needs only the exported package (``warpforge export``'s layout: ``NS.<op>`` with its
autograd) and the model; nothing of warpforge, so the same plan file patches a user's model in their project.

- a module region: the module's ``forward`` on that instance is replaced;
- a functional region (``F.scaled_dot_product_attention`` inside an attention module, the loss inside a
  causal LM's forward): a ``TorchFunctionMode`` active while that module runs swaps that function's calls;
- a loose region (an attention written inline as matmul, masked_fill, softmax, matmul): the module's own torch
  calls, counted by the same mode against their trace, run the op instead (optimize/loose_patch.py);
- a helper region (``apply_rotary_pos_emb`` of the model's own file): the name is rebound, in the globals of
  the model's classes, to a wrapper that runs the op only while the patched model's module at that path
  runs (another model sharing the file, such as the unpatched one of the proof, runs the original); a helper
  returning several tensors has one spec per output.

A call whose dtype the task never verified, or whose shape no exported configuration fits, runs the original
code and is counted (``PatchCounters.fallback``): a patch that silently ran PyTorch would prove nothing.

Example::

    >>> counters = apply_patches(model, specs, importlib.import_module("wf_opt"))   # doctest: +SKIP
    >>> counters.kernel                                                              # doctest: +SKIP
    {'model.layers.0.input_layernorm': 2, ...}
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from warpforge.optimize.loose_patch import LoosePatcher
from warpforge.optimize.patch_spec import PatchSpec, load_patches  # noqa: F401 - the package's copy reads with it
from warpforge.optimize.trace import helper_callable


@dataclass
class PatchCounters:
    kernel: dict[str, int] = field(default_factory=dict)  # region -> calls that ran the exported kernel
    fallback: dict[str, str] = field(default_factory=dict)  # region -> why a call ran the original code
    undo: list[Callable[[], None]] = field(default_factory=list)  # what remove_patches runs, newest first

    def fallbacks(self) -> dict[str, str]:
        """Regions that never ran their kernel, and why their calls ran the original code."""
        return {k: v for k, v in self.fallback.items() if k not in self.kernel}


def _tensors_of(args: Sequence[Any], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    return [a for a in args if isinstance(a, torch.Tensor)] + [
        v for v in kwargs.values() if isinstance(v, torch.Tensor)
    ]


def _kernel_fits(package: ModuleType, op: str, inputs: Sequence[Any]) -> bool:
    """The exported op would run its Triton kernel for these inputs (not its PyTorch fallback)."""
    return sys.modules[f"{package.__name__}.{op}"]._params(tuple(inputs)) is not None


def _run(
    spec: PatchSpec,
    package: ModuleType,
    tensors: Sequence[torch.Tensor],
    output_like: torch.Size | None,
    counters: PatchCounters,
    probe: bool = False,
) -> Any:
    """The op on the call's tensors; None when it cannot (then the original code runs); ``probe``: True when
    it would run, nothing run or counted."""
    floating = next((t for t in tensors if t.is_floating_point()), None)
    if floating is None or str(floating.dtype).removeprefix("torch.") not in spec.dtypes:
        counters.fallback[spec.region] = f"dtype {floating.dtype if floating is not None else '?'} not verified"
        return None
    zeros = iter(spec.zero_shapes)
    inputs: list[Any] = []
    for j, flat, rank in zip(spec.order, spec.flatten, spec.ranks):
        if j < 0:
            inputs.append(torch.zeros(next(zeros), dtype=floating.dtype, device=floating.device))
            continue
        t = tensors[j]
        inputs.append(t.reshape(-1, *t.shape[t.dim() - rank + 1 :]) if flat else t)
    targets = next((v for v in inputs if isinstance(v, torch.Tensor) and not v.is_floating_point()), None)
    if spec.reduce and targets is not None and spec.ignore_index is not None:
        # ignored rows: a valid target for the kernel, dropped from the reduction below (as torch does)
        valid = targets != spec.ignore_index
        inputs = [targets.clamp_min(0) if v is targets else v for v in inputs]
    else:
        valid = None
    if not _kernel_fits(package, spec.op, inputs):
        counters.fallback[spec.region] = "no exported configuration fits this shape"
        return None
    if probe:
        return True
    out = op_of(package, spec)(*[v.contiguous() if isinstance(v, torch.Tensor) else v for v in inputs])
    counters.kernel[spec.region] = counters.kernel.get(spec.region, 0) + 1
    if spec.reduce:
        per_row = out.float() if valid is None else out.float() * valid
        total = per_row.sum()
        count = per_row.numel() if valid is None else valid.sum()
        return total / count if spec.reduce == "mean" else total
    return out.reshape(output_like) if output_like is not None else out


class _ReferenceBackward(torch.autograd.Function):
    """The op's kernel forward; the backward is torch autograd of the task's reference at the saved inputs."""

    @staticmethod
    def forward(
        ctx: Any, op: Callable[..., torch.Tensor], reference: Callable[..., torch.Tensor], *inputs: Any
    ) -> torch.Tensor:
        ctx.reference = reference
        ctx.inputs = inputs  # the tensors themselves (no in-place op touches them before the backward)
        with torch.no_grad():
            return op(*inputs)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        wanted = ctx.needs_input_grad[2:]
        leaves = [
            t.detach().requires_grad_(w) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
            for t, w in zip(ctx.inputs, wanted)
        ]
        with torch.enable_grad():
            out = ctx.reference(*leaves)
            chosen = [leaf for leaf, w in zip(leaves, wanted) if w]
            grads = iter(torch.autograd.grad(out, chosen, grad, allow_unused=True))
        return (None, None, *[next(grads) if w else None for w in wanted])


def op_of(package: ModuleType, spec: PatchSpec) -> Callable[..., Any]:
    """The exported op of ``spec``; with ``reference_backward``, wrapped so that autograd differentiates the
    task's reference (the package ships it as ``_reference.<op>``) where the kernel has no backward."""
    op = getattr(package, spec.op)
    if not spec.reference_backward:
        return op  # type: ignore[no-any-return]
    reference = importlib.import_module(f"{package.__name__}._reference.{spec.op}").reference

    def call(*inputs: Any) -> Any:
        if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in inputs):
            return _ReferenceBackward.apply(op, reference, *inputs)
        return op(*inputs)

    return call


def _module_forward(
    module: torch.nn.Module, spec: PatchSpec, package: ModuleType, counters: PatchCounters
) -> Callable[..., Any]:
    original = module.forward
    params = [p for _, p in module.named_parameters()]

    def forward(*args: Any, **kwargs: Any) -> Any:
        tensors = _tensors_of(args, kwargs) + params
        out = _run_spec(spec, package, tensors, counters)
        return original(*args, **kwargs) if out is None else _like_call(out, tensors)

    return forward


def _output_shape(spec: PatchSpec, tensors: Sequence[torch.Tensor]) -> torch.Size | None:
    """A call whose main input (the task's first) was flattened gets the op's output back with that input's
    leading dimensions: x [B, S, H] (an [M, N] input) gives [B, S, -1], and so do an embedding's ids [B, S] (an
    [M] input), whose output gains a dimension. An unflattened main input (a rotary's [B, H, S, D] queries, whose
    cos/sin alone are flattened) already has the output's shape."""
    if spec.reduce or not spec.flatten or not spec.flatten[0] or spec.order[0] < 0:
        return None
    t = tensors[spec.order[0]]
    return torch.Size([*t.shape[: t.dim() - spec.ranks[0] + 1], -1])


def _run_spec(
    spec: PatchSpec,
    package: ModuleType,
    tensors: Sequence[torch.Tensor],
    counters: PatchCounters,
    shape: torch.Size | None = None,
    probe: bool = False,
) -> Any:
    """The op on the call's tensors, item by item for a per-item spec; None when it cannot run. ``shape``: the
    output's (a loose region's, as traced); ``probe``: only whether it would run."""
    if not spec.per_item:
        return _run(spec, package, tensors, shape or _output_shape(spec, tensors), counters, probe)
    outs = []
    for b in range(int(tensors[0].shape[0])):
        item = [t[b : b + 1] for t in tensors]
        out = _run(spec, package, item, None if shape is not None else _output_shape(spec, item), counters, probe)
        if out is None or probe:
            return out
        outs.append(out)
    whole = torch.cat(outs, 0)
    return whole.reshape(shape) if shape is not None else whole


def _like_call(out: torch.Tensor, tensors: Sequence[torch.Tensor], keep: bool = False) -> torch.Tensor:
    """The op's output in the call's floating dtype, the first floating tensor's (an embedding's ids come first);
    ``keep``: as it is (a functional loss's fp32 reduction)."""
    floating = next((t for t in tensors if t.is_floating_point()), None)
    if keep or floating is None or not out.is_floating_point():
        return out
    return out.to(floating.dtype)


def ordered_tensors(func: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """A call's tensors in its parameters' order, however they were passed (as the trace reads a frame)."""
    bound = inspect.signature(func).bind(*args, **kwargs)
    bound.apply_defaults()
    values: list[Any] = []
    for name, param in bound.signature.parameters.items():
        value = bound.arguments.get(name)
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            values += list(value or ())
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            values += list((value or {}).values())
        else:
            values.append(value)
    return [v for v in values if isinstance(v, torch.Tensor)]


def _helper_wrapper(
    original: Callable[..., Any],
    specs: dict[str, list[PatchSpec]],
    active: list[str],
    package: ModuleType,
    counters: PatchCounters,
) -> Callable[..., Any]:
    name = getattr(original, "__name__", "")

    def helper(*args: Any, **kwargs: Any) -> Any:
        mine = [s for s in specs.get(active[-1] if active else "\0", []) if s.helper and s.function == name]
        if not mine:
            return original(*args, **kwargs)
        tensors = ordered_tensors(original, args, kwargs)
        outs: dict[int, Any] = {}
        for spec in mine:
            out = _run_spec(spec, package, tensors, counters)
            if out is None:
                return original(*args, **kwargs)
            outs[spec.output] = _like_call(out, tensors)
        if -1 in outs:
            return outs[-1]
        return (
            tuple(outs[i] for i in range(len(outs)))
            if sorted(outs) == list(range(len(outs)))
            else original(*args, **kwargs)
        )

    helper.__wrapped__ = original  # type: ignore[attr-defined]  # inspect.signature reads through it
    return helper


def _rebind_helpers(
    model: torch.nn.Module,
    names: dict[str, str],
    wrap: Callable[[Callable[..., Any]], Any],
    undo: list[Callable[[], None]],
) -> None:
    """Rebind each helper name (name -> its defining file; "" for any) in the globals of every class file of
    ``model`` (once per file), where it names that file's function: a namesake from another file is kept."""
    done: set[int] = set()
    for m in model.modules():
        forward = inspect.unwrap(type(m).forward)
        scope = getattr(forward, "__globals__", None)
        if scope is None or id(scope) in done:
            continue
        done.add(id(scope))
        for name, file in names.items():
            found = helper_callable(scope.get(name))
            code_file = inspect.unwrap(found).__code__.co_filename if found is not None else ""
            # the same file, or one of its name (the model's code installed elsewhere: an exported package's
            # tests rebuild the model from their own copy of its file)
            if found is not None and (
                not file or code_file == file or code_file.rsplit("/", 1)[-1] == file.rsplit("/", 1)[-1]
            ):
                undo.append(_restorer(scope, name))
                scope[name] = wrap(found)


def _restorer(scope: dict[str, Any], name: str) -> Callable[[], None]:
    before = scope[name]

    def restore() -> None:
        scope[name] = before

    return restore


class _FunctionSwap(TorchFunctionMode):
    def __init__(
        self,
        specs: dict[str, list[PatchSpec]],
        active: list[str],
        package: ModuleType,
        counters: PatchCounters,
        loose: dict[str, LoosePatcher],
    ) -> None:
        super().__init__()
        self.specs, self.active, self.package, self.counters = specs, active, package, counters
        self.loose = loose

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        path = self.active[-1] if self.active else "\0"
        if any(p.open is not None and p.path != path for p in self.loose.values()):
            return func(*args, **kwargs)  # a child module inside a patched run (a Dropout): on placeholders
        patcher = self.loose.get(path)
        if patcher is not None:
            return patcher.call(func, args, kwargs, lambda: self._swap(func, args, kwargs))
        return self._swap(func, args, kwargs)

    def _swap(self, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        name = getattr(func, "__name__", "")
        # The mode is off inside this handler (torch pops it), so the op's own torch calls are never swapped.
        for spec in self.specs.get(self.active[-1] if self.active else "\0", []):
            if spec.function == name and not spec.helper and spec.loose_start < 0:
                tensors = _tensors_of(args, kwargs)
                out = _run_spec(spec, self.package, tensors, self.counters)
                if out is not None:
                    return _like_call(out, tensors, keep=bool(spec.reduce))
        return func(*args, **kwargs)


def _loose_patchers(
    by_module: dict[str, list[PatchSpec]], package: ModuleType, counters: PatchCounters
) -> dict[str, LoosePatcher]:
    def run(spec: PatchSpec, tensors: Sequence[torch.Tensor], shape: torch.Size, probe: bool = False) -> Any:
        out = _run_spec(spec, package, tensors, counters, shape=shape, probe=probe)
        return out if probe or out is None else _like_call(out, tensors)

    def fallback(region: str, why: str) -> None:
        counters.fallback[region] = why

    return {
        path: LoosePatcher(path, [s for s in specs if s.loose_start >= 0], run, fallback)
        for path, specs in by_module.items()
        if any(s.loose_start >= 0 for s in specs)
    }


def apply_patches(model: torch.nn.Module, specs: Sequence[PatchSpec], package: ModuleType) -> PatchCounters:
    """Patch ``model`` in place (see module doc); the counters fill as the model runs."""
    counters = PatchCounters()
    modules = dict(model.named_modules())
    by_module: dict[str, list[PatchSpec]] = {}
    for spec in specs:
        if spec.function or spec.loose_start >= 0:
            by_module.setdefault(spec.module, []).append(spec)
        else:
            target = modules[spec.module]
            counters.undo.append(_forward_restorer(target))
            target.forward = _module_forward(target, spec, package, counters)  # type: ignore[method-assign]
    if by_module:
        active: list[str] = []
        loose = _loose_patchers(by_module, package, counters)
        mode = _FunctionSwap(by_module, active, package, counters, loose)

        # every module pushes its path, so the innermost running module is active[-1]
        def enter(path: str) -> Callable[..., None]:
            def hook(module: torch.nn.Module, args: Any) -> None:
                active.append(path)

            return hook

        def leave(module: torch.nn.Module, args: Any, output: Any) -> None:
            active.pop()  # returns None: a forward hook's result would replace the module's output

        handles = []
        for path, module in modules.items():
            handles.append(module.register_forward_pre_hook(enter(path)))
            handles.append(module.register_forward_hook(leave))
        for path, patcher in loose.items():
            handles.append(
                modules[path].register_forward_pre_hook(lambda m, a, k, p=patcher: p.enter(a, k), with_kwargs=True)
            )
        counters.undo.extend(h.remove for h in handles)
        helpers = {s.function: s.helper_file for s in specs if s.helper}
        if helpers:
            _rebind_helpers(
                model, helpers, lambda f: _helper_wrapper(f, by_module, active, package, counters), counters.undo
            )
        counters.undo.append(_forward_restorer(model))
        root_forward = model.forward

        def forward(*args: Any, **kwargs: Any) -> Any:
            with mode:
                return root_forward(*args, **kwargs)

        model.forward = forward  # type: ignore[method-assign]
    return counters


def _forward_restorer(module: torch.nn.Module) -> Callable[[], None]:
    """Undo a replaced ``forward``: the instance's own one back, or none (its class's runs again)."""
    own = module.__dict__.get("forward")

    def restore() -> None:
        if own is None:
            module.__dict__.pop("forward", None)
        else:
            module.forward = own  # type: ignore[method-assign]

    return restore


def remove_patches(counters: PatchCounters) -> None:
    """Undo what :func:`apply_patches` did, newest first: forwards, hooks and rebound helpers as they were."""
    while counters.undo:
        counters.undo.pop()()
