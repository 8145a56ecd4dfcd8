"""A traced step cut into regions a kernel can own, each matched to a built-in task by what it computes.

The module tree is walked from the root: a module whose call a built-in task computes (optimize/match.py)
is one region with every op of its forward and backward; otherwise its children are visited, then its own
``torch.nn.functional`` calls are tried one by one (the attention call inside an attention module, the loss
inside a causal LM's forward), and what is left of its own ops is one region with no task (residual adds,
a rotary embedding written as tensor arithmetic, reshapes that copy). A region's share is its cost over the
step's (optimize/trace.py: GPU-roofline estimates on a CPU).

Example::

    >>> regions = cut_regions(model, trace)                        # doctest: +SKIP
    >>> [(r.name, r.kind, r.task) for r in regions][:2]            # doctest: +SKIP
    [('model.embed_tokens', 'embedding', 'embedding'), ('model.layers.0.input_layernorm', 'normalization', 'rmsnorm')]
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from warpforge.optimize.match import Call, CallMatch, find_call_match
from warpforge.optimize.trace import FunctionCall, ModuleCall, OpRecord, StepTrace

# The region kind of each built-in task (a kernel family's role in a step).
TASK_KINDS = {"matmul": "gemm", "linear": "gemm", "fp8_gemm": "gemm", "rmsnorm": "normalization",
              "layernorm": "normalization", "normalize": "normalization", "swiglu": "activation",
              "elementwise": "activation", "attention": "attention", "rotary": "rotary",
              "cross_entropy": "loss", "fused_linear_cross_entropy": "loss", "softmax": "reduction",
              "log_softmax": "reduction", "reduce": "reduction", "fp8_quant_block": "quantization",
              "fp8_quant_token": "quantization", "embedding": "embedding"}
_GEMM_OPS = {"mm", "bmm", "addmm", "baddbmm", "matmul", "linear"}
# A module with more tensors than any task takes is never one region (a decoder layer: 9 weights).
MAX_CALL_TENSORS = 6


@dataclass
class Region:
    name: str  # the module path, or "path::function#i" for a functional call
    kind: str
    source: str  # "module" | "function" | "rest" (a module's own leftover ops)
    ops: list[OpRecord] = field(default_factory=list)
    match: CallMatch | None = None
    seconds: float = 0.0
    share: float = 0.0
    note: str = ""

    @property
    def task(self) -> str | None:
        return self.match.task if self.match else None


def _kind_of(ops: Sequence[OpRecord]) -> str:
    cost: dict[str, float] = {}
    for o in ops:
        kind = ("gemm" if o.op in _GEMM_OPS else "attention" if "scaled_dot_product" in o.op
                else "embedding" if o.op.startswith("embedding") else "elementwise")
        cost[kind] = cost.get(kind, 0.0) + o.seconds
    return max(cost, key=lambda k: cost[k]) if cost else "other"


def _within(op_path: str, path: str) -> bool:
    return not path or op_path == path or op_path.startswith(path + ".")


def _rebuild(values: Any, replace: dict[int, torch.Tensor]) -> Any:
    if isinstance(values, torch.Tensor):
        return replace.get(id(values), values)
    if isinstance(values, (tuple, list)):
        return type(values)(_rebuild(v, replace) for v in values)
    if isinstance(values, dict):
        return {k: _rebuild(v, replace) for k, v in values.items()}
    return values


def _fp64(t: torch.Tensor) -> torch.Tensor:
    return t.double() if t.is_floating_point() else t


def module_call(call: ModuleCall) -> Call | None:
    """A module's captured call as a :class:`Call`: its top-level tensor arguments, then its parameters."""
    module = call.module
    args = [a for a in call.args if isinstance(a, torch.Tensor)]
    kwargs = [v for v in call.kwargs.values() if isinstance(v, torch.Tensor)]
    params = dict(module.named_parameters())
    # matched in float64 whatever the step's dtype: what is compared is the function, not its eager rounding
    # (torch's fp32 layer_norm on rows offset by 1e4, one of the task's adversarial inputs, is off by 1e-3)
    tensors = tuple(_fp64(t) for t in args + kwargs + [p.detach() for p in params.values()])
    if not tensors or len(tensors) > MAX_CALL_TENSORS or not isinstance(call.output, torch.Tensor):
        return None
    originals = args + kwargs
    names = list(params)

    def run(values: Sequence[torch.Tensor]) -> Any:
        replace = {id(t): v for t, v in zip(originals, values[: len(originals)])}
        state = dict(zip(names, values[len(originals):]))
        return torch.func.functional_call(module, state, _rebuild(call.args, replace), _rebuild(call.kwargs, replace))

    return Call(tensors, run, call.output)


