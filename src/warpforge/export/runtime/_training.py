"""Autograd helpers for the exported training ops (written by warpforge export; needs only torch).

A training op is two custom ops: ``<op>_fwd(*inputs) -> (out, *saved)`` runs the variant's
``launch_forward`` and ``<op>_bwd(grad_out, *saved, *inputs) -> grads`` its ``launch_backward`` (one gradient
per trained input). The helpers here serve the paths that do not run a kernel:

- :func:`saved_like`: the shapes and dtypes of what ``launch_forward`` saves, read by running its host code on
  ``meta`` tensors with every kernel launch turned into a no-op (no data is touched), so the fake
  implementations and the reference fallback return exactly the tensors the kernel path returns;
- :func:`reference_grads`: the gradients of the task's PyTorch reference (``torch.func.vjp``), the CPU (and
  no-fitting-configuration) backward where autograd calls it, which torch.compile traces;
- :func:`reference_grads_eager`: the same inside the backward op's CPU kernel. That kernel runs below PyTorch's
  autograd dispatch, where autograd records nothing, and under opcheck's dispatch modes, which functorch's
  wrapper tensors do not pass; a fresh thread starts with neither, so the reference is differentiated there.

Example::

    >>> import torch
    >>> x = torch.tensor([1.0, 2.0])
    >>> reference_grads(lambda t: t * t, (0,), torch.ones(2), (x,))
    (tensor([2., 4.]),)
    >>> reference_grads_eager(lambda t: t * t, (0,), torch.ones(2), (x,))
    (tensor([2., 4.]),)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any

import torch

_lock = threading.Lock()
_state = threading.local()


class _NoLaunch:
    """Stands in for ``wrap_triton(kernel)``: ``kernel[grid](...)`` does nothing."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return lambda *args, **kwargs: None


def _switch(real: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def wrap_triton(kernel: Any) -> Any:
        return _NoLaunch(kernel) if getattr(_state, "no_launch", False) else real(kernel)

    wrap_triton.no_launch_switch = True  # type: ignore[attr-defined]
    return wrap_triton


@contextlib.contextmanager
def _no_launch(kernel_module: ModuleType) -> Iterator[None]:
    # The launcher calls its kernels through the module's global wrap_triton (export rewrites every
    # ``kernel[grid](...)`` so). That global becomes, once, a switch on a thread-local flag: launches are no-ops
    # only in the thread reading shapes, never in a concurrent real call.
    with _lock:
        real = getattr(kernel_module, "wrap_triton")  # noqa: B009 - set by export's rewrite, unknown to mypy
        if not getattr(real, "no_launch_switch", False):
            setattr(kernel_module, "wrap_triton", _switch(real))  # noqa: B010
    _state.no_launch = True
    try:
        yield
    finally:
        _state.no_launch = False


def _meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    return value


def saved_like(
    kernel_module: ModuleType, inputs: Sequence[Any], params: dict[str, Any], device: torch.device
) -> tuple[torch.Tensor, ...]:
    """Zero tensors shaped and typed as ``launch_forward(*inputs, **params)`` saves them, on ``device``."""
    with _no_launch(kernel_module):
        _, saved = kernel_module.launch_forward(*(_meta(v) for v in inputs), **params)
    # zeros, not empty: the reference path returns these, and opcheck compares outputs of repeated calls
    return tuple(torch.zeros(s.shape, dtype=s.dtype, device=device) for s in saved)


def reference_grads(
    reference: Callable[..., Any], grad_inputs: Sequence[int], grad_out: torch.Tensor, inputs: Sequence[Any]
) -> tuple[torch.Tensor, ...]:
    """Gradients of ``reference`` at ``inputs`` for ``grad_out``, one per ``grad_inputs`` entry."""

    def trained(*values: torch.Tensor) -> torch.Tensor:
        args = list(inputs)
        for i, v in zip(grad_inputs, values):
            args[i] = v
        out = reference(*args)
        return out[0] if isinstance(out, (tuple, list)) else out

    out, vjp = torch.func.vjp(trained, *(inputs[i] for i in grad_inputs))  # type: ignore[misc]
    grads = vjp(grad_out.to(out.dtype))
    return tuple(g.detach().to(inputs[i].dtype).contiguous() for i, g in zip(grad_inputs, grads))


def _autograd(
    reference: Callable[..., Any], grad_inputs: Sequence[int], grad_out: torch.Tensor, inputs: Sequence[Any]
) -> tuple[torch.Tensor, ...]:
    leaves = [v.detach().requires_grad_(True) if i in grad_inputs else v for i, v in enumerate(inputs)]
    with torch.enable_grad():
        out = reference(*leaves)
        out = out[0] if isinstance(out, (tuple, list)) else out
        grads = torch.autograd.grad(out, [leaves[i] for i in grad_inputs], grad_out.to(out.dtype), allow_unused=True)
    return tuple(
        torch.zeros_like(inputs[i]) if g is None else g.detach().to(inputs[i].dtype).contiguous()
        for i, g in zip(grad_inputs, grads)
    )


def reference_grads_eager(
    reference: Callable[..., Any], grad_inputs: Sequence[int], grad_out: torch.Tensor, inputs: Sequence[Any]
) -> tuple[torch.Tensor, ...]:
    """As :func:`reference_grads`, for a kernel implementation (runs torch autograd in a fresh thread)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_autograd, reference, grad_inputs, grad_out, inputs).result()


def unaliased(out: torch.Tensor, saved: Sequence[torch.Tensor], inputs: Sequence[Any]) -> tuple[torch.Tensor, ...]:
    """``saved`` with a copy of each tensor that is the output, an input or an earlier saved tensor: a custom op's
    outputs may alias nothing (attention's ``launch_forward`` saves its own output). Identity, not data
    pointers, so the check also holds while torch.compile traces the op with fake tensors."""
    seen: list[Any] = [out, *inputs]
    fixed = []
    for s in saved:
        fixed.append(s.clone() if any(s is t for t in seen) else s)
        seen.append(s)
    return tuple(fixed)
