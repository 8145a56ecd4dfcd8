"""Reshape adapters of the matcher (evaluator/matching.py): a problem whose inputs are a task's inputs with
dimensions merged or split off as 1 (a 4-D tensor normalized over dim 1 is the task's [M, R, N] with
N = dim1 * dim2; a 2-D row reduction is [M, R, 1]; a LayerNorm over three trailing dims is [M, N] with
N = features * dim1 * dim2).

An :class:`Adapter` cuts each problem input's dimensions into contiguous groups, one per dimension of the
task's input (an empty group is a size of 1), and says how the task's output is viewed as the problem's:
each output dimension is a dimension of some input, or a literal size. Both the matcher's comparison and the
generated ``launch`` (:func:`launch_source`, appended to a template whose own entry point is renamed) apply
exactly the same views, so a match is the function the template computes: reshapes and views of contiguous
tensors only, no compute in host code.

Example::

    >>> adapter = Adapter(groups=(((0, 1), (1, 2), (2, 4)),), out=((0, 0), (0, 1), (0, 2), (0, 3)))
    >>> print(launch_source(adapter, 1))  # doctest: +SKIP
    def launch(x0, **params):
        y = _task_launch(x0.reshape(x0.shape[0], x0.shape[1], x0.shape[2] * x0.shape[3]), **params)
        return y.view(x0.shape[0], x0.shape[1], x0.shape[2], x0.shape[3])
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

TASK_LAUNCH = "_task_launch"


@dataclass(frozen=True)
class Adapter:
    """Per problem input (in the task's argument order): its dimension groups as (start, end) ranges; and the
    problem's output dimensions, each (input, dim) of the task-ordered inputs or (-1, literal size)."""

    groups: tuple[tuple[tuple[int, int], ...], ...]
    out: tuple[tuple[int, int], ...]

    def inputs(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return [t.reshape(*[_prod(t.shape[a:b]) for a, b in g]) for t, g in zip(tensors, self.groups)]

    def output(self, y: torch.Tensor, tensors: Sequence[torch.Tensor]) -> torch.Tensor:
        return y.reshape(*[tensors[i].shape[d] if i >= 0 else d for i, d in self.out])

    def describe(self) -> str:
        def one(g: tuple[tuple[int, int], ...]) -> str:
            return "[" + ", ".join("*".join(f"d{d}" for d in range(a, b)) or "1" for a, b in g) + "]"

        return "reshaped " + ", ".join(one(g) for g in self.groups)


def _prod(sizes: Sequence[int]) -> int:
    out = 1
    for s in sizes:
        out *= int(s)
    return out


def cuts(rank: int, parts: int) -> Iterator[tuple[tuple[int, int], ...]]:
    """Every way to cut dims 0..rank into ``parts`` contiguous groups, possibly empty, identity-like first."""
    for bounds in itertools.combinations_with_replacement(range(rank + 1), parts - 1):
        edges = (0, *bounds, rank)
        yield tuple((edges[i], edges[i + 1]) for i in range(parts))


def output_rule(out_shape: Sequence[int], tensors: Sequence[torch.Tensor]) -> tuple[tuple[int, int], ...] | None:
    """Each output size as a dimension of an input (found by its value, sizes being distinct primes), a 1 as
    a literal; None when a size is neither."""
    rule: list[tuple[int, int]] = []
    for size in out_shape:
        spot = next(((i, d) for i, t in enumerate(tensors) for d, s in enumerate(t.shape) if s == size), None)
        if spot is None and size != 1:
            return None
        rule.append(spot if spot is not None and size != 1 else (-1, 1))
    return tuple(rule)


def launch_source(adapter: Adapter, n_inputs: int) -> str:
    """The ``launch`` that views the problem's inputs as the task's, calls the template's own entry point
    (renamed to TASK_LAUNCH) and views its output as the problem's."""
    names = [f"x{i}" for i in range(n_inputs)]

    def dims(name: str, a: int, b: int) -> str:
        return " * ".join(f"{name}.shape[{d}]" for d in range(a, b)) or "1"

    args = [f"{n}.reshape({', '.join(dims(n, a, b) for a, b in g)})" for n, g in zip(names, adapter.groups)]
    out = ", ".join(f"{names[i]}.shape[{d}]" if i >= 0 else str(d) for i, d in adapter.out) or "()"
    return (f"def launch({', '.join(names)}, **params):\n"
            f"    y = {TASK_LAUNCH}({', '.join(args)}, **params)\n"
            f"    return y.view({out})\n")


def adapted_template(text: str, adapter: Adapter, n_inputs: int) -> str | None:
    """The template with its ``def launch(`` renamed and the adapter's launch appended; None without one."""
    marker = "\ndef launch("
    if text.count(marker) != 1 or f"def {TASK_LAUNCH}(" in text:
        return None
    return (text.replace(marker, f"\ndef {TASK_LAUNCH}(", 1).rstrip("\n")
            + "\n\n\n# Added by warpforge (evaluator/match_adapters.py): the problem's inputs as the task's.\n"
            + launch_source(adapter, n_inputs))
