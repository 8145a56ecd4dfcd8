"""The child's training call: one case of a training check runs ``launch``, ``launch_forward`` and
``launch_backward`` as one observed call (runs in the untrusted child).

The parent sends a training case's inputs with the upstream gradient appended (evaluator/grad_check.py
draws it from a seed this process never sees). Everything check.py wraps around ``launch`` (the operator
recorder, fresh NaN/sentinel allocations, the Triton launch gate, the ghost replay, the shuffled grid
order) wraps all three calls at once, so the backward is held to the forward's rules. The outputs saved
for the judge are ``launch``'s, then ``launch_forward``'s ``out``, then the gradients; ``parts`` says how
many of each, and ``saved_kinds`` what ``saved`` held (the judge accepts plain tensors only).
"""

from __future__ import annotations

from typing import Any

import torch

from warpforge.evaluator.child.common import as_tuple


class TrainingContractError(TypeError):
    """launch_forward did not return ``(out, saved)``."""


def _kind(value: Any) -> str:
    return "Tensor" if type(value) is torch.Tensor else type(value).__name__


def training_call(module: Any, inputs: tuple[Any, ...], params: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """(outputs for the judge, facts): ``launch(*x)``, ``out, saved = launch_forward(*x)``,
    ``grads = launch_backward(grad_out, saved, *x)`` where ``inputs`` is ``(*x, grad_out)``."""
    *args, grad_out = inputs
    infer = as_tuple(module.launch(*args, **params))
    result = module.launch_forward(*args, **params)
    if type(result) is not tuple or len(result) != 2:
        raise TrainingContractError(f"launch_forward returned {_kind(result)}"
                                    f"{f' of {len(result)}' if isinstance(result, tuple) else ''}: it returns "
                                    "(out, saved), saved a tuple of tensors")
    out, saved = result
    saved = tuple(saved) if type(saved) in (tuple, list) else (saved,)
    grads = as_tuple(module.launch_backward(grad_out, saved, *args, **params))
    forward = as_tuple(out)
    facts = {"parts": [len(infer), len(forward), len(grads)], "saved_kinds": [_kind(s) for s in saved]}
    return [*infer, *forward, *grads], facts


def trace_training(module: Any, reference: Any, inputs: tuple[Any, ...], params: dict[str, Any]) -> None:
    """The compile mode's training call on fake tensors (child/compile.py captures the launches): the
    upstream gradient is a tensor like the reference's output."""
    grad_out = torch.empty_like(as_tuple(reference(*inputs))[0])
    result = module.launch_forward(*inputs, **params)
    if type(result) is not tuple or len(result) != 2:
        raise TrainingContractError("launch_forward returns (out, saved), saved a tuple of tensors")
    module.launch_backward(grad_out, result[1], *inputs, **params)
