"""The typed job the trusted side evaluates: one candidate (task, variant source, parameters) and how to check it.

It sits in sandbox/, below both the stages that run a job (run/stages.py, run/timing.py) and the judge that
reads what its child reported (judge/judge.py), so that neither imports the other for the type and the judge
imports nothing of run/ (tests/test_layers.py). Whether a job checks
the backward (:func:`training_check`) is decided here too: the stages ask it before any child runs.

Example::

    >>> from warpforge.evaluator.sandbox.job import Job
    >>> job = Job(get_task("softmax"), load_variant(path), {"BLOCK": 128})      # doctest: +SKIP
    >>> job.result(Verdict.OK).params                                           # doctest: +SKIP
    {'BLOCK': 128}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import torch

from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.evaluator.sandbox.kernel_cache import CacheUse
from warpforge.evaluator.sandbox.supervisor import child_env
from warpforge.kernels.taskdef import Shape, Task
from warpforge.kernels.variant import Variant

# Host memory a candidate may add to its child: the interpreter on check shapes peaks under 1 GiB of
# address space in all (measured 0.84 GiB for torch + Triton + a 100k-element kernel), so 8 GiB only
# stops runaways. The parent's resident-memory watchdog allows the harness 4 GiB on top (a CUDA child's
# runtime, cuBLAS and input copies).
DEFAULT_HOST_MEMORY_GB = 8.0
HARNESS_RSS_GB = 4.0


@lru_cache(maxsize=1)
def machine_has_cuda() -> bool:
    return bool(torch.cuda.is_available())


def training_check(task: Task, variant: Variant) -> bool:
    """Whether an evaluation checks (and times) the backward: the task defines gradients and the variant
    has launch_forward/launch_backward."""
    return task.has_backward and variant.has_backward


def training_note(task: Task, variant: Variant) -> str | None:
    """What a result says about the backward when it was not checked (None when it was, or nothing to say)."""
    if task.has_backward and not variant.has_backward:
        return (
            f"backward: not checked: the task defines gradients of inputs {list(task.grad_inputs)} but the "
            "variant has no launch_forward/launch_backward, so it was judged (and timed) forward-only"
        )
    if variant.has_backward and not task.has_backward:
        return (
            "backward: ignored: the variant defines launch_forward/launch_backward but the task has no "
            "GRAD_INPUTS (no gradient reference), so only launch was judged"
        )
    return None


@dataclass
class Job:
    """One candidate to evaluate: the task, the variant source, its parameters and how to check it."""

    task: Task
    variant: Variant
    params: dict[str, Any]
    seeds: int = 2
    target: str = "sm_90"
    dtypes: list[torch.dtype] = field(default_factory=list)
    shapes: list[Shape] = field(default_factory=list)  # benchmark shapes (timing, constraints)
    timeout_s: float = 120.0
    hidden_shapes: int = 1  # fresh random boundary shapes per evaluation (0 turns them off)
    host_memory_gb: float = DEFAULT_HOST_MEMORY_GB
    # Source hashes of the kernels the AOT stage compiled (compile_stage fills it); a check that launches
    # any other kernel is rejected (judge.Judge._compiled). Empty: not compiled here, not enforced.
    compiled_kernels: list[str] = field(default_factory=list)
    # Specializations (child/launcher.spec_key) the AOT stage compiled, each with the case kind that met it
    # ("benchmark", "check", "interpreted"); and those the interpreter ran (check_stage fills it, key -> spec).
    compiled_specs: dict[str, str] = field(default_factory=dict)
    interpreted_specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    # per benchmark specialization, the smallest shape that has it (child/compile._smallest_shapes)
    spec_shapes: list[dict[str, Any]] = field(default_factory=list)
    kernel_cache: list[CacheUse] = field(default_factory=list)  # per stage: warm entries seeded, entries added
    walls: dict[str, str] = field(default_factory=dict)  # per child stage: the walls it ran behind (sandbox.Walls)
    # "strict" (default) or "core" (static.py): "core" lets the adversarial manifest test the run-time
    # defences behind a fixture that the strict rules would already stop. Set by the trusted side only.
    static_rules: str = "strict"
    # Benchmark-scale correctness cases (interpret.scale_shapes), run once per variant source: the interpret
    # backend sets them on the first evaluation of a source and leaves them empty on its later trials.
    scale_shapes: list[Shape] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.dtypes = self.dtypes or list(self.task.dtypes)
        self.shapes = self.shapes or list(self.task.shapes)

    def result(self, verdict: Verdict, reason: str = "", message: str = "", **kw: Any) -> EvalResult:
        return EvalResult(
            verdict=verdict,
            reason=reason,
            message=message,
            task=self.task.name,
            variant_hash=self.variant.source_hash,
            params=dict(self.params),
            **kw,
        )

    @property
    def host_memory_bytes(self) -> int:
        return int(self.host_memory_gb * (1 << 30))

    @property
    def rss_limit_bytes(self) -> int:
        return int((self.host_memory_gb + HARNESS_RSS_GB) * (1 << 30))

    def env(self, interpret: bool, cuda: bool = False) -> dict[str, str]:
        """The child environment, with RLIMIT_AS only on machines without a GPU.

        Initialising CUDA reserves tens of GB of address space, and on a GPU machine even a compile child
        may (a launch that asks ``torch.cuda.get_device_properties`` for its SM count); there the parent's
        resident-memory watchdog alone bounds host memory.
        """
        return child_env(interpret, as_limit_bytes=None if cuda or machine_has_cuda() else self.host_memory_bytes)
