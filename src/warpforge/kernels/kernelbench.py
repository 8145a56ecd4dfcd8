"""KernelBench-style task files (``class Model(nn.Module)``, ``get_inputs()``, ``get_init_inputs()``) as tasks.

The model is built once per dtype with a fixed seed (its weights are part of the problem); inputs come
from ``get_inputs()`` under ``torch.manual_seed(seed)``, cast to the task dtype. KernelBench fixes one
shape per problem, so SHAPES and CHECK_SHAPES hold that shape; flops are counted from the reference
with ``torch.utils.flop_counter`` and bytes are the inputs read once plus the outputs written once.

Example::

    >>> from warpforge.kernels.task import load_task_file
    >>> task = load_task_file("level1/19_ReLU.py")  # doctest: +SKIP
"""

from __future__ import annotations

from functools import lru_cache
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

    @lru_cache(maxsize=4)
    def model_for(dtype: torch.dtype) -> torch.nn.Module:
        torch.manual_seed(0)
        model = module.Model(*init).eval()
        return model.to(dtype) if dtype.is_floating_point else model

    def reference(*inputs: Any) -> Any:
        floats = [t.dtype for t in _tensors(inputs) if t.is_floating_point()]
        model = model_for(floats[0] if floats else torch.float32)
        with torch.no_grad():
            return model.to(_tensors(inputs)[0].device)(*inputs) if _tensors(inputs) else model(*inputs)

    def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[Any, ...]:
        torch.manual_seed(seed)
        values = list(module.get_inputs())
        return tuple(v.to(dtype).to(device) if isinstance(v, torch.Tensor) and v.is_floating_point()
                     else (v.to(device) if isinstance(v, torch.Tensor) else v) for v in values)

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
                dtypes=[torch.float32], flops=flops, bytes_moved=bytes_moved, builtin=False)
