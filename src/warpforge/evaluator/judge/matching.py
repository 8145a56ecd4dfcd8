"""Which built-in task a by-path problem computes, decided numerically: then its templates can search it.

For each built-in task (kernels/tasks/*.py) and each order of the problem's arguments (its
``get_inputs()`` followed by its state) with the same number of tensors, ranks and kinds as the task's
inputs, both references run on the problem's own inputs at small sizes (every size a distinct prime, so
each of the task's shape keys is found as exactly one of the problem's globals), on
:data:`SEEDS` seeds and on the problem's adversarial inputs (negated, both signs, 1e4 and 1e-4 times,
ties, constant rows). A match needs every output to agree within the fp32 tolerance of
evaluator/judge/compare.py. Names never count: a file called softmax that sums is no match, a file called
``my_op.py`` that computes a row softmax is one.

A match is searched as the problem itself (kernels/kernelbench.py): a copy of the problem file that ends
with ``WARPFORGE_SHAPE_KEYS`` (the task's shape keys -> the problem's globals) so the templates' shape
functions read their usual keys, and the task's templates with ``TASK`` naming the problem. The judge is
the problem's own reference, inputs and adversarial inputs. Where the problem's arguments come in another
order than the task's, each template's ``launch`` signature is permuted to the problem's order
(match_adapters.reordered_template; its body unchanged), and a template whose signature cannot be is left out.

Example::

    >>> from warpforge.kernels.task import load_task_file
    >>> from warpforge.evaluator.judge.matching import find_match
    >>> match, tried = find_match(load_task_file("level1/23_Softmax.py"))  # doctest: +SKIP
    >>> match.describe()                                                    # doctest: +SKIP
    "softmax (arguments in order; shape keys M=batch_size, N=dim)"
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from warpforge.evaluator.judge.match_adapters import (
    REDUCTIONS,
    TASK_OUT,
    Adapter,
    Fill,
    adapted_template,
    cuts,
    output_rule,
    reordered_template,
    unit_layouts,
    unit_rule,
)
from warpforge.kernels.kernelbench import ALIAS_ATTR, KEEP_AT_MOST, MATCH_ATTR
from warpforge.kernels.members import template_files, with_constants
from warpforge.kernels.targets import constraint_shape
from warpforge.kernels.taskdef import DEFAULT_TOLERANCES, Member, Shape, Task, shape_key

SEEDS = (0, 1, 2)
# The shape key a matched problem's shapes carry with its floating inputs' element size (see _elem_bytes);
# templates read it as ``shape.get("ELEM_BYTES", 2)``.
ELEM_BYTES = "ELEM_BYTES"
# Distinct primes above kernelbench.KEEP_AT_MOST (8): a size of the problem equal to one of the task's
# keys is then that key, never a coincidence with a kept small size or another key.
PRIMES = (11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53)


@dataclass(frozen=True)
class Match:
    """A built-in task whose reference agrees with the problem's on the problem's inputs."""

    task: str
    order: tuple[int, ...]  # the task's argument i is the problem's argument order[i]
    # The task's shape key -> the problem's global, or with an adapter a product of globals and literal sizes
    # (a list; empty: 1) such as N = features * dim1 * dim2.
    keys: dict[str, str | list[str | int]]
    # The family member that agrees (kernels/taskdef.Member) and the template constants selecting it.
    member: str = ""
    constants: tuple[tuple[str, Any], ...] = ()
    # Shape keys that are no size of any input (a flag such as CAUSAL): the task's own value.
    fixed: tuple[tuple[str, int], ...] = ()
    # The reshapes between the problem's inputs and output and the task's (evaluator/judge/match_adapters.py).
    adapter: Adapter | None = None

    @property
    def in_order(self) -> bool:
        return self.order == tuple(range(len(self.order)))

    def aliased(self, shape: Shape) -> Shape:
        """A problem's shape under the task's keys (kernelbench.KernelBenchProblem.public does the same)."""
        named = {v for v in self.keys.values() if isinstance(v, str)}

        def value(v: str | list[str | int]) -> int:
            if isinstance(v, str):
                return int(shape[v])
            out = 1
            for part in v:
                out *= int(shape[part]) if isinstance(part, str) else int(part)
            return out

        return {
            **{k: int(v) for k, v in shape.items() if k not in named},
            **{k: value(v) for k, v in self.keys.items()},
            **dict(self.fixed),
        }

    @property
    def label(self) -> str:
        """The task, and its member for a family: ``elementwise[leaky_relu(0.01)]``."""
        return f"{self.task}[{self.member}]" if self.member else self.task

    def describe(self) -> str:
        order = "arguments in order" if self.in_order else f"arguments reordered {self.order}"
        if self.adapter is not None:
            order += ", " + self.adapter.describe()
        keys = ", ".join(f"{k}={v if isinstance(v, str) else '*'.join(map(str, v)) or 1}" for k, v in self.keys.items())
        return f"{self.label} ({order}; shape keys {keys})"


def _tensors(value: Any) -> list[torch.Tensor]:
    values = value if isinstance(value, (list, tuple)) else [value]
    return [v for v in values if isinstance(v, torch.Tensor)]


def _number(value: Any) -> bool:
    """A Python number argument (KernelBench's 5_Matrix_scalar_multiplication passes ``s = 3.14``)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same_kind(problem_arg: Any, task_arg: Any) -> bool:
    """A tensor of the same rank and floating-ness, or a Python number where the task takes one."""
    if isinstance(problem_arg, torch.Tensor) and isinstance(task_arg, torch.Tensor):
        return problem_arg.dim() == task_arg.dim() and problem_arg.is_floating_point() == task_arg.is_floating_point()
    return _number(problem_arg) and _number(task_arg)


def _distinct(shape: Shape, keys: list[str]) -> bool:
    values = [shape[k] for k in keys]
    return len(set(values)) == len(values)


def key_positions(task: Task) -> tuple[dict[str, list[tuple[int, int]]], list[Any]] | None:
    """Where each of the task's shape keys sits among its inputs' dimensions (a key that is no dimension,
    such as attention's CAUSAL flag, sits nowhere). The probe is every key a distinct prime; where the task's
    generator refuses that (heads that must divide, an even head dim) its ``MATCH_PROBES`` or the first of
    its own shapes with distinct sizes, which it accepts by construction. The inputs are all of the task's, a
    Python number among them (the scale task's factor); spots index that list."""
    keys = list(task.check_shapes[0]) if task.check_shapes else list(task.shapes[0])
    if len(keys) > len(PRIMES):
        return None
    own = [
        s
        for s in task.match_probes + task.check_shapes + task.small_shapes + task.shapes
        if set(s) == set(keys) and _distinct(s, keys)
    ]
    for probe in [dict(zip(keys, PRIMES)), *own]:
        try:
            inputs = list(task.make_inputs(probe, torch.float32, 0, "cpu"))
        except Exception:  # noqa: BLE001 - the generator refuses these sizes: the next probe
            continue
        if not all(isinstance(t, torch.Tensor) or _number(t) for t in inputs):
            continue
        # a size of 1 locates no key: a probe's key of 1 (a group count) would name every unit dim (a
        # per-channel parameter's [C, 1, 1, 1])
        where = {
            k: [
                (i, j)
                for i, t in enumerate(inputs)
                if isinstance(t, torch.Tensor)
                for j, d in enumerate(t.shape)
                if d == v != 1
            ]
            for k, v in probe.items()
        }
        return where, inputs
    return None


def _problem_probes(problem: Task) -> list[Shape]:
    """The problem's shape with every derived size a distinct prime, then its derived check shapes (they ran,
    so a group count still divides its channels) with colliding sizes moved apart where its code still runs
    there: empty when it has no sizes."""
    base = dict(problem.shapes[0])
    sizes = [k for k in base if problem.check_shapes and any(s.get(k) != base[k] for s in problem.check_shapes)]
    if not sizes or len(sizes) > len(PRIMES):
        return []
    derived = [
        d
        for s in problem.check_shapes
        if all(s[k] > 1 for k in sizes)
        for d in [_spread(problem, dict(s), sizes)]
        if d is not None
    ]
    # Primes no kept global holds (45_Average_Pooling_2D's kernel_size = 11 would name its batch size)
    free = [p for p in PRIMES if p not in {v for k, v in base.items() if k not in sizes}]
    return [{**base, **dict(zip(sizes, free))}, *derived] if len(free) >= len(sizes) else derived


def _spread(problem: Task, shape: Shape, sizes: list[str]) -> Shape | None:
    """``shape`` with each size equal to an earlier one moved to the nearest value that is free and on which the
    problem still runs (16, 16 becomes 16, 17 when 17 is allowed, 16, 32 when only multiples are); None if none."""
    # a kept size above the small ones (GroupNorm's group count: it sizes no tensor, so it is no derived size)
    # is taken too: a key located at its value would name it
    kept = {v for k, v in shape.items() if k not in sizes and isinstance(v, int) and v > KEEP_AT_MOST}
    for i, key in enumerate(sizes):
        taken = {shape[k] for k in sizes[:i]} | kept
        if shape[key] not in taken:
            continue
        v = shape[key]
        for cand in [v + d for d in range(1, 4)] + [v * f for f in (2, 3, 4)]:
            later = {shape[k] for k in sizes[i + 1 :]}
            if cand not in taken and cand not in later and _runs(problem, {**shape, key: cand}):
                shape = {**shape, key: cand}
                break
        else:
            return None
    return shape if _distinct(shape, sizes) else None


def _runs(problem: Task, probe: Shape) -> bool:
    try:
        inputs = problem.make_inputs(probe, torch.float32, SEEDS[0], "cpu")
        problem.reference(*_double(inputs))
    except Exception:  # noqa: BLE001 - the problem's own code refuses these sizes
        return False
    return True


def agree(a: Any, b: Any) -> bool:
    from warpforge.evaluator.judge.compare import compare_outputs

    outs, refs = _tensors(a), _tensors(b)
    if len(outs) != len(refs) or not outs:
        return False
    if any(o.shape != r.shape or o.is_floating_point() != r.is_floating_point() for o, r in zip(outs, refs)):
        return False
    atol, rtol = DEFAULT_TOLERANCES[torch.float32]
    refs64 = [r.double() if r.is_floating_point() else r for r in refs]
    outs64 = [o.double() if o.is_floating_point() else o for o in outs]
    if any(_surely_differ(o, r, atol + rtol) for o, r in zip(outs64, refs64)):
        return False
    return compare_outputs(outs64, refs64, refs64, atol, rtol) is None


def _surely_differ(out: torch.Tensor, ref: torch.Tensor, bound: float) -> bool:
    """A cheap first look (three tensor ops): an error above ``bound`` times the reference's largest magnitude
    exceeds every allowance of compare_outputs (atol times the RMS plus rtol times the element, both at most
    that). Most candidate layouts and members fail here: the full comparison took 0.2 s a case on 46k
    elements on the 2-core machine, 45 s for the elementwise family against a 4-D problem."""
    if not out.is_floating_point() or out.numel() == 0:
        return False
    err = (out - ref).abs().max()
    scale = ref.abs().max()
    if not (bool(torch.isfinite(err)) and bool(torch.isfinite(scale))):
        return False  # non-finite values: the full comparison decides
    return float(err) > bound * max(float(scale), 1e-12)


def _double(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in inputs)


def _proposed(problem: Task, task: Task, probe: Shape) -> list[Member]:
    """The members ``task`` builds from the problem's module at the probe sizes (none for a task module)."""
    if task.propose is None or problem.model is None:
        return []
    try:
        return task.propose(problem.model(probe))
    except Exception:  # noqa: BLE001 - an untraceable forward, or code the probe refuses: nothing to propose
        return []


def _try(
    problem: Task, task: Task, probe: Shape, cases: list[tuple[tuple[Any, ...], Any]], max_cost: int = 2
) -> tuple[Match | None, str]:
    located = key_positions(task)
    if located is None:
        return None, f"{task.name}: its generator accepts no probe with distinct sizes"
    where, task_inputs = located
    inputs = cases[0][0]
    omissions = _omissions(task, len(inputs), len(task_inputs))
    if not omissions or not all(isinstance(x, torch.Tensor) or _number(x) for x in inputs):
        return None, f"{task.name}: takes {len(task_inputs)} tensors, the problem {len(inputs)}"
    reason = f"{task.name}: no argument order with the same ranks and kinds"
    own = (task.check_shapes or task.shapes)[0]
    fixed = tuple((k, int(own[k])) for k, spots in where.items() if not spots)
    proposed = _proposed(problem, task, probe)
    if proposed:  # members built for this problem (a Linear's chain): tried first, then the table
        task = replace(task, members=(*proposed, *task.members))
    members = [task.as_member(m.name) for m in task.members] or [task]
    outs = _tensors(cases[0][1])
    out_shape = tuple(outs[0].shape) if len(outs) == 1 else None
    for omitted in omissions:
        passed = [i for i in range(len(task_inputs)) if i not in omitted]
        fills = _fills(where, passed, omitted, task, task_inputs)
        if fills is None:
            continue
        at = {i: n for n, i in enumerate(passed)}  # a task input's position among the passed ones
        passed_where = {k: [(at[i], j) for i, j in spots if i in at] for k, spots in where.items()}
        passed_inputs = [task_inputs[i] for i in passed]
        for order, adapter in _layouts(inputs, passed_inputs, out_shape, task.unit_dims_at):
            mapped = [inputs[j] for j in order]
            if fills:
                adapter = _with_fills(adapter, fills, mapped, out_shape, task)
                if adapter is None:
                    continue
            if adapter_cost(adapter) > max_cost:
                continue
            try:
                viewed = adapter.inputs(mapped) if adapter is not None else mapped
            except (IndexError, RuntimeError):  # a fill sized from a dim this layout's view does not have
                continue
            if not all(_same_kind(m, t) for m, t in zip(viewed, task_inputs if fills else passed_inputs)):
                continue
            keys = _keys(passed_where, mapped, adapter, probe)
            if keys is None:
                if "outputs differ" not in reason:  # a layout whose outputs were compared says more
                    reason = f"{task.name}: its shape keys are not sizes of the problem"
                continue
            for member in members:
                if _agrees_everywhere(cases, member, order, adapter):
                    constants = next((tuple(m.constants.items()) for m in task.members if m.name == member.member), ())
                    return Match(task.name, tuple(order), keys, member.member, constants, fixed, adapter), ""
            reason = f"{task.name}: outputs differ" + (f" ({len(members)} members)" if task.members else "")
    return None, reason


def _omissions(task: Task, n_problem: int, n_task: int) -> list[tuple[int, ...]]:
    """Which of the task's inputs the problem may leave out: none when the counts agree, else each choice of
    that many among the task's ``FILL_INPUTS`` (empty: the counts cannot be reconciled), the last inputs first.
    A module's state lists optional parts last (a GroupNorm's weight and bias are a BatchNorm's without the
    running statistics); at construction a weight is 1 and a bias 0, the fill values themselves, so the
    numbers cannot tell a GroupNorm's (x, weight, bias) from (x, running_mean, running_var) with the weight and
    bias filled: the first choice tried decides."""
    missing = n_task - n_problem
    if missing == 0:
        return [()]
    if missing < 0 or missing > len(task.fill_inputs):
        return []
    return [tuple(sorted(c)) for c in itertools.combinations(sorted(task.fill_inputs, reverse=True), missing)]


def _fills(
    where: dict[str, list[tuple[int, int]]],
    passed: list[int],
    omitted: tuple[int, ...],
    task: Task,
    task_inputs: list[torch.Tensor],
) -> tuple[Fill, ...] | None:
    """The omitted inputs as constants, each dimension the same key's dimension in a passed input (a bias of
    [C_out] takes the weight's first dimension) or a size of 1 where the task's input has one that is no key (a
    per-channel parameter [C_out, 1, 1, 1]); None when some other dimension is no key of a passed input."""
    fills = []
    for index in omitted:
        dims = []
        for d, size in enumerate(task_inputs[index].shape):
            spot = next(
                (
                    (passed.index(i), j)
                    for spots in where.values()
                    if (index, d) in spots
                    for i, j in spots
                    if i in passed
                ),
                None,
            )
            if spot is None and size != 1:
                return None
            dims.append(spot if spot is not None else (-1, 1))
        fills.append(
            Fill(index, tuple(dims), float(task.fill_inputs[index]), not task_inputs[index].is_floating_point())
        )
    return tuple(fills)


def _with_fills(
    adapter: Adapter | None,
    fills: tuple[Fill, ...],
    mapped: list[torch.Tensor],
    out_shape: tuple[int, ...] | None,
    task: Task,
) -> Adapter | None:
    """``adapter`` (or the identity of the passed inputs) that also creates the omitted inputs."""
    if not all(isinstance(m, torch.Tensor) for m in mapped):
        return None  # a Python number among them: reshapes and fills are of tensors
    if adapter is not None:
        return replace(adapter, filled=fills)
    if out_shape is None:
        return None
    as_it_is = tuple((TASK_OUT, d) for d in range(len(out_shape)))
    filled = Adapter(tuple(tuple((d, d + 1) for d in range(m.dim())) for m in mapped), as_it_is, filled=fills)
    # The task's output of the problem's shape is taken as it is: sizes read off the inputs' hold only where a
    # computed size equals an input's by chance (a 3x5x7 convolution's output depth at the probe equals C_OUT,
    # at no other shape)
    if _task_output_shape(task, filled, mapped) == out_shape:
        return filled
    rule = output_rule(out_shape, mapped)
    return replace(filled, out=rule) if rule is not None else filled


def _task_output_shape(task: Task, adapter: Adapter, mapped: list[torch.Tensor]) -> tuple[int, ...] | None:
    """The task's output shape on meta tensors of this layout; None when it has no single output, reads values
    or cannot take the layout (a fill sized from a dim the view does not have: the caller skips it)."""
    try:
        out = _tensors(task.reference(*adapter.inputs([m.to("meta") for m in mapped])))
    except Exception:  # noqa: BLE001 - a reference meta tensors cannot run: the sizes decide as before
        return None
    return tuple(out[0].shape) if len(out) == 1 else None


# Reshaped layouts are tried for at most this many inputs, and where an argument order has at most
# MAX_LAYOUTS of them: every input's cuts multiply (a 3-D input cut into 4 dims has 35 ways; three of them
# against attention's inputs made 84,000 layouts and a 90 s match).
MAX_ADAPTED_INPUTS = 3
MAX_LAYOUTS = 64


def _layouts(
    inputs: tuple[Any, ...], task_inputs: list[Any], out_shape: tuple[int, ...] | None, unit_dims_at: int | None = None
) -> list[tuple[tuple[int, ...], Adapter | None]]:
    """Argument orders as they are, then (one output, few inputs) the same orders with the task's own unit
    dims (taskdef.Task.unit_dims_at) and with each input's dims cut into the task input's rank; where the
    problem returns a scalar, each of those also with the mean or sum of the task's output (a loss over
    per-row losses)."""
    orders = list(itertools.permutations(range(len(inputs))))
    out: list[tuple[tuple[int, ...], Adapter | None]] = [(o, None) for o in orders]
    # Reshapes are of tensors: with a Python number among the arguments, only the orders.
    if out_shape is None or not all(isinstance(x, torch.Tensor) for x in (*inputs, *task_inputs)):
        return out
    # The task's own unit dims are one layout per order, so they are tried with more inputs too (a 2-D
    # convolution with a bias parameter after it passes x, that parameter, w and b)
    if unit_dims_at is not None:
        out += [
            (o, a)
            for o in orders
            for a in [_unit_dims(unit_dims_at, [inputs[j] for j in o], task_inputs, len(out_shape))]
            if a is not None
        ]
    if len(inputs) > MAX_ADAPTED_INPUTS:
        return out
    reductions = ("", *REDUCTIONS) if out_shape == () else ("",)
    for order in orders:
        mapped = [inputs[j] for j in order]
        rule = output_rule(out_shape, mapped)
        # An input of the task's rank is taken as it is: only a rank that differs is cut.
        # (a task's 0-d input takes no other rank: no cuts)
        choices = [
            [tuple((d, d + 1) for d in range(m.dim()))]
            if m.dim() == t.dim()
            else list(cuts(m.dim(), t.dim()))
            if t.dim()
            else []
            for m, t in zip(mapped, task_inputs)
        ]
        count = 1
        for c in choices:
            count *= len(c)
        if rule is None or count > MAX_LAYOUTS:
            # Output sizes the task computes (a pooling's length), or too many cuts (a 4-D input into 5 dims has
            # 70): the inputs with unit dims inserted, the output read off the task's (match_adapters.unit_layouts),
            # at most C(5, 3) = 10 ways for one 3-D input.
            units = unit_layouts(out_shape, mapped, task_inputs)
            if len(units) <= MAX_LAYOUTS:
                out += [(order, Adapter(groups, unit_rule(groups[0]))) for groups in units]
            continue
        for groups in itertools.product(*choices):
            identity = all(len(g) == m.dim() and all(b - a == 1 for a, b in g) for g, m in zip(groups, mapped))
            # The identity without a reduction: already tried without an adapter.
            out += [(order, Adapter(tuple(groups), rule, r)) for r in reductions if r or not identity]
            if identity:  # transposed views of the inputs as they are (a GEMM's A.T or B.T), not of reshapes
                out += [
                    (order, Adapter(tuple(groups), rule, r, flags))
                    for flags in _transposes(mapped, task_inputs)
                    for r in reductions
                ]
    return out


def _unit_dims(at: int, mapped: list[torch.Tensor], task_inputs: list[torch.Tensor], out_rank: int) -> Adapter | None:
    """The adapter inserting size-1 dims at ``at`` into each input of lower rank than the task's, and dropping
    as many from the task's output there (as many as the first input lacks): [N, C, L] is [N, C, 1, 1, L],
    and the task's [N, C', 1, 1, L'] the problem's [N, C', L']. None when no input lacks dims or one cannot."""
    groups: list[tuple[tuple[int, int], ...]] = []
    for m, t in zip(mapped, task_inputs):
        missing = t.dim() - m.dim()
        if missing < 0 or (missing and m.dim() < at):
            return None
        groups.append(
            tuple((d, d + 1) for d in range(at)) * bool(missing)
            + ((at, at),) * missing
            + tuple((d, d + 1) for d in range(at if missing else 0, m.dim()))
        )
    dropped = task_inputs[0].dim() - mapped[0].dim()
    if not any(t.dim() != m.dim() for m, t in zip(mapped, task_inputs)) or out_rank < at:
        return None
    rule = tuple((TASK_OUT, d if d < at else d + dropped) for d in range(out_rank))
    return Adapter(tuple(groups), rule)


def _transposes(mapped: list[torch.Tensor], task_inputs: list[torch.Tensor]) -> list[tuple[bool, ...]]:
    """Every non-empty choice of inputs to transpose among those of the task's rank, 2-D or more."""
    can = [m.dim() == t.dim() >= 2 for m, t in zip(mapped, task_inputs)]
    flags = itertools.product(*[(False, True) if c else (False,) for c in can])
    return [f for f in flags if any(f)]


def _keys(
    where: dict[str, list[tuple[int, int]]], mapped: list[torch.Tensor], adapter: Adapter | None, probe: Shape
) -> dict[str, str | list[str | int]] | None:
    """Each task key as the problem's global (or, through an adapter, the product of globals and literal sizes of
    the dims it groups); None when a key names two different things."""
    by_value = {v: n for n, v in probe.items()}
    keys: dict[str, str | list[str | int]] = {}
    for key, spots in where.items():
        if not spots:
            continue
        found: set[tuple[str | int, ...]] = set()
        for i, j in spots:
            a, b = adapter.group_of(i, j) if adapter is not None else (j, j + 1)
            sizes = [int(mapped[i].shape[d]) for d in range(a, b)]
            found.add(tuple(sorted((by_value.get(s, s) for s in sizes), key=str)))
        if len(found) != 1:
            return None
        parts = list(found.pop())
        if len(parts) == 1 and isinstance(parts[0], str):
            keys[key] = parts[0]
        elif adapter is None and not (len(parts) == 1 and isinstance(parts[0], int)):
            return None
        else:
            # A product of sizes (through an adapter), or one literal size no global sets (98_KLDivLoss's
            # ``input_shape = (8192 * 2,)``): the same in every shape of the problem.
            keys[key] = parts
    return keys


def _cases(problem: Task, probe: Shape) -> list[tuple[tuple[Any, ...], Any]]:
    """The problem's inputs at the probe (seeds, then its adversarial inputs) in float64, each with the problem's
    own output: computed once per problem, compared against every task, layout and member."""
    cases: list[tuple[Any, ...]] = [problem.make_inputs(probe, torch.float32, s, "cpu") for s in SEEDS]
    if problem.adversarial_inputs is not None:
        cases += list(problem.adversarial_inputs(probe, torch.float32, SEEDS[0], "cpu").values())
    return [(args, problem.reference(*args)) for args in map(_double, cases)]


def _oversized(args: tuple[Any, ...], mine: Any, task: Task, order: tuple[int, ...], adapter: Adapter | None) -> bool:
    """Whether the task's output on this layout would be far larger than anything of the problem's, found on meta
    tensors before any is allocated. 98_KLDivLoss's [11, 16384] inputs cut to [11, 16384, 1] and [11, 1, 16384]
    are a batch of outer products to the bmm task: 3e9 float64 elements, 23 GB, where the problem's own tensors
    hold 180k. No such layout computes the problem (its output is reshaped or reduced to the problem's)."""
    tensors = _tensors(list(args)) + _tensors(mine)
    bound = OVERSIZE * max((t.numel() for t in tensors), default=1)
    try:
        meta = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in (args[j] for j in order)]
        out = _tensors(task.reference(*(adapter.inputs(meta) if adapter is not None else meta)))
    except Exception:  # noqa: BLE001 - a reference meta tensors cannot run (it reads values): run it for real
        return False
    return any(t.numel() > bound for t in out)


