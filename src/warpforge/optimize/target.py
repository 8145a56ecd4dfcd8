"""What ``warpforge optimize`` takes: a model and one step's inputs, from a folder, a file or a function.

- a folder with a Hugging Face transformers ``config.json``: a causal LM built from it (its weights when the
  folder has them, else random init: the speed question does not need trained weights); the step feeds
  ``--batch`` x ``--seq`` random token ids as inputs and labels, its loss the model's own;
- a Python file in KernelBench's format (``Model``, ``get_inputs``, ``get_init_inputs``); a training step's
  loss is the mean square of the output (any scalar that reaches every output element);
- ``module:function`` returning ``(model, inputs)``; the same loss.

Every loader builds the model afresh from a seed, so the patched and the unpatched copy (and the proof in its
own process, optimize/prove.py) start from the same weights.

Example::

    >>> target = load_target("./qwen3-tiny", batch=2, seq=64, dtype=torch.float32)   # doctest: +SKIP
    >>> model, inputs = target.build(seed=0)                                          # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from warpforge.errors import UsageError


class TargetError(UsageError):
    """TARGET cannot be loaded; the message says what to give instead."""


@dataclass(frozen=True)
class Target:
    name: str
    kind: str  # "transformers" | "kernelbench" | "function"
    spec: str  # what the user passed (a folder, a file, module:function)
    batch: int
    seq: int
    dtype: torch.dtype
    config: Any = None  # the transformers config (planner spec, report)

    def build(self, seed: int = 0) -> tuple[torch.nn.Module, tuple[Any, ...]]:
        """A fresh model (weights from ``seed`` unless the folder has its own) and one step's inputs."""
        torch.manual_seed(seed)
        model, inputs = _BUILDERS[self.kind](self)
        model = model.to(self.dtype)
        inputs = tuple(t.to(self.dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs)
        return model, inputs

    def loss(self, output: Any) -> torch.Tensor:
        """The training step's scalar loss from the model's output."""
        if isinstance(output, torch.Tensor) and output.dim() == 0:
            return output
        first = output[0] if isinstance(output, (tuple, list)) else output
        return first.float().pow(2).mean()


class _CausalLMStep(torch.nn.Module):
    """A causal LM called as one training step: token ids in, its own loss out (labels are the inputs)."""

    def __init__(self, lm: torch.nn.Module) -> None:
        super().__init__()
        self.lm = lm

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids=input_ids, labels=input_ids).loss


def _transformers(t: Target) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    from transformers import AutoModelForCausalLM

    folder = Path(t.spec)
    weights = any(folder.glob("*.safetensors")) or any(folder.glob("pytorch_model*.bin"))
    if weights:
        lm = AutoModelForCausalLM.from_pretrained(folder, dtype=t.dtype)
    else:
        lm = AutoModelForCausalLM.from_config(t.config, dtype=t.dtype)
    ids = torch.randint(0, int(t.config.vocab_size), (t.batch, t.seq))
    return _CausalLMStep(lm), (ids,)


def _load_file(path: Path) -> Any:
    name = f"wf_optimize_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TargetError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as e:
        raise TargetError(f"{path.name} imports {e.name}, which is not installed: pip install {e.name}") from None
    return module


def _kernelbench(t: Target) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    module = _load_file(Path(t.spec))
    model = module.Model(*module.get_init_inputs())
    return model, tuple(module.get_inputs())


def _function(t: Target) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    mod_name, _, func_name = t.spec.partition(":")
    module = _load_file(Path(mod_name)) if mod_name.endswith(".py") else importlib.import_module(mod_name)
    made = getattr(module, func_name)()
    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module)):
        raise TargetError(f"{t.spec} must return (model, inputs): got {type(made).__name__}")
    model, inputs = made
    return model, tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


_BUILDERS: dict[str, Callable[[Target], tuple[torch.nn.Module, tuple[Any, ...]]]] = {
    "transformers": _transformers,
    "kernelbench": _kernelbench,
    "function": _function,
}


def load_target(spec: str, batch: int = 2, seq: int = 64, dtype: torch.dtype = torch.bfloat16) -> Target:
    """Recognise TARGET (see module doc) or raise :class:`TargetError` naming the three forms."""
    path = Path(spec)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise TargetError(f"{spec}: a folder must hold a transformers config.json")
        from transformers import AutoConfig

        try:
            config = AutoConfig.from_pretrained(path)
        except (ValueError, OSError) as e:
            raise TargetError(f"{spec}/config.json: {str(e).splitlines()[0]}") from None
        return Target(path.name, "transformers", str(path), batch, seq, dtype, config)
    if spec.endswith(".py") and ":" not in spec:
        if not path.is_file():
            raise TargetError(f"{spec}: no such file")
        module = _load_file(path)
        missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, n)]
        if missing:
            raise TargetError(
                f"{spec}: a model file needs Model, get_inputs and get_init_inputs "
                f"(KernelBench's format); missing {', '.join(missing)}"
            )
        sys.modules.pop(f"wf_optimize_{path.stem}", None)
        return Target(path.stem, "kernelbench", str(path.resolve()), batch, seq, dtype)
    if ":" in spec:
        return Target(spec.rpartition(":")[2], "function", spec, batch, seq, dtype)
    raise TargetError(
        f"{spec}: give a folder with a transformers config.json, a KernelBench-format .py file, "
        "or module:function returning (model, inputs)"
    )
