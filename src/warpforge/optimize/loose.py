"""Regions cut from a module's loose tensor ops, by what a run of them computes.

A module's forward often computes something a task computes without calling any function for it: minGPT's
attention is ``softmax((q @ k.transpose(-2, -1)) * scale masked by a causal buffer) @ v``, written inline. The
trace (optimize/trace.py) records each module's *stream*: the torch calls its own code makes, in order, with
the tensors themselves. A *cut* is a run of consecutive calls of that stream, from position ``start`` to
``end`` (its positions count the module's own tensor-returning calls), with

- one output: the tensor the last call returns is the only one of the run's results used after it (by a
  later call, a child module or the forward's return);
- inputs: the tensors the run reads that it did not make (q, k and v above), at most ``MAX_CALL_TENSORS``;
  the module's buffers are constants of the function (the causal mask above), never inputs;
- nothing that hides a value from the trace: no in-place op, no call inside a helper's call, no child module
  with parameters or buffers (a child such as a Dropout runs inside it), and no data-dependent Python
  anywhere in the forward (``.item()``, ``bool(t)``: a patch replays the traced calls, which such code could
  leave).

The run, replayed on the inputs the matcher feeds (optimize/match.py), is a :class:`~warpforge.optimize.match.
Call` like any module's; only the numbers decide its task. Cuts are tried from the costliest down, and a
matched cut's calls are no part of a later one. A module that makes a helper call has no cuts (its helper's
own calls would shift the positions a patch counts).

Example::

    >>> cuts = loose_cuts(model, trace, "attn", match=find_call_match)     # doctest: +SKIP
    >>> cuts[0].match.task, cuts[0].start, cuts[0].end                     # doctest: +SKIP
    ('attention', 9, 14)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from warpforge.optimize.loose_patch import META_CALLS
from warpforge.optimize.match import Call, CallMatch
from warpforge.optimize.trace import OpRecord, StepTrace, StreamEntry

MAX_CALL_TENSORS = 6
# Aten ops that only move or cast data: a cut whose forward does nothing else (a transpose made contiguous)
# is no task's, and is not tried (each try runs the matcher over every task).
DATA_MOVES = frozenset(
    {
        "clone",
        "copy_",
        "_to_copy",
        "cat",
        "stack",
        "_unsafe_view",
        "empty_like",
        "zeros_like",
        "ones_like",
        "new_empty",
        "new_zeros",
    }
)


@dataclass
class LooseCut:
    """A run of a module's own calls as a function of its inputs (see module doc)."""

    path: str
    entries: list[StreamEntry]  # the run, in order (its torch calls and the child calls between them)
    start: int  # the positions of its first and last torch call in the module's stream
    end: int
    inputs: list[torch.Tensor]  # the tensors it reads and did not make, in the order they are first read
    reads: list[tuple[int, int]]  # per input: (the position of the call first reading it, its index in that
    #                               call's tensors, args then kwargs as tree_flatten orders them)
    output: torch.Tensor
    names: list[str] = field(default_factory=list)  # the names of the module's calls at positions 0..end
    guard: list[list[int]] = field(default_factory=list)  # the shapes of the module's tensor arguments
    seconds: float = 0.0
    ops: list[OpRecord] = field(default_factory=list)
    match: CallMatch | None = None

    @property
    def keys(self) -> set[str]:
        return {e.key for e in self.entries if e.key}

    def placeholders(self) -> tuple[list[list[tuple[list[int], list[int], str]]], list[bool]]:
        """Per position start..end-1: the tensors its call returned (shape, stride, dtype), and whether as a
        tuple: what a patch returns instead of computing them."""
        metas: list[list[tuple[list[int], list[int], str]]] = []
        tuples: list[bool] = []
        for e in self.entries:
            if e.child or e.position < 0 or e.position == self.end:
                continue
            metas.append(
                [(list(t.shape), list(t.stride()), str(t.dtype).removeprefix("torch.")) for t in _tensors(e.output)]
            )
            tuples.append(not isinstance(e.output, torch.Tensor))
        return metas, tuples

    @property
    def children(self) -> list[str]:
        return [e.name for e in self.entries if e.child]

    def describe(self) -> str:
        names = [e.name for e in self.entries if e.position >= 0 and not e.child]
        return f"{names[0]}..{names[-1]}" if len(names) > 1 else names[0]