# A task's output on a layout may hold at most this many times the elements of the problem's largest tensor.
OVERSIZE = 4


def _agrees_everywhere(
    cases: list[tuple[tuple[Any, ...], Any]], task: Task, order: tuple[int, ...], adapter: Adapter | None = None
) -> bool:
    if cases and _oversized(*cases[0], task, order, adapter):
        return False
    for args, mine in cases:
        try:
            ordered = [args[j] for j in order]
            if adapter is None:
                theirs = task.reference(*ordered)
            else:
                out = _tensors(task.reference(*adapter.inputs(ordered)))
                if len(out) != 1:
                    return False
                theirs = adapter.output(out[0], ordered)
        except Exception:  # noqa: BLE001 - the task's reference refuses these inputs: no match
            return False
        if not agree(mine, theirs):
            return False
    return True


def adapter_cost(adapter: Adapter | None) -> int:
    """How far a layout is from the problem's own call: 0 as it is; 1 reshaped, transposed or reduced; 2 with
    inputs the problem does not pass or output sizes only the task knows (filled weights, unit dims)."""
    if adapter is None:
        return 0
    return 2 if adapter.filled or adapter.reads_output else 1


def find_match(problem: Task, tasks: list[Task] | None = None) -> tuple[Match | None, list[str]]:
    """The built-in task computing the problem's function with the fewest adaptations (:func:`adapter_cost`),
    the first in name order among equals, and what was tried (one entry per task).

    A task computing it on the problem's own tensors beats one that needs a reshape: a row scale
    ``s[:, None] * x`` is also a batch of 1 x 1 @ 1 x N products, which the bmm task, tried first, would search at
    K = 1; ``x @ w.T`` is matmul of a transposed view before it is a 1 x 1 convolution with unit dims and a
    filled bias. After a match the later tasks are tried only with cheaper layouts."""
    from warpforge.kernels.task import builtin_task_names, get_task

    probes = [p for p in _problem_probes(problem) if _runs(problem, p)]
    if not probes:
        return None, [_no_probe_reason(problem)]
    failed: list[str] = []
    for probe in probes:
        try:
            cases = _cases(problem, probe)
            break
        except Exception as exc:  # noqa: BLE001 - the problem's code: a network's float64 activations at a probe
            # of distinct primes (batch 11 and up) can outgrow the memory on the later cases where one run fit
            failed.append(f"{shape_key(probe)}: {type(exc).__name__}: {str(exc)[:160]}")
    else:
        return None, [f"its reference did not run on every case at any probe ({'; '.join(failed)})"]
    tried: list[str] = []
    best: Match | None = None
    for task in tasks if tasks is not None else [get_task(n) for n in builtin_task_names()]:
        limit = 2 if best is None else adapter_cost(best.adapter) - 1
        try:
            match, why = _try(problem, task, probe, cases, max_cost=limit)
        except Exception as exc:  # noqa: BLE001 - the problem's code at the probe sizes
            match, why = None, f"{task.name}: {type(exc).__name__}"
        if match is not None and match.adapter is None:
            return match, tried
        if match is not None:
            best = match
            continue
        if best is None:
            tried.append(why)
    return best, tried


