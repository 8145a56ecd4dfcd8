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

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from warpforge.evaluator.compare import as_tuple, upcast


@dataclass(frozen=True)
class TrainingCase:
    """What a training check adds to a case: the upstream gradient (the output's shape and dtype)."""

    grad_out: torch.Tensor


def draw_grad_out(reference: Callable[..., object], inputs: Sequence[object], seed: int) -> torch.Tensor:
    """A standard-normal upstream gradient shaped and typed like the reference's (single) output.

    Random, not ones: with ones a backward that ignored grad_out (or summed it away) would still pass.
    """
    with torch.no_grad():
        out = as_tuple(reference(*(x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs)))[0]
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(tuple(out.shape), generator=gen, dtype=torch.float32).to(out.dtype)


def _autograd(reference: Callable[..., object], inputs: Sequence[object], grad_inputs: Sequence[int],
              grad_out: torch.Tensor) -> tuple[torch.Tensor, ...]:
    leaves = [x.detach().clone().requires_grad_(i in grad_inputs) if isinstance(x, torch.Tensor)
              and x.is_floating_point() else x for i, x in enumerate(inputs)]
    with torch.enable_grad():
        out = as_tuple(reference(*leaves))[0]
        wanted = [leaves[i] for i in grad_inputs]
        grads = torch.autograd.grad(out, wanted, grad_out.to(out.dtype), allow_unused=True)
    return tuple(torch.zeros_like(w) if g is None else g.detach()  # type: ignore[union-attr]
                 for g, w in zip(grads, wanted))


def grad_references(reference: Callable[..., object], inputs: Sequence[object], grad_inputs: Sequence[int],
                    grad_out: torch.Tensor, device: str = "cpu"
                    ) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """(float64 gradients, gradients in the inputs' dtypes), one per ``grad_inputs`` entry, on the CPU."""
    moved = tuple(x.detach().clone().to(device) if isinstance(x, torch.Tensor) else x for x in inputs)
    g = grad_out.to(device)
    lowp = _autograd(reference, moved, grad_inputs, g)
    r64 = _autograd(reference, upcast(moved), grad_inputs, g.double())
    return tuple(t.cpu() for t in r64), tuple(t.cpu() for t in lowp)


def grad_label(task_param_names: Sequence[str], signature: Sequence[str], index: int) -> str:
    """``input 1 (w)``: the position of a gradient's input and, where known, its name."""
    names = list(signature) + list(task_param_names)
    return f"input {index} ({names[index]})" if index < len(names) and names[index] else f"input {index}"