def _tensors(values: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(values)[0] if isinstance(t, torch.Tensor)]


_INPLACE_DUNDERS = frozenset(
    {
        "__iadd__",
        "__isub__",
        "__imul__",
        "__itruediv__",
        "__ifloordiv__",
        "__imod__",
        "__ipow__",
        "__iand__",
        "__ior__",
        "__ixor__",
        "__ilshift__",
        "__irshift__",
        "__imatmul__",
        "__setitem__",
    }
)


def _inplace(e: StreamEntry) -> bool:
    """An op writing a tensor it was given (``masked_fill_``, ``x += y``); a call returning its input itself
    (``contiguous()`` of a contiguous tensor) writes nothing."""
    return not e.child and ((e.name.endswith("_") and not e.name.endswith("__")) or e.name in _INPLACE_DUNDERS)


def _stateless(module: Any) -> bool:
    return (
        isinstance(module, torch.nn.Module)
        and not any(True for _ in module.parameters())
        and not any(True for _ in module.buffers())
    )


def _replayable(stream: Sequence[StreamEntry]) -> bool:
    """No data-dependent Python (a call returning no tensor that is no metadata read) and no opaque call."""
    return all(e.child or e.position >= 0 or e.name in META_CALLS for e in stream)


def replay(cut: LooseCut, values: Sequence[torch.Tensor]) -> Any:
    """The cut's calls on ``values`` in place of its inputs (the module's buffers as they are)."""
    env: dict[int, Any] = {id(t): v for t, v in zip(cut.inputs, values)}

    def swap(v: Any) -> Any:
        return env.get(id(v), v) if isinstance(v, torch.Tensor) else v

    for e in cut.entries:
        if not e.child and e.position < 0:
            continue  # a metadata read: what it returned is in the later calls' arguments already
        args, kwargs = tree_map(swap, e.args), tree_map(swap, e.kwargs)
        out = e.func(*args, **kwargs)
        recorded, made = tree_flatten(e.output)[0], tree_flatten(out)[0]
        for r, m in zip(recorded, made):
            if isinstance(r, torch.Tensor):
                env[id(r)] = m
    return env[id(cut.output)]


def as_call(cut: LooseCut) -> Call:
    # matched in float64 whatever the step's dtype (as a module's call, optimize/regions.py)
    tensors = tuple(t.detach().double() if t.is_floating_point() else t.detach() for t in cut.inputs)
    return Call(tensors, lambda values: replay(cut, values), cut.output.detach().clone())


def _later_reads(stream: Sequence[StreamEntry], after: int, returned: Any) -> set[int]:
    ids = {id(t) for e in stream[after:] for t in _tensors((e.args, e.kwargs))}
    return ids | {id(t) for t in _tensors(returned)}


def _cut(path: str, stream: list[StreamEntry], i: int, j: int, buffers: set[int], returned: Any) -> LooseCut | None:
    """The run stream[i..j] as a cut, or None when it is none (see module doc)."""
    run = stream[i : j + 1]
    last = run[-1]
    if not isinstance(last.output, torch.Tensor) or not last.output.is_floating_point():
        return None
    if "__get__" in (run[0].name, last.name):  # a property (x.T): a patch reads it, never replaces it
        return None
    if any(
        e.opaque
        or (e.child and not _stateless(e.func))
        or (not e.child and e.position < 0 and e.name not in META_CALLS)
        or _inplace(e)
        for e in run
    ):
        return None
    made: set[int] = set()
    inputs: list[torch.Tensor] = []
    reads: list[tuple[int, int]] = []
    for e in run:
        read = _tensors((e.args, e.kwargs))
        for n, t in enumerate(read):
            if id(t) in made or id(t) in buffers or any(t is x for x in inputs):
                continue
            if e.child or e.position < 0:  # a patch captures inputs at its own torch calls only
                return None
            inputs.append(t)
            reads.append((e.position, n))
        made |= {id(t) for t in _tensors(e.output)} - {id(t) for t in read}
    if not inputs or len(inputs) > MAX_CALL_TENSORS:
        return None
    used = _later_reads(stream, j + 1, returned)
    if any(x in used for x in made - {id(last.output)}):
        return None  # another of its results is used after it: a second output
    return LooseCut(path, run, stream[i].position, last.position, inputs, reads, last.output)


