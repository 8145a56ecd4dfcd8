"""KernelBench-style task files (``class Model(nn.Module)``, ``get_inputs()``, ``get_init_inputs()``) as tasks.

Weights reach the variant: a case is ``get_inputs()`` followed by the model's state (its ``state_dict``,
parameters and persistent buffers, in that order; ``Task.param_names`` names them), all drawn under
``torch.manual_seed(seed)`` (the model is built first, then the inputs), floating tensors cast to the
task dtype. The reference runs the model with exactly those tensors (``torch.func.functional_call``), so
a kernel variant receives ``launch(*inputs, *state)`` and a ``ModelNew`` variant has that state loaded.
KernelBench fixes one shape per problem, so SHAPES and CHECK_SHAPES hold that shape; flops are counted
from the reference with ``torch.utils.flop_counter`` and bytes are the inputs read once plus the outputs
written once.

Example::

    >>> from warpforge.kernels.task import load_task_file
    >>> task = load_task_file("level1/19_ReLU.py")  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from warpforge.kernels.taskdef import Task, TaskError


def _tensors(values: Any) -> list[torch.Tensor]:
    return [v for v in (values if isinstance(values, (list, tuple)) else [values]) if isinstance(v, torch.Tensor)]


def kernelbench_task(module: ModuleType, path: Path) -> Task:
    """Adapt a KernelBench module to the task contract."""
    try:
        sample = list(module.get_inputs())
        init = list(module.get_init_inputs())
    except Exception as exc:  # noqa: BLE001 - user file
        raise TaskError(f"{path}: get_inputs()/get_init_inputs() failed: {type(exc).__name__}: {exc}") from exc
    shape = {f"x{i}_d{j}": int(d) for i, t in enumerate(_tensors(sample)) for j, d in enumerate(t.shape)}
    try:
        torch.manual_seed(0)
        skeleton = module.Model(*init).eval()
    except Exception as exc:  # noqa: BLE001 - user file
        raise TaskError(f"{path}: Model(*get_init_inputs()) failed: {type(exc).__name__}: {exc}") from exc
    param_names = tuple(skeleton.state_dict())
    n_params = len(param_names)

    def cast(v: Any, dtype: torch.dtype, device: str) -> Any:
        if not isinstance(v, torch.Tensor):
            return v
        return v.to(dtype=dtype, device=device) if v.is_floating_point() else v.to(device)

    def reference(*inputs: Any) -> Any:
        split = len(inputs) - n_params
        args, state = inputs[:split], dict(zip(param_names, inputs[split:]))
        with torch.no_grad():
            return torch.func.functional_call(skeleton, state, tuple(args))

    def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[Any, ...]:
        torch.manual_seed(seed)
        state = list(module.Model(*init).state_dict().values()) if n_params else []
        values = list(module.get_inputs())
        return tuple(cast(v, dtype, device) for v in values + state)

    def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
        from torch.utils.flop_counter import FlopCounterMode

        inputs = make_inputs(shape, dtype, 0, "cpu")
        counter = FlopCounterMode(display=False)
        with counter:
            reference(*inputs)
        return float(counter.get_total_flops())

    def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
        inputs = make_inputs(shape, dtype, 0, "cpu")
        outputs = _tensors(reference(*inputs))
        return float(sum(t.numel() * t.element_size() for t in _tensors(inputs) + outputs))

    doc = (module.__doc__ or module.Model.__doc__ or "").strip().splitlines()
    return Task(name=path.stem, description=doc[0] if doc else f"KernelBench problem {path.stem}", path=path,
                reference=reference, make_inputs=make_inputs, shapes=[shape], check_shapes=[shape],
                dtypes=[torch.float32], flops=flops, bytes_moved=bytes_moved, builtin=False,
                param_names=param_names, init_inputs=lambda shape: tuple(init))
