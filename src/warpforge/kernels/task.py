"""The task contract (DESIGN 3.1): one task = one Python module, loaded into a typed :class:`Task`.

A task module defines ``NAME``, ``DESCRIPTION``, ``reference``, ``make_inputs``, ``SHAPES``,
``CHECK_SHAPES``, ``DTYPES``, ``flops`` and ``bytes_moved``; optionally ``TOLERANCES`` (dtype ->
(atol, rtol)) and ``SMALL_SHAPES`` (a reduced benchmark set that the Triton interpreter can afford).

Example::

    >>> from warpforge.kernels.task import get_task
    >>> task = get_task("softmax")
    >>> x, = task.make_inputs(task.check_shapes[0], task.dtypes[0], seed=0, device="cpu")
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

TASKS_DIR = Path(__file__).parent / "tasks"

# (atol, rtol) per dtype, applied against a float64 reference; atol is scaled by the reference's
# RMS magnitude (see evaluator/compare.py). fp16 keeps 11 significant bits (eps 9.8e-4), bf16 8 bits
# (eps 7.8e-3): a kernel that accumulates in fp32 and rounds once lands within a few eps.
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-4, 1e-4),
    torch.float16: (4e-3, 4e-3),
    torch.bfloat16: (3e-2, 3e-2),
    torch.float64: (1e-10, 1e-10),
}

REQUIRED = ("NAME", "reference", "make_inputs", "SHAPES", "CHECK_SHAPES", "DTYPES", "flops", "bytes_moved")


class TaskError(ValueError):
    """A task is unknown or its module breaks the contract; the message says what to do."""


Shape = dict[str, int]


@dataclass(frozen=True)
class Task:
    """A loaded task: ground truth, inputs, shapes and cost model of one kernel problem."""

    name: str
    description: str
    path: Path
    reference: Callable[..., Any]
    make_inputs: Callable[[Shape, torch.dtype, int, str], tuple[Any, ...]]
    shapes: list[Shape]
    check_shapes: list[Shape]
    dtypes: list[torch.dtype]
    flops: Callable[[Shape, torch.dtype], float]
    bytes_moved: Callable[[Shape, torch.dtype], float]
    tolerances: dict[torch.dtype, tuple[float, float]] = field(default_factory=dict)
    small_shapes: list[Shape] = field(default_factory=list)
    builtin: bool = True
    # Optional ``adversarial_inputs(shape, dtype, seed, device) -> {name: inputs}``: inputs chosen to break
    # fragile kernels (large offsets, extreme magnitudes, -inf), checked besides the random ones.
    adversarial_inputs: Callable[[Shape, torch.dtype, int, str], dict[str, tuple[Any, ...]]] | None = None

    def tolerance(self, dtype: torch.dtype) -> tuple[float, float]:
        return self.tolerances.get(dtype, DEFAULT_TOLERANCES.get(dtype, (1e-3, 1e-3)))

    @property
    def source_hash(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def _import_file(path: Path, module_name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise TaskError(f"cannot import task file {path}: is it a Python file?")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a broken user task file: report, never crash the CLI with a traceback
        sys.modules.pop(module_name, None)
        raise TaskError(f"task file {path} failed to import: {type(exc).__name__}: {exc}") from exc
    return module


def task_from_module(module: ModuleType, path: Path, builtin: bool) -> Task:
    if hasattr(module, "Model") and hasattr(module, "get_inputs") and not hasattr(module, "reference"):
        from warpforge.kernels.kernelbench import kernelbench_task

        return kernelbench_task(module, path)
    missing = [name for name in REQUIRED if not hasattr(module, name)]
    if missing:
        raise TaskError(f"task file {path} lacks {', '.join(missing)}: see DESIGN 3.1 for the task contract")
    shapes = list(module.SHAPES)
    check_shapes = list(module.CHECK_SHAPES)
    if not shapes or not module.DTYPES:
        raise TaskError(f"task file {path} needs at least one entry in SHAPES and DTYPES")
    return Task(
        name=str(module.NAME),
        description=str(getattr(module, "DESCRIPTION", "")),
        path=path,
        reference=module.reference,
        make_inputs=module.make_inputs,
        shapes=shapes,
        check_shapes=check_shapes,
        dtypes=list(module.DTYPES),
        flops=module.flops,
        bytes_moved=module.bytes_moved,
        tolerances=dict(getattr(module, "TOLERANCES", {})),
        small_shapes=list(getattr(module, "SMALL_SHAPES", [])),
        builtin=builtin,
        adversarial_inputs=getattr(module, "adversarial_inputs", None),
    )


def builtin_task_names() -> list[str]:
    return sorted(p.stem for p in TASKS_DIR.glob("*.py") if not p.stem.startswith("_"))


def load_task_file(path: str | Path) -> Task:
    """Load a task from a file path: a warpforge task module or a KernelBench-style file."""
    p = Path(path).resolve()
    if not p.is_file():
        raise TaskError(f"task file {p} does not exist")
    digest = hashlib.sha256(str(p).encode()).hexdigest()[:12]
    return task_from_module(_import_file(p, f"warpforge_task_{digest}"), p, builtin=False)


_CACHE: dict[str, Task] = {}


def get_task(name_or_path: str) -> Task:
    """A built-in task by name, or a task file by path."""
    if name_or_path in _CACHE:
        return _CACHE[name_or_path]
    if name_or_path.endswith(".py") or "/" in name_or_path:
        task = load_task_file(name_or_path)
    else:
        if name_or_path not in builtin_task_names():
            known = ", ".join(builtin_task_names())
            raise TaskError(f"unknown task {name_or_path!r}: known tasks are {known} (or pass a task file path)")
        path = TASKS_DIR / f"{name_or_path}.py"
        task = task_from_module(_import_file(path, f"warpforge.kernels.tasks.{name_or_path}"), path, builtin=True)
    _CACHE[name_or_path] = task
    return task


def all_tasks(extra_files: Sequence[str] = ()) -> list[Task]:
    return [get_task(n) for n in builtin_task_names()] + [load_task_file(f) for f in extra_files]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def parse_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise TaskError(f"unknown dtype {name!r}: use e.g. float16, bfloat16, float32")
    return dtype


def shape_key(shape: Shape) -> str:
    """A stable, readable key for a shape: ``M=4096,N=4096``."""
    return ",".join(f"{k}={v}" for k, v in sorted(shape.items()))
