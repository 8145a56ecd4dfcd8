"""The backend contract: :class:`Backend` with its declared capabilities, and the registry it fills.

A backend evaluates a :class:`~warpforge.evaluator.stages.Job` to exactly one verdict and declares, as
class attributes, what else it offers (see :class:`Backend`). Implementations import this module only;
``evaluator/backends.py`` imports the built-in ones, so the registry sits above them (no import circle).

Example::

    >>> from warpforge.evaluator.backend import BACKENDS, Backend, register
    >>> @register
    ... class Echo(Backend):                      # doctest: +SKIP
    ...     name = "echo"
    ...     def _evaluate(self, job): return job.result(Verdict.UNSUPPORTED, "echo", "nothing evaluated")
    >>> BACKENDS["echo"].uses_gpu                 # doctest: +SKIP
    False
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from abc import ABC, abstractmethod
from typing import ClassVar

import torch

import warpforge
from warpforge.evaluator.grad_check import training_note
from warpforge.evaluator.grammar import kernels_use
from warpforge.evaluator.interpreter_dtypes import fp8_dtypes
from warpforge.evaluator.job import Job
from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.evaluator.sandbox import ChildPool
from warpforge.evaluator.stages import check_stage, compile_stage, static_stage


def fingerprint(details: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(details, sort_keys=True).encode()).hexdigest()[:16]


def software_versions() -> dict[str, str]:
    import triton

    return {"torch": torch.__version__, "triton": triton.__version__, "warpforge": warpforge.__version__}


class Backend(ABC):
    """Evaluates a :class:`Job` to exactly one verdict, and declares what else it offers.

    The pool and the campaign read only these class attributes (never ``getattr`` probes); each says
    "not supported" unless a backend declares otherwise:

    - ``measures``: produces times that may rank configurations (``interpret``: no);
    - ``uses_gpu``: times on a GPU, so one worker per GPU and never two timings on one device, with CPU
      compile workers ahead of it (Ray pool);
    - ``live_timing``: running again gives fresh times (so the campaign's final top-k is re-measured;
      recorded times cannot change);
    - ``can_remeasure``: offers :meth:`remeasure`, interleaved A/B timing of two candidates (what the
      beyond-noise acceptance prefers);
    - ``has_precheck``: its own CPU stage (:meth:`precheck`) replaces the pool's default one (static
      check and ahead-of-time compile) ahead of the GPU.
    """

    name: ClassVar[str] = ""
    measures: ClassVar[bool] = False
    uses_gpu: ClassVar[bool] = False
    live_timing: ClassVar[bool] = False
    can_remeasure: ClassVar[bool] = False
    has_precheck: ClassVar[bool] = False

    def __init__(self, pool: ChildPool | None = None) -> None:
        self.pool = pool or ChildPool()
        self._owns_pool = pool is None

    @abstractmethod
    def _evaluate(self, job: Job) -> EvalResult: ...

    def evaluate(self, job: Job) -> EvalResult:
        start = time.monotonic()
        result = static_stage(job) or self._evaluate(job)
        result.backend = self.name
        result.versions = result.versions or software_versions()
        result.wall_s = time.monotonic() - start
        result.walls = {**job.walls, **result.walls}
        note = training_note(job.task, job.variant)  # a backward that was not judged says so
        if note is not None and result.verdict is Verdict.OK:
            result.unchecked.append(note)
        return result

    def precheck(self, job: Job) -> EvalResult:
        """The backend's own CPU stage (``has_precheck``); not supported by default."""
        raise NotImplementedError(f"the {self.name} backend has no precheck of its own (has_precheck=False)")

    def remeasure(self, job_a: Job, job_b: Job) -> tuple[list[float], list[float]]:
        """Interleaved A/B samples (ms) of two checked candidates (``can_remeasure``); not supported by default."""
        raise NotImplementedError(f"the {self.name} backend cannot re-measure (can_remeasure=False)")

    def close(self) -> None:
        if self._owns_pool:
            self.pool.close()


BACKENDS: dict[str, type[Backend]] = {}  # filled by register(); evaluator/backends.py imports every built-in one


def register(cls: type[Backend]) -> type[Backend]:
    """Class decorator: make ``cls`` available as ``--backend NAME``."""
    if not cls.name:
        raise ValueError(f"{cls.__qualname__} has no name: set the class attribute `name`")
    BACKENDS[cls.name] = cls
    return cls


def interpret_checks(pool: ChildPool, job: Job) -> EvalResult:
    """Correctness under the interpreter on CHECK_SHAPES, then AOT compilation; no times."""
    dtypes = list(job.dtypes)
    unchecked: list[str] = []
    if torch.bfloat16 in dtypes and kernels_use(job.variant.source, "dot"):  # the AST, never the text
        # docs/design.md §8: the interpreter computes tl.dot on bf16 wrongly (relative error ~1e9): unsupported there.
        dtypes.remove(torch.bfloat16)
        unchecked.append("bfloat16: the Triton interpreter computes tl.dot on bf16 wrongly; check on a GPU")
    if not dtypes:
        return job.result(Verdict.UNSUPPORTED, "interpreter_bf16_dot",
                          "bf16 tl.dot cannot be checked in the Triton interpreter; use --backend cuda")
    # Compile first: Triton's real front-end names compile errors that the interpreter would only meet as
    # Python exceptions, and a compile (0.5-1.5 s) is cheaper than the interpreter checks.
    failure, resources = compile_stage(pool, job)
    if failure is not None:
        failure.resources = resources
        return failure
    fp8 = fp8_dtypes(job.task)
    if fp8:  # compiled for the target, never run here: the interpreter's float8 is not the GPU's
        return job.result(Verdict.UNSUPPORTED, "interpreter_fp8",
                          f"correctness needs a GPU (fp8): the Triton interpreter does not compute {', '.join(fp8)} "
                          f"as the GPU does; compiled for {job.target} only (check it with --backend cuda)",
                          unchecked=unchecked, resources=resources,
                          compile_s=sum(r.compile_s or 0.0 for r in resources))
    shapes = job.task.check_shapes or job.task.small_shapes
    failure, checked = check_stage(pool, job, "cpu", True, shapes, dtypes)
    if failure is not None:
        failure.checked, failure.unchecked, failure.resources = checked, unchecked, resources
        return failure
    return job.result(Verdict.OK, checked=checked, unchecked=unchecked, resources=resources,
                      device="cpu (triton interpreter)",
                      compile_s=sum(r.compile_s or 0.0 for r in resources),
                      fingerprint=fingerprint({"host": platform.machine(), "kind": "interpreter"}))


