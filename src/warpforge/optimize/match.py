"""Which built-in task a captured call computes, decided numerically on the call's own shapes.

A call is a module's forward (its tensor arguments, then its parameters) or a ``torch.nn.functional`` call,
recorded by optimize/trace.py. For each built-in task (and each member of a family) and each assignment of
the call's tensors to the task's inputs (same kinds; a higher-rank call tensor may be the task's input with
its leading dimensions flattened, as ``(batch, seq, hidden)`` is ``(M, N)``), the task's shape is read off
the tensors; then the task's own inputs at that shape (its random and adversarial ones) are fed to both the
call and the task's reference, and every output must agree within the fp32 tolerance
(evaluator/judge/compare.py). Names never count: any module that computes an RMSNorm is one.

Two calling conventions beside the task's own are recognised, each checked the same way:
- a task input listed in the task's ``OPTIONAL_INPUTS`` may be absent (a Linear without bias): zeros;
- a loss reduced to a scalar (``reduction='mean'`` or ``'sum'``, with ``ignore_index``) over a task that
  returns one value per row: the rows whose target is ignored are dropped, as torch does;
- one output of a call returning several (``apply_rotary_pos_emb(q, k, cos, sin)`` returns the rotated q
  and k): the call may take tensors the task does not; they are fed fresh random values in every case, so
  a match also shows that this output does not depend on them;
- a call on a batch that the task computes item by item (HF's rotary ``cos`` is [batch, seq, dim] where the
  task's is [seq, dim]): every tensor of the call shares a leading size B > 1, item 0 alone matches the task,
  and the call on a random batch equals the call on each item stacked; the patch then runs the op per item.

Example::

    >>> m = find_call_match(module_call_of(nn.RMSNorm(64, eps=1e-6)))   # doctest: +SKIP
    >>> m.task, m.shape                                                  # doctest: +SKIP
    ('rmsnorm', {'M': 128, 'N': 64})
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import torch

from warpforge.kernels.taskdef import Shape, Task

SEEDS = (0, 1)


@dataclass(frozen=True)
class CallMatch:
    """How a captured call maps onto a task: enough to patch the call with the task's exported op."""

    task: str
    member: str
    shape: Shape  # the task's shape at the call's sizes
    order: tuple[int, ...]  # task input i is the call's tensor order[i]; -1: an absent optional input (zeros)
    flatten: tuple[bool, ...]  # per task input: the call's tensor has its leading dims flattened
    reduce: str = ""  # "", "mean" or "sum": the call reduces the task's per-row output
    ignore_index: int | None = None
    has_backward: bool = False
    zero_shapes: tuple[tuple[int, ...], ...] = field(default=())  # shapes of the absent inputs, in order
    output: int = -1  # which element of the call's returned tuple the task computes (-1: the whole return)
    items: int = 1  # > 1: the call is a batch of this many items, the task computes each (shape: one item's)

    @property
    def task_name(self) -> str:
        """The task to search and export: the family's member as a task of its own (``elementwise[gelu_tanh]``,
        kernels/members.py) for a family, else the task."""
        return f"{self.task}[{self.member}]" if self.member else self.task

    def describe(self) -> str:
        name = self.task_name
        dims = ",".join(f"{k}={v}" for k, v in sorted(self.shape.items()))
        extra = " (leading dims flattened)" if any(self.flatten) else ""
        if self.reduce:
            extra += f" (reduced: {self.reduce})"
        if -1 in self.order:
            extra += " (absent input as zeros)"
        if self.output >= 0:
            extra += f" (output {self.output})"
        if self.items > 1:
            extra += f" (per item of {self.items})"
        return f"{name} at {dims}{extra}"


@dataclass(frozen=True)
class Call:
    """What a match needs of a call: a function of its tensors and what it returned."""

    tensors: tuple[torch.Tensor, ...]
    run: Callable[[Sequence[torch.Tensor]], Any]  # the call with these tensors replaced
    output: Any
    ignore_index: int | None = None
    reduction: str = ""
    index: int = -1  # this is element ``index`` of what the call returns (-1: all of it)
    spare: bool = False  # the call may take tensors the task does not (fed random values: see module doc)


@lru_cache(maxsize=1)
def _tasks() -> tuple[Task, ...]:
    from warpforge.kernels.task import builtin_task_names, get_task

    tasks = [get_task(n) for n in builtin_task_names()]
    # a dedicated task before a family: where both compute a call (layernorm and normalize, cross_entropy and
    # loss), the dedicated one has a backward kernel, which a training step needs, and families have none
    return tuple(sorted(tasks, key=lambda t: (bool(t.members), t.name)))


def task_kind(name: str) -> str:
    """The region kind of a built-in task: its module's KIND (kernels/taskdef.py KINDS); "other" for any other."""
    return next((t.kind for t in _tasks() if t.name == name), "other")


