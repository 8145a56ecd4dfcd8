"""KernelBench's answer format in the child: build ``ModelNew``, give it the reference's state, call it.

A variant is called through an *entry*: ``bind(inputs) -> (call, args)`` then ``call(*args, **params)``
inside the operator recorder, so whatever binding costs (building the model, nn.Linear's own random
initialisation) happens before the observed call and is never judged as the candidate's compute.

- ``launch`` variants: ``call`` is the module's ``launch``, ``args`` the case's inputs (by-path tasks:
  ``*inputs, *state``).
- ``ModelNew`` variants (grammar/model_new.py): the case's leading inputs are ``get_inputs()``, its trailing
  ``len(param_names)`` inputs the reference's state. The model is built as ``ModelNew(*init)`` (the
  task's init inputs, sent as JSON with the case); its state must have exactly the reference's names and
  shapes (else :class:`StateMismatch`, whose message names both), and is then *replaced* by the case's
  tensors with nn.Module's own ``load_state_dict(strict=True, assign=True)``: the parameters share the
  case's storage, so the weights are identical whatever ModelNew's initialisation did, and a kernel that
  writes into them shows as a mutated input. The grammar lets ModelNew define only ``__init__`` and
  ``forward``, so ``torch.nn.Module.state_dict``/``load_state_dict``/``eval`` called here are torch's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

STATE_MISMATCH = "state_mismatch"  # error kind (stages.child_failure maps it to a verdict)


class StateMismatch(Exception):
    """ModelNew's state does not have the reference's names or shapes."""


def _plain(value: Any) -> Any:
    """JSON lists back to tuples (KernelBench's init inputs hold shapes as tuples)."""
    return tuple(_plain(v) for v in value) if isinstance(value, list) else value


def load_reference_state(model: torch.nn.Module, names: list[str], state: tuple[Any, ...]) -> None:
    """Replace ``model``'s whole state by ``state`` (named ``names``), strictly; StateMismatch otherwise."""
    own = torch.nn.Module.state_dict(model)
    missing = [n for n in names if n not in own]
    unexpected = [n for n in own if n not in names]
    if missing or unexpected:
        raise StateMismatch(
            f"ModelNew's state has {sorted(own) or 'no tensors'}; the reference's is {names or 'empty'}"
            + (f" (missing {missing})" if missing else "")
            + (f" (unexpected {unexpected})" if unexpected else "")
            + f": name your parameters like the reference's: {', '.join(names) or '(none)'}"
        )
    shapes = [
        f"{n}: {tuple(own[n].shape)} vs the reference's {tuple(t.shape)}"
        for n, t in zip(names, state)
        if isinstance(t, torch.Tensor) and tuple(own[n].shape) != tuple(t.shape)
    ]
    if shapes:
        raise StateMismatch(f"ModelNew's state has other shapes than the reference's ({'; '.join(shapes)})")
    torch.nn.Module.load_state_dict(model, dict(zip(names, state)), strict=True, assign=True)
    torch.nn.Module.requires_grad_(model, False)  # inference: the kernels take plain tensors
    torch.nn.Module.eval(model)  # the reference runs in eval mode (kernels/kernelbench.py)


class LaunchEntry:
    def __init__(self, module: Any) -> None:
        self.launch = module.launch  # taken once after import

    def bind(self, inputs: tuple[Any, ...], case: dict[str, Any]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return self.launch, inputs


class ModelNewEntry:
    def __init__(self, module: Any, param_names: list[str]) -> None:
        self.cls = module.ModelNew  # taken once after import, like launch
        self.forward = self.cls.forward
        self.names = list(param_names)

    def bind(self, inputs: tuple[Any, ...], case: dict[str, Any]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        split = len(inputs) - len(self.names)
        model = self.cls(*_plain(list(case.get("init") or [])))
        load_reference_state(model, self.names, tuple(inputs[split:]))
        forward = self.forward

        def call(*args: Any, **params: Any) -> Any:
            return forward(model, *args, **params)

        return call, tuple(inputs[:split])


def entry_for(module: Any, req: dict[str, Any]) -> LaunchEntry | ModelNewEntry:
    spec = req.get("model_new")
    return ModelNewEntry(module, spec["param_names"]) if spec is not None else LaunchEntry(module)
