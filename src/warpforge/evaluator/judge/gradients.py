"""Gradients on the trusted side: the upstream gradient a training check sends, and the reference gradients.

A training variant (kernels/variant.py ``has_backward``) of a task with ``GRAD_INPUTS`` is checked as
``out, saved = launch_forward(*inputs)`` then ``grads = launch_backward(grad_out, saved, *inputs)``
(child/backward.py). ``grad_out`` is drawn here from the case's seed stream, which the child never sees,
like the inputs; the truth is the task's reference differentiated by torch autograd in float64, and the
reference run in the case's dtype gives the rounding torch itself makes (compare.compare_outputs allows it),
exactly as for outputs.

Example::

    >>> import torch
    >>> x = torch.randn(3, 4, dtype=torch.float32)
    >>> g = torch.ones(3, 4)
    >>> r64, rlp = grad_references(lambda t: t * t, (x,), (0,), g)
    >>> torch.allclose(r64[0], 2 * x.double())
    True
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Sequence
from typing import cast

import torch

from warpforge.evaluator.judge.compare import (
    References,
    as_tuple,
    compare_with_spread,
    forward_references,
    references,
    upcast,
)
from warpforge.evaluator.judge.judge import CheckPlan
from warpforge.evaluator.sandbox.child.backward import upstream_gradient
from warpforge.kernels.taskdef import Task


def draw_grad_out(reference: Callable[..., object], inputs: Sequence[object], seed: int) -> torch.Tensor:
    """A standard-normal upstream gradient shaped and typed like the reference's (single) output.

    Random, not ones: with ones a backward that ignored grad_out (or summed it away) would still pass.
    """
    with torch.no_grad():
        out = as_tuple(reference(*(x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs)))[0]
    return upstream_gradient(tuple(out.shape), out.dtype, seed)


def _autograd(
    reference: Callable[..., object], inputs: Sequence[object], grad_inputs: Sequence[int], grad_out: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    leaves = [
        x.detach().clone().requires_grad_(i in grad_inputs)
        if isinstance(x, torch.Tensor) and x.is_floating_point()
        else x
        for i, x in enumerate(inputs)
    ]
    with torch.enable_grad():
        out = as_tuple(reference(*leaves))[0]
        wanted = [cast(torch.Tensor, leaves[i]) for i in grad_inputs]
        grads = torch.autograd.grad(out, wanted, grad_out.to(out.dtype), allow_unused=True)
    return tuple(
        torch.zeros_like(w) if g is None else g.detach()  # type: ignore[union-attr]
        for g, w in zip(grads, wanted)
    )


def grad_references(
    reference: Callable[..., object],
    inputs: Sequence[object],
    grad_inputs: Sequence[int],
    grad_out: torch.Tensor,
    device: str = "cpu",
) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """(float64 gradients, gradients in the inputs' dtypes), one per ``grad_inputs`` entry, on the CPU."""
    moved = tuple(x.detach().clone().to(device) if isinstance(x, torch.Tensor) else x for x in inputs)
    g = grad_out.to(device)
    lowp = _autograd(reference, moved, grad_inputs, g)
    r64 = _autograd(reference, upcast(moved), grad_inputs, g.double())
    return tuple(t.cpu() for t in r64), tuple(t.cpu() for t in lowp)


def gradient_of(
    reference: Callable[..., object], grad_inputs: Sequence[int], grad_out: torch.Tensor, j: int, device: str = "cpu"
) -> References:
    """Gradient ``j``'s references on given inputs: what compare.compare_with_spread resamples."""

    def refs(inputs: Sequence[object]) -> tuple[tuple[torch.Tensor], tuple[torch.Tensor]]:
        g64, glp = grad_references(reference, inputs, grad_inputs, grad_out, device)
        return (g64[j],), (glp[j],)

    return refs


def grad_floors(task: Task, inputs: Sequence[object], grad_out: torch.Tensor) -> tuple[float, ...]:
    """Per gradient, the least magnitude its atol is scaled by: the task's ``grad_scales`` (taskdef.Task) on
    the float64 inputs and upstream gradient, else 0 (the gradient's own RMS decides)."""
    if task.grad_scales is None:
        return (0.0,) * len(task.grad_inputs)
    wide = upcast(tuple(x.detach().cpu() if isinstance(x, torch.Tensor) else x for x in inputs))
    return tuple(float(v) for v in task.grad_scales(*wide, grad_out.detach().cpu().double()))


def add_grad_outs(plan: CheckPlan, task: Task, rng: random.Random) -> None:
    """An upstream gradient for every case of ``plan``, from the judge's RNG (the child never sees it)."""
    for case in plan.cases:
        case.grad_seed = rng.getrandbits(31)  # in the case's label: a failing verdict replays
        plan.grad_outs[case.id] = draw_grad_out(task.reference, case.inputs, case.grad_seed)


def input_names(task: Task) -> list[str]:
    """The names of a task's positional inputs: the reference's parameters, then the module's state."""
    try:
        params = list(inspect.signature(task.reference).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return names + list(task.param_names)


def recheck_training(
    task: Task,
    inputs: Sequence[object],
    outs: Sequence[torch.Tensor],
    dtype: torch.dtype,
    grad_seed: int,
    device: str = "cpu",
) -> str | None:
    """A timed training call's saved outputs (out, then the gradients) against the float64 references of
    exactly that call's inputs and upstream gradient (evaluator/run/timing.py); None when right."""
    r64, rlp = references(task.reference, inputs, device)
    k = len(r64)
    if len(outs) != k + len(task.grad_inputs):
        return f"{len(outs)} outputs, expected {k} and {len(task.grad_inputs)} gradients"
    found = compare_with_spread(
        outs[:k], r64, rlp, *task.tolerance(dtype), forward_references(task.reference, device), inputs, grad_seed
    )
    if found is not None:
        return f"launch_forward: {found.message}"
    grad_out = draw_grad_out(task.reference, inputs, grad_seed)
    g64, glp = grad_references(task.reference, inputs, task.grad_inputs, grad_out, device)
    names = input_names(task)
    floors = grad_floors(task, inputs, grad_out)
    for j, index in enumerate(task.grad_inputs):
        found = compare_with_spread(
            [outs[k + j]],
            [g64[j]],
            [glp[j]],
            *task.grad_tolerance(dtype),
            gradient_of(task.reference, task.grad_inputs, grad_out, j, device),
            inputs,
            grad_seed,
            floors[j],
        )
        if found is not None:
            name = f" ({names[index]})" if index < len(names) else ""
            return f"grad of input {index}{name}: {found.message.removeprefix('output 0: ')}"
    return None