def _probe_inputs(task: Task) -> tuple[dict[str, list[tuple[int, int]]], list[Any]] | None:
    from warpforge.evaluator.judge.matching import key_positions

    found = key_positions(task)
    if found is None:
        return None
    where, _ = found
    inputs = list(
        task.make_inputs(
            dict(task.check_shapes[0]) if task.check_shapes else dict(task.shapes[0]), torch.float32, 0, "cpu"
        )
    )
    return where, inputs


def _view(t: torch.Tensor, rank: int) -> torch.Tensor | None:
    if t.dim() == rank:
        return t
    if t.dim() < rank or rank < 1:
        return None
    return t.reshape(-1, *t.shape[t.dim() - rank + 1 :])


def _assignments(call: Call, task_inputs: list[Any], optional: tuple[int, ...]) -> list[tuple[int, ...]]:
    n = len(task_inputs)
    slots = list(range(len(call.tensors)))
    out: list[tuple[int, ...]] = []
    absent_sets = [()] + [c for r in range(1, len(optional) + 1) for c in itertools.combinations(optional, r)]
    for absent in absent_sets:
        need = n - len(absent)
        if need != len(call.tensors) and not (call.spare and need < len(call.tensors)):
            continue
        for perm in itertools.permutations(slots, need):
            it = iter(perm)
            order = tuple(-1 if i in absent else next(it) for i in range(n))
            ok = True
            for i, j in enumerate(order):
                if j < 0:
                    continue
                t, ti = call.tensors[j], task_inputs[i]
                if (
                    not isinstance(ti, torch.Tensor)
                    or t.is_floating_point() != ti.is_floating_point()
                    or t.dim() < ti.dim()
                ):
                    ok = False
                    break
            if ok:
                out.append(order)
    return out


def _shapes_of(
    task: Task, where: dict[str, list[tuple[int, int]]], views: list[torch.Tensor | None], order: tuple[int, ...]
) -> list[Shape]:
    """The task's shapes at these tensors' sizes: one, or one per value of each key no tensor carries (a flag
    such as attention's CAUSAL, tried with every value the task's own shapes give it)."""
    shape: Shape = {}
    free: dict[str, list[int]] = {}
    for key, spots in where.items():
        sizes = {int(views[i].shape[d]) for i, d in spots if order[i] >= 0 and views[i] is not None}  # type: ignore[union-attr]
        if len(sizes) > 1:
            return []
        if sizes:
            shape[key] = sizes.pop()
        else:
            free[key] = sorted({s[key] for s in task.check_shapes + task.shapes if key in s})
            if not free[key]:
                return []
    keys = list(free)
    return [{**shape, **dict(zip(keys, values))} for values in itertools.product(*(free[k] for k in keys))]


def _feed(call: Call, order: tuple[int, ...], task_inputs: tuple[Any, ...], seed: int) -> list[torch.Tensor]:
    """The call's tensors holding the task's input values (reshaped back, in the call's dtype); a spare
    tensor (one no task input takes) holds random values drawn from ``seed``."""
    tensors = list(call.tensors)
    gen = torch.Generator().manual_seed(seed)
    for j in sorted(set(range(len(tensors))) - set(order)):
        t = tensors[j]
        if t.is_floating_point():
            tensors[j] = torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.dtype)
    for i, j in enumerate(order):
        if j >= 0:
            src = task_inputs[i]
            tensors[j] = src.reshape(call.tensors[j].shape).to(call.tensors[j].dtype)  # float64 (regions.py)
    return tensors


