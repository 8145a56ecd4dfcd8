"""The task contract (docs/design.md §3.1): one task = one Python module, loaded into a typed :class:`Task`.

A task module defines ``NAME``, ``DESCRIPTION``, ``reference``, ``make_inputs``, ``SHAPES``,
``CHECK_SHAPES``, ``DTYPES``, ``flops`` and ``bytes_moved``; optionally ``TOLERANCES`` (dtype ->
(atol, rtol)), ``SMALL_SHAPES`` (a reduced benchmark set that the Triton interpreter can afford),
``adversarial_inputs``, ``ACCUMULATION`` with ``PRECISION_SHAPES`` and ``precision_inputs`` (the
accumulation precision the judge enforces: taskdef.Task), for training ``GRAD_INPUTS`` (indices of
the inputs whose gradients the task defines) with optional ``GRAD_TOLERANCES``; ``MATCH_PROBES`` (shapes
the matcher may probe with), ``UNIT_DIMS_AT`` (where a lower-rank problem's unit dims go); and for a family
``MEMBERS`` (``(name, reference, template constants)`` rows, taskdef.Member) with ``DEFAULT_MEMBER``, the one
``reference`` computes.

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
from pathlib import Path
from types import ModuleType

from warpforge.kernels.kernelbench import kernelbench_task, missing_import
from warpforge.kernels.members import member_files, member_task_name, split_member
from warpforge.kernels.taskdef import (
    KINDS,
    Member,
    Task,
    TaskError,
)

TASKS_DIR = Path(__file__).parent / "tasks"

REQUIRED = ("NAME", "reference", "make_inputs", "SHAPES", "CHECK_SHAPES", "DTYPES", "flops", "bytes_moved")


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
        raise TaskError(
            missing_import(path, exc) or f"task file {path} failed to import: {type(exc).__name__}: {exc}"
        ) from exc
    return module


def is_kernelbench(module: ModuleType) -> bool:
    return hasattr(module, "Model") and hasattr(module, "get_inputs") and not hasattr(module, "reference")


def contract_task(module: ModuleType, path: Path, builtin: bool) -> Task:
    """A warpforge task module (docs/design.md §3.1) as a Task."""
    missing = [name for name in REQUIRED if not hasattr(module, name)]
    if missing:
        raise TaskError(f"task file {path} lacks {', '.join(missing)}: see docs/design.md §3.1 for the task contract")
    shapes = list(module.SHAPES)
    members = tuple(Member(str(name), fn, dict(constants)) for name, fn, constants in getattr(module, "MEMBERS", ()))
    default = str(getattr(module, "DEFAULT_MEMBER", members[0].name if members else ""))
    if members and default not in {m.name for m in members}:
        raise TaskError(f"task file {path}: DEFAULT_MEMBER {default!r} is not one of its MEMBERS")
    check_shapes = list(module.CHECK_SHAPES)
    if not shapes or not module.DTYPES:
        raise TaskError(f"task file {path} needs at least one entry in SHAPES and DTYPES")
    kind = str(getattr(module, "KIND", "other"))
    if kind not in KINDS:
        raise TaskError(f"task file {path}: KIND {kind!r} is none of {', '.join(KINDS)}")
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
        accumulation=getattr(module, "ACCUMULATION", None),
        precision_shapes=list(getattr(module, "PRECISION_SHAPES", [])),
        precision_inputs=getattr(module, "precision_inputs", None),
        grad_inputs=tuple(int(i) for i in getattr(module, "GRAD_INPUTS", ())),
        grad_tolerances=dict(getattr(module, "GRAD_TOLERANCES", {})),
        grad_scales=getattr(module, "grad_scales", None),
        members=members,
        member=default,
        match_probes=list(getattr(module, "MATCH_PROBES", [])),
        propose=getattr(module, "propose_members", None),
        unit_dims_at=getattr(module, "UNIT_DIMS_AT", None),
        fill_inputs={int(i): float(v) for i, v in getattr(module, "FILL_INPUTS", {}).items()},
        kind=kind,
        optional_inputs=tuple(int(i) for i in getattr(module, "OPTIONAL_INPUTS", ())),
    )


# The task loaders, first match wins: (accepts the module?, build the Task). The registry sits above its
# loaders: kernelbench.py imports only taskdef.py.
TASK_LOADERS: list[tuple[Callable[[ModuleType], bool], Callable[[ModuleType, Path, bool], Task]]] = [
    (is_kernelbench, lambda module, path, builtin: kernelbench_task(module, path)),
    (lambda module: True, contract_task),
]


def task_from_module(module: ModuleType, path: Path, builtin: bool) -> Task:
    loader = next(load for accepts, load in TASK_LOADERS if accepts(module))
    return loader(module, path, builtin)


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
    """A built-in task by name, a family's member (``elementwise[gelu_tanh]``, kernels/members.py), or a task
    file by path."""
    if name_or_path in _CACHE:
        return _CACHE[name_or_path]
    if name_or_path.endswith(".py") or "/" in name_or_path:
        task = load_task_file(name_or_path)
    elif split_member(name_or_path) is not None:
        task = _member_task(name_or_path)
    else:
        if name_or_path not in builtin_task_names():
            known = ", ".join(builtin_task_names())
            raise TaskError(
                f"unknown task {name_or_path!r}: known tasks are {known}; a family's member is "
                "FAMILY[MEMBER], e.g. 'elementwise[gelu_tanh]' (or pass a task file path)"
            )
        path = TASKS_DIR / f"{name_or_path}.py"
        task = task_from_module(_import_file(path, f"warpforge.kernels.tasks.{name_or_path}"), path, builtin=True)
    _CACHE[name_or_path] = task
    return task


def _family_member(name: str) -> tuple[Task, Member]:
    """The family task and its member row that ``name`` (``family[member]`` or ``family:member``) names."""
    parsed = split_member(name)
    assert parsed is not None
    family, member = parsed
    if family not in builtin_task_names():
        raise TaskError(
            f"unknown task {family!r} in {name!r}: a member is FAMILY[MEMBER] with FAMILY a built-in "
            f"family ({', '.join(n for n in builtin_task_names() if get_task(n).members)})"
        )
    task = get_task(family)
    row = next((m for m in task.members if m.name == member), None)
    if row is None:
        if not task.members:
            raise TaskError(f"task {family!r} is no family (it has no members): run it as {family!r}")
        raise TaskError(
            f"task {family!r} has no member {member!r}: name one as {family}[MEMBER] (quoted in a "
            f"shell) with MEMBER one of {', '.join(m.name for m in task.members)}"
        )
    return task, row


def _member_task(name: str) -> Task:
    family, row = _family_member(name)
    canonical = member_task_name(family.name, row.name)
    if canonical in _CACHE:
        return _CACHE[canonical]
    module, _ = member_files(family.path, family.name, row)
    task = task_from_module(_import_file(module, f"warpforge_member_{module.parent.name}"), module, builtin=True)
    _CACHE[canonical] = task
    return task


def member_templates(name: str) -> list[Path]:
    """The templates of the member task ``name``: the family's with the member's constants written in."""
    family, row = _family_member(name)
    return member_files(family.path, family.name, row)[1]


def all_tasks(extra_files: Sequence[str] = ()) -> list[Task]:
    return [get_task(n) for n in builtin_task_names()] + [load_task_file(f) for f in extra_files]
