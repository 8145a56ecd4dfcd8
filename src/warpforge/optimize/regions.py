"""A traced step cut into regions a kernel can own, each matched to a built-in task by what it computes.

The module tree is walked from the root: a module whose call a built-in task computes (optimize/match.py)
is one region with every op of its forward and backward; otherwise its children are visited, then its own
calls are tried one by one, outermost first: ``torch.nn.functional`` calls (the attention call inside an
attention module, the loss inside a causal LM's forward) and helpers of the model's code (a rotary
embedding written as ``apply_rotary_pos_emb``; a helper returning several tensors is matched output by
output). A call no task computes is opened: the calls inside it are tried, and its own ops are one region
with no task. Before its children and calls, a module's own loose tensor ops are tried as runs
(optimize/loose.py: an attention written as ``softmax(q @ k.T * scale, masked) @ v`` inline is one run of
q, k and v). What is left of the module's own ops is one region with no task (residual adds, reshapes that
copy). A region's share is its cost over the step's (optimize/trace.py: GPU-roofline estimates on a CPU).

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

from warpforge.optimize.loose import LooseCut, loose_cuts
from warpforge.optimize.match import Call, CallMatch, find_call_match, task_kind
from warpforge.optimize.trace import FunctionCall, ModuleCall, OpRecord, StepTrace

_GEMM_OPS = {"mm", "bmm", "addmm", "baddbmm", "matmul", "linear"}
# A module with more tensors than any task takes is never one region (a decoder layer: 9 weights).
MAX_CALL_TENSORS = 6


@dataclass
class Region:
    name: str  # the module path, or "path::function#i" for a functional call
    kind: str
    # "module" | "function" | "helper" | "loose" (a run of a module's own calls) | "loss" (the step's loss
    # function, outside the model) | "rest"
    source: str
    ops: list[OpRecord] = field(default_factory=list)
    match: CallMatch | None = None
    outputs: list[CallMatch] = field(default_factory=list)  # a helper returning several tensors: one each
    helper_file: str = ""  # a helper region: the source file defining the function (its patch rebinds only it)
    loose: LooseCut | None = None  # a loose region: the run of calls it replaces (optimize/loose.py)
    seconds: float = 0.0
    share: float = 0.0
    note: str = ""

    @property
    def task(self) -> str | None:
        return self.match.task if self.match else None

    @property
    def matches(self) -> list[CallMatch]:
        """Every match a patch needs: one per output of a helper returning several, else the one."""
        return self.outputs or ([self.match] if self.match else [])


def _kind_of(ops: Sequence[OpRecord]) -> str:
    cost: dict[str, float] = {}
    for o in ops:
        kind = (
            "gemm"
            if o.op in _GEMM_OPS
            else "attention"
            if "scaled_dot_product" in o.op
            else "embedding"
            if o.op.startswith("embedding")
            else "elementwise"
        )
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
        state = dict(zip(names, values[len(originals) :]))
        return torch.func.functional_call(module, state, _rebuild(call.args, replace), _rebuild(call.kwargs, replace))

    return Call(tensors, run, call.output)


def function_calls(call: FunctionCall) -> list[Call]:
    """A functional or helper call as :class:`Call` s: one, or one per element of a returned tuple of tensors
    (each may then ignore some of the tensors); a loss's ``reduction`` and ``ignore_index`` are read off it."""
    flat = [a for a in call.args if isinstance(a, torch.Tensor)] + [
        v for v in call.kwargs.values() if isinstance(v, torch.Tensor)
    ]
    out = call.output
    several = isinstance(out, tuple) and len(out) > 1 and all(isinstance(o, torch.Tensor) for o in out)
    if not flat or len(flat) > MAX_CALL_TENSORS or not (isinstance(out, torch.Tensor) or several):
        return []
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

    tensors = tuple(_fp64(t) for t in flat)
    if not several:
        return [Call(tensors, run, out, ignore, reduction)]

    def element(i: int) -> Call:
        return Call(tensors, lambda values: run(values)[i], out[i], ignore, reduction, index=i, spare=True)

    return [element(i) for i in range(len(out))]