def _task_args(order: tuple[int, ...], task_inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(torch.zeros_like(v) if j < 0 else v for v, j in zip(task_inputs, order))


def _reduce(per_row: torch.Tensor, targets: torch.Tensor | None, how: str, ignore: int | None) -> torch.Tensor:
    valid = torch.ones_like(per_row, dtype=torch.bool) if targets is None or ignore is None else targets != ignore
    total = (per_row.double() * valid).sum()
    return total / valid.sum() if how == "mean" else total


def _close(out: Any, ref: Any) -> bool:
    from warpforge.evaluator.judge.matching import agree

    return agree(out, ref)


def _agrees(call: Call, task: Task, shape: Shape, order: tuple[int, ...]) -> tuple[bool, str]:
    """(every case agrees, the reduction used)."""
    cases: list[tuple[Any, ...]] = []
    for seed in SEEDS:
        cases.append(tuple(task.make_inputs(shape, torch.float32, seed, "cpu")))
    if task.adversarial_inputs is not None:
        cases.extend(tuple(v) for v in task.adversarial_inputs(shape, torch.float32, SEEDS[0], "cpu").values())
    reduce = ""
    for case, inputs in enumerate(cases):
        if -1 in order:  # an absent input is zeros in the task's call too
            inputs = tuple(torch.zeros_like(v) if j < 0 else v for v, j in zip(inputs, order))
        targets = next(
            (
                inputs[i]
                for i, j in enumerate(order)
                if j >= 0 and isinstance(inputs[i], torch.Tensor) and not inputs[i].is_floating_point()
            ),
            None,
        )
        if call.ignore_index is not None and targets is not None and call.reduction:
            # a quarter of the rows ignored, as a causal LM's shifted labels pad each sequence
            marked = targets.clone()
            marked[::4] = call.ignore_index
            fed = list(inputs)
            fed[[i for i, v in enumerate(inputs) if v is targets][0]] = marked
            call_inputs: tuple[Any, ...] = tuple(fed)
        else:
            marked, call_inputs = targets, inputs
        try:
            with torch.no_grad():
                got = call.run(_feed(call, order, call_inputs, 1000 + case))
                ref = task.reference(
                    *(
                        v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                        for v in _task_args(order, inputs)
                    )
                )
        except Exception:  # noqa: BLE001 - the call or the task refuses this assignment: no match
            return False, ""
        if isinstance(got, torch.Tensor) and isinstance(ref, torch.Tensor) and got.dim() == 0 and ref.dim() == 1:
            if call.reduction not in ("mean", "sum"):
                return False, ""
            reduce = call.reduction
            ref = _reduce(ref, marked, reduce, call.ignore_index)
        elif isinstance(got, torch.Tensor) and isinstance(ref, torch.Tensor) and got.shape != ref.shape:
            if got.numel() != ref.numel():
                return False, ""
            got = got.reshape(ref.shape)
        if not _close(got, ref):
            return False, ""
    return True, reduce


def find_call_match(call: Call, tasks: Sequence[Task] | None = None) -> CallMatch | None:
    """The first task (a dedicated one before a family) that computes ``call``, or None; a call on a batch
    of items the task computes one by one matches per item (see module doc)."""
    found = _find(call, tasks)
    if found is not None or not _batched(call):
        return found
    items = int(call.tensors[0].shape[0])
    item = Call(
        tuple(t[:1] for t in call.tensors),
        call.run,
        call.output[:1],
        call.ignore_index,
        call.reduction,
        call.index,
        call.spare,
    )
    found = _find(item, tasks)
    if found is None or not _itemwise(call):
        return None
    return replace(found, items=items)


def _batched(call: Call) -> bool:
    sizes = {int(t.shape[0]) if t.dim() else 0 for t in (*call.tensors, call.output)}
    return len(sizes) == 1 and sizes.pop() > 1


def _itemwise(call: Call) -> bool:
    """The call on a random batch is the call on each item, stacked (no item reads another)."""
    gen = torch.Generator().manual_seed(7)
    fed = [
        torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.dtype) if t.is_floating_point() else t
        for t in call.tensors
    ]
    try:
        with torch.no_grad():
            whole = call.run(fed)
            each = [call.run([t[b : b + 1] for t in fed]) for b in range(fed[0].shape[0])]
    except Exception:  # noqa: BLE001 - the call refuses a one-item batch: not item by item
        return False
    return isinstance(whole, torch.Tensor) and _close(whole, torch.cat(each, 0))


def _find(call: Call, tasks: Sequence[Task] | None) -> CallMatch | None:
    if not call.tensors or not isinstance(call.output, torch.Tensor):
        return None
    for task in tasks if tasks is not None else _tasks():
        probe = _probe_inputs(task)
        if probe is None:
            continue
        where, task_inputs = probe
        optional = task.optional_inputs
        for order in _assignments(call, task_inputs, optional):
            views = [None if j < 0 else _view(call.tensors[j], task_inputs[i].dim()) for i, j in enumerate(order)]
            if any(v is None for v, j in zip(views, order) if j >= 0):
                continue
            for shape in _shapes_of(task, where, views, order):
                found = _try_shape(call, task, shape, order, views)
                if found is not None:
                    return found
    return None


def _try_shape(
    call: Call, task: Task, shape: Shape, order: tuple[int, ...], views: list[torch.Tensor | None]
) -> CallMatch | None:
    try:
        made = task.make_inputs(shape, torch.float32, 0, "cpu")
    except Exception:  # noqa: BLE001 - the task refuses these sizes (heads that must divide)
        return None
    if any(
        j >= 0 and tuple(m.shape) != tuple(views[i].shape)  # type: ignore[union-attr]
        for i, (m, j) in enumerate(zip(made, order))
    ):
        return None
    members = [task.as_member(m.name) for m in task.members] or [task]
    for member in members:
        ok, reduce = _agrees(call, member, shape, order)
        if ok:
            zero_shapes = tuple(tuple(made[i].shape) for i, j in enumerate(order) if j < 0)
            flatten = tuple(j >= 0 and call.tensors[j].dim() != made[i].dim() for i, j in enumerate(order))
            return CallMatch(
                task.name,
                member.member,
                shape,
                order,
                flatten,
                reduce,
                call.ignore_index if reduce else None,
                task.has_backward,
                zero_shapes,
                call.index,
            )
    return None
