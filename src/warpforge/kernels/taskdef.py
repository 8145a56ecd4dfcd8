"""The typed task contract (docs/design.md §3.1): :class:`Task` and the helpers every loader and reader shares.

Loaders (``kernels/task.py``: warpforge task modules; ``kernels/kernelbench.py``: KernelBench files)
build a Task; nothing here imports a loader, so the loader registry sits above them all.

Example::

    >>> from warpforge.kernels.taskdef import shape_key
    >>> shape_key({"N": 4096, "M": 8})
    'M=8,N=4096'
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from warpforge.errors import UsageError

# (atol, rtol) per dtype, applied against a float64 reference; atol is scaled by the reference's
# RMS magnitude (see evaluator/judge/compare.py). fp16 keeps 11 significant bits (eps 9.8e-4), bf16 8 bits
# (eps 7.8e-3): a kernel that accumulates in fp32 and rounds once lands within a few eps.
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-4, 1e-4),
    torch.float16: (4e-3, 4e-3),
    torch.bfloat16: (3e-2, 3e-2),
    torch.float64: (1e-10, 1e-10),
}

# A task's role in a model's step, its module's ``KIND``: what the model optimizer calls the regions the task
# computes (optimize/regions.py) and what a by-path problem or a task file without one is ("other").
KINDS = (
    "gemm",
    "convolution",
    "attention",
    "normalization",
    "activation",
    "elementwise",
    "reduction",
    "pooling",
    "loss",
    "embedding",
    "rotary",
    "quantization",
    "other",
)


class TaskError(UsageError):
    """A task is unknown or its module breaks the contract; the message says what to do."""


Shape = dict[str, int]


@dataclass(frozen=True)
class Member:
    """One operation of a task family (a task module's ``MEMBERS``): its reference, and the module constants
    of the family's templates that select it (``{"OP": "leaky_relu", "OP_A": 0.01}``).

    A family is one task whose templates branch on those constants, so one table row, not one file, adds an
    operation; the matcher (evaluator/judge/matching.py) tries every member and writes the constants of the one
    that agrees into the templates it searches."""

    name: str
    reference: Callable[..., Any]
    constants: dict[str, Any]


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
    # Optional ``ACCUMULATION`` (e.g. torch.float32 for matmul): the precision the task's reductions must
    # accumulate in. The judge then checks each lower-precision dtype on ``PRECISION_SHAPES`` with
    # ``precision_inputs(shape, dtype, seed, device)`` (partial sums that grow and cancel), where a
    # lower-precision accumulator fails the tolerance and is named ``precision_downgrade``.
    accumulation: torch.dtype | None = None
    precision_shapes: list[Shape] = field(default_factory=list)
    precision_inputs: Callable[[Shape, torch.dtype, int, str], tuple[Any, ...]] | None = None
    # Weights (by-path PyTorch modules, kernels/kernelbench.py): the module's state (state_dict order) rides
    # as the trailing inputs of every case, named here; ``init_inputs(shape)`` gives the constructor's
    # arguments, so a ``ModelNew`` variant is built from them and has exactly that state loaded.
    param_names: tuple[str, ...] = ()
    init_inputs: Callable[[Shape], tuple[Any, ...]] | None = None
    # ``model(shape)``: the module itself at a shape (by-path problems), for a family's ``propose`` to read;
    # None for a task module.
    model: Callable[[Shape], torch.nn.Module] | None = None
    # Training (docs/design.md §3.1): positional inputs whose gradients the task defines (the reference,
    # differentiated by torch autograd in float64, is their ground truth); empty for a forward-only task.
    grad_inputs: tuple[int, ...] = ()
    grad_tolerances: dict[torch.dtype, tuple[float, float]] = field(default_factory=dict)
    # Optional ``grad_scales(inputs, grad_out) -> one float per GRAD_INPUTS entry``: the magnitude of the terms
    # each gradient is computed from, which atol multiplies where it exceeds the gradient's own RMS. For a
    # gradient that cancels inside one Jacobian entry (RMSNorm's dx at N = 1 is w*g*eps*rstd^3, ~1e-6 from
    # O(1) terms) no fp32 computation is within atol of the gradient's own size.
    grad_scales: Callable[..., tuple[float, ...]] | None = None
    # A family's members (see Member); ``reference`` is the member named ``member`` (the templates' default).
    members: tuple[Member, ...] = ()
    member: str = ""
    # Optional ``MATCH_PROBES``: shapes with pairwise distinct sizes that ``make_inputs`` accepts, for the
    # matcher to find the keys among the inputs' dimensions when distinct primes are refused (heads that
    # must divide, an even head dim).
    match_probes: list[Shape] = field(default_factory=list)
    # Shape keys that size no input (a by-path problem's ``dim`` passed to the constructor, a matched task's
    # flag or element width, kernels/kernelbench.py): hidden shapes keep their value, since changing one
    # changes the function, not its sizes (the judge would then call a correct kernel wrong).
    fixed_keys: frozenset[str] = frozenset()
    # Optional ``propose_members(model) -> [Member]``: members built for one problem from its module (a
    # Linear's epilogue chain, a convolution's stride and padding), which a fixed table cannot hold. The
    # matcher tries them before ``members``; only the numbers decide, so a misread module is no match.
    propose: Callable[[torch.nn.Module], list[Member]] | None = None
    # Optional ``UNIT_DIMS_AT``: a problem input of lower rank than the task's is the task's input with size-1
    # dims inserted at this position, and the problem's output the task's with as many dropped there (a 1-D
    # or 2-D convolution is the 3-D one with unit depth, or depth and height: [N, C, L] is [N, C, 1, 1, L]).
    # The matcher tries that one reshape (evaluator/judge/match_adapters.py) besides its general cuts.
    unit_dims_at: int | None = None
    # Optional ``FILL_INPUTS``: {input index: value}: a problem that does not pass that input (a Conv without
    # bias, an InstanceNorm without affine weights) is this task with the input filled with the value.
    fill_inputs: dict[int, float] = field(default_factory=dict)
    # ``KIND``: one of :data:`KINDS`.
    kind: str = "other"
    # Optional ``OPTIONAL_INPUTS``: input indices a caller may leave out (a Linear without bias), which the model
    # optimizer passes as zeros of the task's shape (optimize/match.py); unlike FILL_INPUTS, no problem is matched
    # through them.
    optional_inputs: tuple[int, ...] = ()

    def as_member(self, name: str) -> Task:
        """This task computing its member ``name`` (its reference swapped); TaskError naming the members."""
        from dataclasses import replace

        for m in self.members:
            if m.name == name:
                return replace(self, reference=m.reference, member=m.name)
        known = ", ".join(m.name for m in self.members) or "none (not a family)"
        raise TaskError(f"task {self.name!r} has no member {name!r}: its members are {known}")

    def tolerance(self, dtype: torch.dtype) -> tuple[float, float]:
        return self.tolerances.get(dtype, DEFAULT_TOLERANCES.get(dtype, (1e-3, 1e-3)))

    def grad_tolerance(self, dtype: torch.dtype) -> tuple[float, float]:
        """(atol, rtol) for gradients: the task's own, else the forward's."""
        return self.grad_tolerances.get(dtype, self.tolerance(dtype))

    @property
    def has_backward(self) -> bool:
        return bool(self.grad_inputs)

    @property
    def n_params(self) -> int:
        """How many trailing inputs of a case are the module's state (0 for a plain task)."""
        return len(self.param_names)

    @property
    def source_hash(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


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


def parse_shape_key(text: str, dims: Sequence[str] = (), task: str = "the task", complete: bool = True) -> str:
    """``--shape`` text as the stored key (:func:`shape_key`), or a one-line TaskError (a usage error).

    Every part must be ``NAME=INTEGER`` with a positive integer, each name once, and (when ``dims`` is given)
    a dimension the task's shapes name, all of them when ``complete`` (a stored key names every dimension, so a
    partial shape would never match); order does not matter (``N=8,M=4`` is ``M=4,N=8``).

    >>> parse_shape_key("N=8,M=4", ("M", "N"))
    'M=4,N=8'
    """
    example = ",".join(f"{d}=4096" for d in dims) if dims else "M=4096,N=4096"
    shape: Shape = {}
    for part in (p.strip() for p in text.split(",")):
        name, eq, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not name:
            raise TaskError(f"--shape {text!r}: each part is NAME=SIZE, got {part!r}; e.g. --shape {example}")
        if not value.isdigit() or int(value) < 1:
            raise TaskError(
                f"--shape {text!r}: {name} must be a positive integer, got {value!r}; e.g. --shape {example}"
            )
        if dims and name not in dims:
            raise TaskError(
                f"--shape {text!r}: {task} has no dimension {name!r}; its shapes name "
                f"{', '.join(dims)} (e.g. --shape {example})"
            )
        if name in shape:
            raise TaskError(f"--shape {text!r}: {name} is given twice; e.g. --shape {example}")
        shape[name] = int(value)
    if dims and complete and set(shape) != set(dims):
        missing = [d for d in dims if d not in shape]
        raise TaskError(
            f"--shape {text!r}: {task}'s shapes also name {', '.join(missing)}; give every "
            f"dimension (e.g. --shape {example})"
        )
    return shape_key(shape)
