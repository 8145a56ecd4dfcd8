"""What the trusted side tells a child about a ``ModelNew`` variant (evaluator/sandbox/child/model_new.py).

The request carries ``model_new = {"param_names": [...]}`` (the reference's state names, the trailing
inputs of every case) and each case its ``init``: the task's init inputs for that case's shape, as JSON
(KernelBench's ``get_init_inputs()`` are plain values: ints, floats, tuples of them).

Example::

    >>> model_new_request(task)                     # doctest: +SKIP
    {'param_names': ['gemm.weight', 'gemm.bias']}
    >>> case_init(task, {"x0_d0": 8, "x0_d1": 16})  # doctest: +SKIP
    [16, 12]
"""

from __future__ import annotations

import json
from typing import Any

from warpforge.kernels.taskdef import Shape, Task, TaskError
from warpforge.kernels.variant import Variant


def model_new_request(task: Task, variant: Variant) -> dict[str, Any] | None:
    """The request's ``model_new`` entry, or None for a ``launch`` variant."""
    return {"param_names": list(task.param_names)} if variant.model_new else None


def case_init(task: Task, shape: Shape) -> list[Any]:
    """The init inputs for ``shape`` as JSON values; TaskError when one is not a plain value."""
    values = list(task.init_inputs(shape)) if task.init_inputs is not None else []
    try:
        return json.loads(json.dumps(values))
    except (TypeError, ValueError) as exc:
        raise TaskError(
            f"{task.name}: get_init_inputs() returns {values!r}, not plain values (ints, floats, "
            f"tuples): a ModelNew answer cannot be built from them in the sandbox ({exc})"
        ) from None


def attach(request: Any, task: Task, variant: Variant, shapes: list[Shape]) -> None:
    """Add ``model_new`` and each case's ``init`` (``shapes[i]`` is case i's shape) to a child request."""
    spec = model_new_request(task, variant)
    if spec is None:
        return
    request["model_new"] = spec
    for case, shape in zip(request["cases"], shapes):
        case["init"] = case_init(task, shape)
