"""The prompt section for a task with learned state (a by-path PyTorch module: GEMM, conv, norm weights).

It tells the model the state's names, shapes and order, the two answer forms (a ``launch`` that takes the
state as trailing inputs; KernelBench's ``class ModelNew(nn.Module)``), and the kernels-only rule as it
applies to them (evaluator/static/grammar/model_new.py). Shapes come from building the module on
the meta device: no memory, however large the problem.

Example::

    >>> weights_section(load_task_file("level2/76_Gemm_Add_ReLU.py")).body.splitlines()[1]  # doctest: +SKIP
    '- `bias`: [8192] float32'
"""

from __future__ import annotations

from typing import Any

import torch

from warpforge.kernels.taskdef import Task, dtype_name


def _state_shapes(task: Task) -> list[tuple[str, str]]:
    shape = task.shapes[0]
    try:
        with torch.device("meta"):
            inputs = task.make_inputs(shape, task.dtypes[0], 0, "meta")
    except Exception:  # noqa: BLE001 - a module that cannot be built on meta: names only
        return [(name, "") for name in task.param_names]
    state = inputs[len(inputs) - task.n_params :]
    return [
        (name, f"{list(t.shape)} {dtype_name(t.dtype)}" if isinstance(t, torch.Tensor) else "")
        for name, t in zip(task.param_names, state)
    ]


def _init_signature(task: Task) -> str:
    values: tuple[Any, ...] = task.init_inputs(task.shapes[0]) if task.init_inputs is not None else ()
    return ", ".join(repr(v) for v in values)


def weights_section(task: Task) -> tuple[str, str, int] | None:
    """The section for a task whose module holds state (or takes init inputs); None for a plain task."""
    if not task.n_params and task.init_inputs is None:
        return None
    rows = "\n".join(f"- `{name}`: {shape}".rstrip(": ") for name, shape in _state_shapes(task)) or "- (none)"
    args = ", ".join(name.replace(".", "_") for name in task.param_names)
    init = _init_signature(task)
    body = f"""The reference is a PyTorch module with learned state. Every case's inputs are the module's inputs
followed by its state, in this order (the names are the reference's state_dict keys):
{rows}
Answer in either form:
1. A plain variant: `launch(<inputs>, {args or "..."}, **params)` receives the inputs, then the state tensors.
2. KernelBench's answer format, `class ModelNew(nn.Module)` (with `import torch.nn as nn`; no TASK needed;
   SPACE as usual, its parameters arrive as forward's keyword parameters: `def forward(self, x, BLOCK=64)`).
   The harness builds `ModelNew({init})` and then loads the reference's state into it by name (strict: the
   same names and shapes, e.g. `self.gemm = nn.Linear(in_features, out_features, bias=False)` gives
   `gemm.weight`; `self.bias = nn.Parameter(torch.empty(shape))` gives `bias`), so initialise them any way.
   - `__init__` only calls `super().__init__()`, binds `self.NAME` to `nn.Parameter(torch.empty/zeros/ones/
     randn(...))`, to a parameter-holding module (nn.Linear, nn.Conv2d, nn.BatchNorm2d, nn.LayerNorm, ...),
     or to plain values of its arguments, and may `self.register_buffer("name", torch.zeros(...))`.
   - `forward(self, x, ...)` follows launch's rules: it allocates outputs and launches `@triton.jit` kernels,
     passing `self.bias` or `self.gemm.weight` as kernel arguments (or reading their shape/stride).
   - Torch never computes the answer: never call a submodule (`self.gemm(x)`), `torch.nn.functional`, `@`,
     or a method of the model; ModelNew defines only `__init__` and `forward` (no other method, class
     attribute, decorator or hook) [model_new_class] [model_new_init] [torch_compute_call]."""
    return "Weights and answer forms", body, 95  # (title, body, priority): prompting.Section
