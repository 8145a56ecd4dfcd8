"""Comparison used by the generated tests (written by warpforge export; needs only torch).

The rule is warpforge's own: the kernel's output against the reference run in float64, with the task's
(atol, rtol) for the dtype, atol scaled by the reference's RMS magnitude, plus the error the reference
itself makes in the low-precision dtype, through ``torch.testing.assert_close``.

Example::

    >>> import torch
    >>> assert_matches_reference(torch.ones(3), lambda x: x * 1.0, (torch.ones(3),), 1e-4, 1e-4)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch


def _prefixed(prefix: str) -> Callable[[str], str]:
    """assert_close's ``msg``, bound to this output's name now (a lambda in the loop would see the last one)."""
    return lambda message: f"{prefix}: {message}"


def _upcast(inputs: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs)


def _as_tuple(value: Any) -> tuple[torch.Tensor, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def assert_matches_reference(
    out: Any, reference: Callable[..., Any], inputs: Sequence[Any], atol: float, rtol: float
) -> None:
    outs = _as_tuple(out)
    ref64 = _as_tuple(reference(*_upcast(inputs)))
    lowp = _as_tuple(reference(*inputs))
    assert len(outs) == len(ref64), f"{len(outs)} outputs, the reference returns {len(ref64)}"
    for i, (o, r, rl) in enumerate(zip(outs, ref64, lowp)):
        assert o.shape == rl.shape and o.dtype == rl.dtype, (
            f"output {i}: {tuple(o.shape)} {o.dtype}, reference {tuple(rl.shape)} {rl.dtype}"
        )
        if not o.is_floating_point():
            torch.testing.assert_close(o, rl, atol=0, rtol=0)
            continue
        r = r.to(o.device).double()  # an fp8 output (a quantizing task's) has no isfinite or arithmetic of its own
        finite = torch.isfinite(r)
        scale = float(r[finite].pow(2).mean().sqrt()) if bool(finite.any()) else 1.0
        own = float((rl.double().to(o.device) - r)[finite].abs().max()) if bool(finite.any()) else 0.0
        torch.testing.assert_close(
            o.double(),
            r,
            atol=atol * max(scale, 1e-12) + own,
            rtol=rtol,
            equal_nan=True,
            msg=_prefixed(f"output {i} differs from the reference"),
        )


def _reference_grads(
    reference: Callable[..., Any], inputs: Sequence[Any], grad_inputs: Sequence[int], grad_out: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    leaves = [
        x.detach().clone().requires_grad_(i in grad_inputs) if isinstance(x, torch.Tensor) else x
        for i, x in enumerate(inputs)
    ]
    out = _as_tuple(reference(*leaves))[0]
    grads = torch.autograd.grad(out, [leaves[i] for i in grad_inputs], grad_out.to(out.dtype), allow_unused=True)
    return tuple(torch.zeros_like(leaves[i]) if g is None else g for i, g in zip(grad_inputs, grads))


def assert_grads_match_reference(
    grads: Sequence[torch.Tensor],
    reference: Callable[..., Any],
    inputs: Sequence[Any],
    grad_inputs: Sequence[int],
    grad_out: torch.Tensor,
    atol: float,
    rtol: float,
) -> None:
    """Gradients against torch autograd of the reference in float64, by the rule above: atol scaled by the true
    gradient's RMS, plus the error torch's own autograd of the reference makes in the inputs' dtype."""
    cpu = [x.detach().cpu() if isinstance(x, torch.Tensor) else x for x in inputs]
    truth = _reference_grads(reference, _upcast(cpu), grad_inputs, grad_out.detach().cpu().double())
    lowp = _reference_grads(reference, cpu, grad_inputs, grad_out.detach().cpu())
    assert len(grads) == len(grad_inputs), f"{len(grads)} gradients for {len(grad_inputs)} trained inputs"
    for i, g, t, tl in zip(grad_inputs, grads, truth, lowp):
        assert g.shape == cpu[i].shape and g.dtype == cpu[i].dtype, (
            f"gradient of input {i}: {tuple(g.shape)} {g.dtype}, input {tuple(cpu[i].shape)} {cpu[i].dtype}"
        )
        finite = torch.isfinite(t)
        scale = float(t[finite].pow(2).mean().sqrt()) if bool(finite.any()) else 1.0
        own = float((tl.double() - t)[finite].abs().max()) if bool(finite.any()) else 0.0
        where = f"gradient of input {i} differs"
        torch.testing.assert_close(
            g.detach().cpu().double(),
            t,
            atol=atol * max(scale, 1e-12) + own,
            rtol=rtol,
            equal_nan=True,
            msg=_prefixed(where),
        )