def _no_probe_reason(problem: Task) -> str:
    """Why no probe exists: the derivation's own note (kernels/kernelbench.py NOTES) where it left one."""
    from warpforge.kernels.kernelbench import NOTES

    note = NOTES.get(str(problem.path), "")
    if problem.check_shapes == problem.shapes:
        return (
            f"no derived sizes to vary ({note})"
            if note
            else ("no sizes to vary: the problem's get_inputs() reads no size from its module globals")
        )
    return (
        "its code runs at no probe with distinct sizes (distinct primes, or a derived check shape with "
        "colliding sizes moved apart)" + (f"; {note}" if note else "")
    )


def matched_files(problem: Task, match: Match, root: Path) -> tuple[Path, list[Path]]:
    """Write the problem as the matched task's templates see it, and those templates naming the problem.

    Returns (the problem file's copy, the templates): the copy is the problem's bytes followed by the
    shape-key aliases (kernels/kernelbench.py ALIAS_ATTR); each template differs from the shipped one in
    its ``TASK`` line only. Files go under ``root/<hash of both>/`` so a changed problem gets new files.
    """
    source = problem.path.read_text()
    aliases: dict[str, str | int | list[str | int]] = {
        **match.keys,
        **dict(match.fixed),
        ELEM_BYTES: _elem_bytes(problem),
    }
    tail = (
        f"\n\n# Added by warpforge (evaluator/judge/matching.py): computes the built-in task {match.label!r}\n"
        f"{ALIAS_ATTR} = {aliases!r}\n{MATCH_ATTR} = {match.describe()!r}\n"
    )
    templates = template_files(match.task)
    digest = hashlib.sha256((source + tail + "".join(p.read_text() for p in templates)).encode()).hexdigest()[:16]
    folder = root / digest
    (folder / "variants").mkdir(parents=True, exist_ok=True)
    copy = folder / problem.path.name
    copy.write_text(source + tail)
    out: list[Path] = []
    shapes = [match.aliased(s) for s in problem.shapes]
    for p in [t for t in templates if _feasible(t, shapes)]:
        text = p.read_text()
        line = f"TASK = {match.task!r}"
        alt = f'TASK = "{match.task}"'
        if line not in text and alt not in text:
            continue
        adapted = with_constants(text, match.constants)
        if adapted is not None and match.adapter is not None:
            adapted = adapted_template(adapted, match.adapter, len(match.order))
        if adapted is not None and not match.in_order:
            adapted = reordered_template(adapted, match.order)
        if adapted is None:
            continue
        target = folder / "variants" / p.name
        named = f"TASK = {problem.name!r}"
        target.write_text(adapted.replace(line, named, 1).replace(alt, named, 1))
        out.append(target)
    return copy, out