def _call_signature(call: FunctionCall) -> tuple[Any, ...]:
    """Equal for two calls of one function on tensors of the same shapes and dtypes with the same settings."""

    def norm(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return (tuple(v.shape), v.dtype)
        if isinstance(v, torch.nn.Module):
            return type(v)
        if isinstance(v, (tuple, list)):
            return tuple(norm(x) for x in v)
        return repr(v)

    return (call.func, norm(call.args), tuple(sorted((k, norm(v)) for k, v in call.kwargs.items())))


def _signature(call: ModuleCall) -> tuple[Any, ...]:
    """Equal for two calls that compute the same function: the class, every scalar setting (an eps), every
    tensor's shape and dtype. Matching is then done once per signature."""
    settings = tuple(
        sorted(
            (k, v)
            for k, v in vars(call.module).items()
            if isinstance(v, (int, float, bool, str)) and not k.startswith("_")
        )
    )
    shapes = tuple((tuple(t.shape), t.dtype) for t in call.args if isinstance(t, torch.Tensor))
    params = tuple((n, tuple(p.shape), p.dtype) for n, p in call.module.named_parameters())
    return (
        type(call.module),
        settings,
        shapes,
        params,
        tuple(sorted((k, repr(v)) for k, v in call.kwargs.items() if not isinstance(v, torch.Tensor))),
    )


def cut_regions(model: torch.nn.Module, trace: StepTrace) -> list[Region]:
    """The step's regions, largest first; shares sum to 1 (every op is in exactly one region)."""
    children: dict[str, list[str]] = {}
    for path, _ in model.named_modules():
        if path:
            parent = path.rpartition(".")[0]
            children.setdefault(parent, []).append(path)
    by_key = {f.key: f for f in trace.functions}
    inner: dict[str, list[FunctionCall]] = {}  # a call's key -> the calls made inside it in the same module
    functions: dict[str, list[FunctionCall]] = {}  # module path -> its outermost calls
    for f in trace.functions:
        parent = by_key.get(f.parent)
        if parent is not None and parent.path == f.path:
            inner.setdefault(parent.key, []).append(f)
        else:
            functions.setdefault(f.path, []).append(f)
    cache: dict[Any, CallMatch | None] = {}
    call_cache: dict[Any, list[CallMatch]] = {}
    loose_cache: dict[Any, CallMatch | None] = {}
    regions: list[Region] = []
    owned: set[int] = set()

    def take(region: Region, ops: list[OpRecord]) -> None:
        fresh = [o for o in ops if id(o) not in owned]
        owned.update(id(o) for o in fresh)
        region.ops = fresh
        if fresh:
            regions.append(region)

    def keys_within(f: FunctionCall) -> set[str]:
        keys = {f.key}
        for g in inner.get(f.key, []):
            keys |= keys_within(g)
        return keys

    def matches_of(f: FunctionCall) -> list[CallMatch]:
        key = _call_signature(f)
        if key not in call_cache:
            calls = function_calls(f)
            found = [find_call_match(c) for c in calls]
            call_cache[key] = [m for m in found if m is not None] if calls and all(found) else []
        return call_cache[key]

    def visit_call(f: FunctionCall) -> None:
        source = "helper" if f.helper else "loss" if f.step_loss else "function"
        matches = matches_of(f)
        if matches:
            keys = keys_within(f)
            origin = getattr(inspect.unwrap(f.func), "__code__", None) if f.helper else None
            take(
                Region(
                    f.key,
                    task_kind(matches[0].task),
                    source,
                    match=matches[0],
                    outputs=matches if len(matches) > 1 else [],
                    helper_file=origin.co_filename if origin is not None else "",
                ),
                [o for o in trace.ops if o.call in keys and o.module == f.path],
            )
            return
        for g in inner.get(f.key, []):
            visit_call(g)
        own = [o for o in trace.ops if o.call == f.key and o.module == f.path]
        take(Region(f.key, _kind_of(own), source), own)

    def visit(path: str) -> None:
        call = trace.modules.get(path)
        if call is not None and path:
            key = _signature(call)
            if key not in cache:
                as_call = module_call(call)
                cache[key] = find_call_match(as_call) if as_call is not None else None
            match = cache[key]
            if match is not None:
                take(
                    Region(path, task_kind(match.task), "module", match=match),
                    [o for o in trace.ops if _within(o.module, path)],
                )
                return
        # loose runs first: a matched run owns the calls and stateless children (a Dropout) inside it
        inside: set[str] = set()
        for cut in loose_cuts(model, trace, path, find_call_match, loose_cache):
            assert cut.match is not None
            take(
                Region(
                    f"{path or '<root>'}::{cut.describe()}#{cut.start}",
                    task_kind(cut.match.task),
                    "loose",
                    match=cut.match,
                    loose=cut,
                ),
                cut.ops,
            )
            inside |= cut.keys | set(cut.children)
        for child in children.get(path, []):
            if child not in inside:
                visit(child)
        for f in functions.get(path, []):
            if f.key not in inside:
                visit_call(f)
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


def model_coverage(regions: Sequence[Region]) -> float:
    """The share of the model's own ops in regions that have a task: the step without the step's loss
    (source "loss": warpforge's stand-in, a KernelBench target's output mean square, which is never patched)
    in numerator and denominator. On the shrunk minGPT block (docs/optimize.md) the loss is 7.3% of the step:
    0.971 of the step is in regions with a task, 0.898 of it in the model's, 0.969 of the model's ops."""
    model = [r for r in regions if r.source != "loss"]
    total = sum(r.share for r in model)
    return sum(r.share for r in model if r.match is not None) / total if total > 0 else 0.0
