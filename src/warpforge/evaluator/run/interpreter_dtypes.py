"""Which dtypes of a task the Triton interpreter cannot check: float8.

The interpreter emulates a kernel with numpy, which has no float8; its float8 conversions do not round as
the GPU's do (Triton 3.9: quantising activations to e4m3, values just below a power of two lose an
exponent, 124.7 became 64 where round-to-nearest gives 128; tests/kernels/test_fp8.py). So a task whose
inputs or outputs hold float8 is compiled for the target GPU on the CPU, and its correctness is an honest
``unsupported`` there, never ``ok``.

Example::

    >>> from warpforge.kernels.task import get_task
    >>> fp8_dtypes(get_task("fp8_gemm")), fp8_dtypes(get_task("softmax"))  # doctest: +SKIP
    (['float8_e4m3fn'], [])
"""

from __future__ import annotations

import math
from typing import Any

import torch

from warpforge.kernels.taskdef import Task, dtype_name

FP8 = frozenset({torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz})

_CACHE: dict[str, list[str]] = {}


def _tensors(value: Any) -> list[torch.Tensor]:
    items = value if isinstance(value, (tuple, list)) else (value,)
    return [t for t in items if isinstance(t, torch.Tensor)]


def fp8_dtypes(task: Task) -> list[str]:
    """Names of the float8 dtypes among the task's DTYPES and the inputs and outputs of its smallest check case
    (a quantisation task takes bfloat16 and returns float8: its DTYPES alone do not say)."""
    key = f"{task.name}:{task.source_hash}"
    if key in _CACHE:
        return _CACHE[key]
    found = {d for d in task.dtypes if d in FP8}
    shapes = task.check_shapes or task.small_shapes or task.shapes
    smallest = min(shapes, key=lambda s: math.prod(s.values()) if s else 0)
    try:  # the task's own code, as the evaluator's references run it (compare.py), on the tiniest case
        with torch.no_grad():
            inputs = task.make_inputs(dict(smallest), task.dtypes[0], 0, "cpu")
            outputs = task.reference(*inputs)
        found |= {t.dtype for t in _tensors(inputs) + _tensors(outputs) if t.dtype in FP8}
    except Exception:  # noqa: BLE001 - a broken task fails in the check stage with its own message
        pass
    _CACHE[key] = sorted(dtype_name(d) for d in found)
    return _CACHE[key]