def candidate_cuts(model: torch.nn.Module, trace: StepTrace, path: str) -> list[LooseCut]:
    """Every cut of the module's stream, costliest first (ops: its calls' own, forward and backward, and the
    child modules' inside it)."""
    stream = trace.streams.get(path, [])
    if not stream or not _replayable(stream) or any(f.helper and f.path == path for f in trace.functions):
        return []
    module = model.get_submodule(path) if path else model
    buffers = {id(b) for b in module.buffers()}
    returned = trace.returned.get(path)
    calls = [k for k, e in enumerate(stream) if not e.child and e.position >= 0]
    names = [stream[k].name for k in calls]
    first = trace.modules.get(path)
    guard = [list(t.shape) for t in _tensors((first.args, first.kwargs))] if first is not None else []
    nested = _nested_keys(trace)
    cuts: list[LooseCut] = []
    for a, i in enumerate(calls):
        for j in calls[a:]:
            cut = _cut(path, stream, i, j, buffers, returned)
            if cut is None:
                continue
            cut.names, cut.guard = names[: cut.end + 1], guard
            cut.ops = cut_ops(trace, cut, nested)
            cut.seconds = sum(o.seconds for o in cut.ops)
            if cut.seconds > 0 and any(o.op not in DATA_MOVES for o in cut.ops if not o.backward):
                cuts.append(cut)
    return sorted(cuts, key=lambda c: (-c.seconds, c.start))


def cut_ops(trace: StepTrace, cut: LooseCut, nested: dict[str, set[str]]) -> list[OpRecord]:
    """The step's ops the cut runs, forward and backward: its own calls', those inside its functional calls,
    and its child modules'."""
    keys = set().union(*(nested.get(k, {k}) for k in cut.keys))
    children = cut.children
    return [
        o
        for o in trace.ops
        if (o.call in keys and o.module == cut.path)
        or any(o.module == c or o.module.startswith(c + ".") for c in children)
    ]


def _nested_keys(trace: StepTrace) -> dict[str, set[str]]:
    """A functional call's key -> its key and those of the calls made inside it."""
    children: dict[str, list[str]] = {}
    for f in trace.functions:
        if f.parent:
            children.setdefault(f.parent, []).append(f.key)

    def within(key: str) -> set[str]:
        out = {key}
        for k in children.get(key, []):
            out |= within(k)
        return out

    return {f.key: within(f.key) for f in trace.functions}


def _signature(cut: LooseCut) -> tuple[Any, ...]:
    """Equal for two cuts computing the same function (a model's repeated layers): matched once."""

    def norm(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return (tuple(v.shape), v.dtype)
        if isinstance(v, torch.nn.Module):
            return (type(v), repr(v))
        if isinstance(v, (tuple, list)):
            return tuple(norm(x) for x in v)
        if isinstance(v, dict):
            return tuple(sorted((k, norm(x)) for k, x in v.items()))
        return repr(v)

    return (tuple((e.name, norm(e.args), norm(e.kwargs)) for e in cut.entries), norm(cut.inputs))


def loose_cuts(
    model: torch.nn.Module,
    trace: StepTrace,
    path: str,
    match: Callable[[Call], CallMatch | None],
    cache: dict[Any, CallMatch | None],
) -> list[LooseCut]:
    """The module's matched cuts, no two sharing a call (costliest first; ``cache`` by signature)."""
    taken: set[int] = set()
    found: list[LooseCut] = []
    for cut in candidate_cuts(model, trace, path):
        span = set(range(cut.start, cut.end + 1))
        if span & taken:
            continue
        key = _signature(cut)
        if key not in cache:
            cache[key] = match(as_call(cut))
        cut.match = cache[key]
        if cut.match is not None:
            found.append(cut)
            taken |= span
    return found