def _elem_bytes(problem: Task) -> int:
    """The element size of the problem's floating inputs (KernelBench problems run in float32), for templates
    whose constraints bound shared memory: a tile of fp32 takes twice the bytes of the fp16 one a built-in
    task's constraints assume, and a configuration that fits in fp16 ends out_of_resources in fp32."""
    return max(torch.empty((), dtype=d).element_size() for d in problem.dtypes)


def _feasible(template: Path, shapes: list[Shape]) -> bool:
    """Whether some configuration of a shipped template satisfies its constraints on every benchmark shape
    (a whole-row softmax cannot take KernelBench's 393216-wide rows). Shipped code, run in this process."""
    import importlib.util

    from warpforge.kernels.variant import load_variant

    variant = load_variant(template)
    if not variant.has_constraints:
        return True
    spec = importlib.util.spec_from_file_location(
        f"warpforge_template_{template.parent.name}_{template.stem}", template
    )
    if spec is None or spec.loader is None:
        return False
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return any(
        all(module.constraints(params, constraint_shape(shape)) for shape in shapes) for params in variant.configs()
    )


def no_match_message(problem: Task, tried: list[str]) -> str:
    """One line: this problem, what was tried, what to do."""
    return (
        f"task {problem.name!r} ({problem.path.name}): no built-in task computes the same function "
        f"(tried {'; '.join(tried)}), so "
        "there are no templates to search: pass --variant-file FILE.py (a Triton variant with TASK = "
        f"{problem.name!r}, or a KernelBench ModelNew file), or let an LLM write them with --proposer llm"
    )
