"""The child's training call: one case of a training check runs ``launch``, ``launch_forward`` and
``launch_backward`` as one observed call (runs in the untrusted child).

The parent sends a training case's inputs with the upstream gradient appended (evaluator/judge/gradients.py
draws it from a seed this process never sees). Everything check.py wraps around ``launch`` (the operator
recorder, fresh NaN/sentinel allocations, the Triton launch gate, the ghost replay, the shuffled grid
order) wraps all three calls at once, so the backward is held to the forward's rules. The outputs saved
for the judge are ``launch``'s, then ``launch_forward``'s ``out``, then the gradients; ``parts`` says how
many of each, and ``saved_kinds`` what ``saved`` held (the judge accepts plain tensors only).
"""

from __future__ import annotations

from typing import Any

import torch

from warpforge.evaluator.sandbox.child.common import as_tuple


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
        raise TrainingContractError(
            f"launch_forward returned {_kind(result)}"
            f"{f' of {len(result)}' if isinstance(result, tuple) else ''}: it returns "
            "(out, saved), saved a tuple of tensors"
        )
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


def upstream_gradient(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    """The upstream gradient of a seed: standard normal in fp32, then the output's dtype (on the CPU). The
    trusted side draws the same from the same seed (gradients.draw_grad_out) to recheck timed calls."""
    gen = torch.Generator().manual_seed(int(seed))
    return torch.randn(tuple(shape), generator=gen, dtype=torch.float32).to(dtype)


def timed_training(
    timer: Any, module: Any, work: tuple[Any, ...], grad_out: torch.Tensor, params: dict[str, Any]
) -> tuple[float, float, float, list[Any]]:
    """One timed training call (child/bench.py): (forward ms, backward ms, pending ms, outputs), the forward
    and the backward each timed alone (each after the timer's L2 flush), outputs = out then the gradients."""
    t_f, p_f, result = timer.time(lambda: module.launch_forward(*work, **params))
    if type(result) is not tuple or len(result) != 2:
        raise TrainingContractError("launch_forward returns (out, saved), saved a tuple of tensors")
    out, saved = result
    saved = tuple(saved) if type(saved) in (tuple, list) else (saved,)
    t_b, p_b, grads = timer.time(lambda: module.launch_backward(grad_out, saved, *work, **params))
    return t_f, t_b, p_f + p_b, [*as_tuple(out), *as_tuple(grads)]


def timed_reference(
    timer: Any, reference: Any, inputs: tuple[Any, ...], grad_inputs: tuple[int, ...], grad_out: torch.Tensor
) -> tuple[float, float]:
    """The reference timed the same way: torch's forward (recording the graph) and autograd's backward."""
    leaves = [
        x.detach().requires_grad_(i in grad_inputs) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
        for i, x in enumerate(inputs)
    ]
    with torch.enable_grad():
        t_f, _, out = timer.time(lambda: as_tuple(reference(*leaves))[0])
        t_b, _, _ = timer.time(lambda: torch.autograd.backward(out, grad_out))
    return t_f, t_b


def forward_backward(module: Any, work: tuple[Any, ...], grad_out: torch.Tensor, params: dict[str, Any]) -> None:
    """launch_forward then launch_backward, untimed (warm-up and the wall-clock block of child/bench.py)."""
    result = module.launch_forward(*work, **params)
    if type(result) is not tuple or len(result) != 2:
        raise TrainingContractError("launch_forward returns (out, saved), saved a tuple of tensors")
    saved = tuple(result[1]) if type(result[1]) in (tuple, list) else (result[1],)
    module.launch_backward(grad_out, saved, *work, **params)
