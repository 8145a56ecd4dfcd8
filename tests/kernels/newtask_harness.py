"""Shared helpers of the kernel tests (the training and low-precision tasks', the chains', the older tasks'):
load a template, run it under the interpreter with NaN-filled allocations, and compare
its outputs and gradients with the task's reference differentiated by torch autograd in float64."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch

from warpforge.kernels.targets import constraint_shape
from warpforge.kernels.taskdef import Task
from warpforge.kernels.variant import Variant

# Without a GPU the kernels run on CPU tensors under TRITON_INTERPRET=1 (tests/conftest.py).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def load(variant: Variant) -> ModuleType:
    assert variant.path is not None
    spec = importlib.util.spec_from_file_location(f"wf_test_{variant.task}_{variant.name}", variant.path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def valid_configs(variant: Variant, module: ModuleType, *shapes: dict[str, int]) -> list[dict[str, Any]]:
    """The variant's configurations its constraints() accept at every one of ``shapes``."""
    check = getattr(module, "constraints", None)
    return [c for c in variant.configs() if check is None or all(check(c, constraint_shape(shape)) for shape in shapes)]


def representative(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """First, middle and last feasible configurations (the interpreter cannot afford them all)."""
    picks = [configs[0], configs[len(configs) // 2], configs[-1]]
    return [c for i, c in enumerate(picks) if c not in picks[:i]]


@contextmanager
def nan_allocations() -> Iterator[None]:
    """Fresh float allocations come back NaN-filled, as in the evaluator, so unwritten output shows up."""
    empty, empty_like = torch.empty, torch.empty_like

    def nan_empty(*args: Any, **kwargs: Any) -> torch.Tensor:
        t = empty(*args, **kwargs)
        return t.fill_(float("nan")) if t.is_floating_point() else t

    def nan_empty_like(*args: Any, **kwargs: Any) -> torch.Tensor:
        t = empty_like(*args, **kwargs)
        return t.fill_(float("nan")) if t.is_floating_point() else t

    torch.empty, torch.empty_like = nan_empty, nan_empty_like  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.empty, torch.empty_like = empty, empty_like  # type: ignore[assignment]


def assert_close(out: torch.Tensor, ref64: torch.Tensor, tol: tuple[float, float], where: str) -> None:
    """The evaluator's rule (compare.py): atol scaled by the reference's RMS, plus rtol."""
    atol, rtol = tol
    assert out.shape == ref64.shape, f"{where}: shape {tuple(out.shape)} != {tuple(ref64.shape)}"
    assert torch.isfinite(out.double()).all(), f"{where}: non-finite output"
    scale = max(ref64.double().pow(2).mean().sqrt().item(), 1e-12)
    torch.testing.assert_close(
        out.double(), ref64.double(), atol=atol * scale, rtol=rtol, check_dtype=False, msg=lambda m: f"{where}: {m}"
    )


def autograd64(
    task: Task, inputs: Sequence[Any], grad_out: torch.Tensor, **kwargs: Any
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """The ground truth: the reference on float64 inputs, differentiated by torch autograd."""
    leaves = [
        x.detach().double().requires_grad_(i in task.grad_inputs) if x.is_floating_point() else x
        for i, x in enumerate(inputs)
    ]
    out = task.reference(*leaves, **kwargs)
    grads = torch.autograd.grad(out, [leaves[i] for i in task.grad_inputs], grad_out.double())
    return out.detach(), tuple(grads)


def check_training(
    task: Task,
    module: ModuleType,
    params: dict[str, Any],
    inputs: Sequence[Any],
    dtype: torch.dtype,
    seed: int,
    where: str,
    **kwargs: Any,
) -> None:
    """launch, launch_forward and launch_backward against autograd in float64, inputs left unchanged.
    ``kwargs`` (attention's ``causal``) go to the reference and to every launcher."""
    before = [t.clone() for t in inputs]
    with nan_allocations():
        out = module.launch(*inputs, **kwargs, **params)
        out_f, saved = module.launch_forward(*inputs, **kwargs, **params)
    gen = torch.Generator().manual_seed(seed + 1000)
    grad_out = torch.randn(out.shape, generator=gen).to(dtype=out.dtype, device=out.device)
    ref, grads64 = autograd64(task, inputs, grad_out, **kwargs)
    assert out.dtype == task.reference(*inputs, **kwargs).dtype, where
    assert_close(out, ref, task.tolerance(dtype), f"{where} launch")
    assert_close(out_f, ref, task.tolerance(dtype), f"{where} launch_forward")
    assert isinstance(saved, tuple), where
    with nan_allocations():
        grads = module.launch_backward(grad_out, saved, *inputs, **kwargs, **params)
    assert isinstance(grads, tuple) and len(grads) == len(task.grad_inputs), where
    for i, g, g64 in zip(task.grad_inputs, grads, grads64):
        assert g.dtype == inputs[i].dtype, f"{where} grad {i} dtype {g.dtype}"
        assert_close(g, g64, task.grad_tolerance(dtype), f"{where} grad of input {i}")
    assert all(torch.equal(t, b) for t, b in zip(inputs, before)), f"{where}: an input was modified"


def module_from(source: str, name: str) -> ModuleType:
    """Import a (deliberately altered) template source; Triton reads a kernel's source from its file, so the
    file stays for the module's lifetime."""
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"wf_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