def function_call(call: FunctionCall) -> Call | None:
    """A functional call as a :class:`Call`; a loss's ``reduction`` and ``ignore_index`` are read off it."""
    flat = [a for a in call.args if isinstance(a, torch.Tensor)] + \
        [v for v in call.kwargs.values() if isinstance(v, torch.Tensor)]
    if not flat or len(flat) > MAX_CALL_TENSORS or not isinstance(call.output, torch.Tensor):
        return None
    reduction, ignore = "", None
    try:
        bound = inspect.signature(call.func).bind(*call.args, **call.kwargs)
        bound.apply_defaults()
        if "reduction" in bound.arguments:
            reduction = str(bound.arguments["reduction"])
            value = bound.arguments.get("ignore_index")
            ignore = int(value) if isinstance(value, int) else None
    except (TypeError, ValueError):  # a C builtin without a signature: no loss conventions to read
        pass

    def run(values: Sequence[torch.Tensor]) -> Any:
        replace = {id(t): v for t, v in zip(flat, values)}
        return call.func(*_rebuild(call.args, replace), **_rebuild(call.kwargs, replace))

    return Call(tuple(_fp64(t) for t in flat), run, call.output, ignore, reduction)


def _signature(call: ModuleCall) -> tuple[Any, ...]:
    """Equal for two calls that compute the same function: the class, every scalar setting (an eps), every
    tensor's shape and dtype. Matching is then done once per signature."""
    settings = tuple(sorted((k, v) for k, v in vars(call.module).items()
                            if isinstance(v, (int, float, bool, str)) and not k.startswith("_")))
    shapes = tuple((tuple(t.shape), t.dtype) for t in call.args if isinstance(t, torch.Tensor))
    params = tuple((n, tuple(p.shape), p.dtype) for n, p in call.module.named_parameters())
    return (type(call.module), settings, shapes, params,
            tuple(sorted((k, repr(v)) for k, v in call.kwargs.items() if not isinstance(v, torch.Tensor))))


def cut_regions(model: torch.nn.Module, trace: StepTrace) -> list[Region]:
    """The step's regions, largest first; shares sum to 1 (every op is in exactly one region)."""
    children: dict[str, list[str]] = {}
    for path, _ in model.named_modules():
        if path:
            parent = path.rpartition(".")[0]
            children.setdefault(parent, []).append(path)
    functions: dict[str, list[FunctionCall]] = {}
    for f in trace.functions:
        functions.setdefault(f.path, []).append(f)
    cache: dict[Any, CallMatch | None] = {}
    regions: list[Region] = []
    owned: set[int] = set()

    def take(region: Region, ops: list[OpRecord]) -> None:
        fresh = [o for o in ops if id(o) not in owned]
        owned.update(id(o) for o in fresh)
        region.ops = fresh
        if fresh:
            regions.append(region)

    def visit(path: str) -> None:
        call = trace.modules.get(path)
        if call is not None and path:
            key = _signature(call)
            if key not in cache:
                as_call = module_call(call)
                cache[key] = find_call_match(as_call) if as_call is not None else None
            match = cache[key]
            if match is not None:
                take(Region(path, TASK_KINDS.get(match.task, "other"), "module", match=match),
                     [o for o in trace.ops if _within(o.module, path)])
                return
        for child in children.get(path, []):
            visit(child)
        for f in functions.get(path, []):
            ops = [o for o in trace.ops if o.call == f.key and o.module == path]
            as_call = function_call(f)
            match = find_call_match(as_call) if as_call is not None else None
            kind = TASK_KINDS.get(match.task, "other") if match else _kind_of(ops)
            take(Region(f.key, kind, "function", match=match), ops)
        rest = [o for o in trace.ops if o.module == path]
        take(Region(f"{path or '<root>'} (own ops)", _kind_of(rest), "rest"), rest)

    visit("")
    total = trace.total_s or 1.0
    for r in regions:
        r.seconds = sum(o.seconds for o in r.ops)
        r.share = r.seconds / total
    return sorted(regions, key=lambda r: -r.seconds)


def coverage(regions: Sequence[Region]) -> float:
    """The share of the step in regions that have a task."""
    return sum(r.share for r in regions if r.match is not None)
