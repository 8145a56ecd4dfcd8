"""What every worker pool shares: the portable job, the worker, completions, the pool interface and its config.

``evaluator/pool.py`` (the in-process pool and ``make_pool``) and ``evaluator/ray_pool.py`` both build on
this module and neither imports the other at module level (``make_pool`` imports Ray's pool only when
asked for): no import circle. A :class:`Worker` reads its backend's declared capabilities
(``has_precheck``, ``can_remeasure``; evaluator/backend.py), never probes for methods.

Example::

    >>> spec = JobSpec.of(job, key="a")                                     # doctest: +SKIP
    >>> Worker(BACKENDS["interpret"]).evaluate(spec).verdict                # doctest: +SKIP
    <Verdict.OK: 'ok'>
"""

from __future__ import annotations

import hashlib
import os
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warpforge.errors import WarpforgeError
from warpforge.evaluator.backend import Backend, interpret_checks, software_versions
from warpforge.evaluator.job import Job
from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.evaluator.stages import compile_stage, static_stage
from warpforge.kernels.task import Task, dtype_name, get_task, parse_dtype
from warpforge.kernels.variant import Variant

Samples = tuple[list[float], list[float]]


class PoolError(WarpforgeError, RuntimeError):
    """The pool cannot start (no such cluster, not enough GPUs); the message says what to do."""


@dataclass(frozen=True)
class JobSpec:
    """A :class:`Job` that any worker process, on any host, can rebuild: a task file travels as its text."""

    key: str
    task: str  # built-in task name, or the task file's path
    task_hash: str
    task_source: str | None  # the task file's text (None for built-in tasks)
    variant: Variant
    params: dict[str, Any]
    seeds: int = 2
    target: str = "sm_90"
    timeout_s: float = 120.0
    dtypes: tuple[str, ...] = ()
    shapes: tuple[dict[str, int], ...] = ()

    @classmethod
    def of(cls, job: Job, key: str) -> JobSpec:
        source = None if job.task.builtin else job.task.path.read_bytes().decode()
        return cls(key, job.task.name if job.task.builtin else str(job.task.path), job.task.source_hash, source,
                   job.variant, dict(job.params), job.seeds, job.target, job.timeout_s,
                   tuple(dtype_name(d) for d in job.dtypes), tuple(dict(s) for s in job.shapes))

    def job(self) -> Job:
        return Job(_load_task(self), self.variant, dict(self.params), seeds=self.seeds, target=self.target,
                   timeout_s=self.timeout_s, dtypes=[parse_dtype(d) for d in self.dtypes],
                   shapes=[dict(s) for s in self.shapes])


def _load_task(spec: JobSpec) -> Task:
    if spec.task_source is None:
        return get_task(spec.task)
    path = Path(spec.task)
    if not (path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == spec.task_hash):
        # Another host without a shared filesystem: materialise the exact text, keyed by its hash.
        path = Path(tempfile.gettempdir()) / "warpforge-tasks" / spec.task_hash[:16] / path.name
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(spec.task_source.encode())
    return get_task(str(path))


@dataclass
class Completion:
    """A finished request: an evaluation's result, or the samples of an A/B re-measurement."""

    key: str
    result: EvalResult | None = None
    samples: Samples | None = None
    attempts: int = 1


class Worker:
    """One evaluator: a Backend with its own ChildPool. Lives in a pool thread or inside a Ray actor."""

    def __init__(self, backend_cls: type[Backend], backend_kwargs: dict[str, Any] | None = None,
                 interpret_check: bool = False) -> None:
        self.backend = backend_cls(**(backend_kwargs or {}))
        self.interpret_check = interpret_check

    def info(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "host": socket.gethostname(), "gpus": os.environ.get("CUDA_VISIBLE_DEVICES")}

    def evaluate(self, spec: JobSpec) -> EvalResult:
        return self.backend.evaluate(spec.job())

    def precheck(self, spec: JobSpec) -> EvalResult:
        """The CPU stage: static check and AOT compile (plus interpreter correctness when asked)."""
        job, start = spec.job(), time.monotonic()
        if self.backend.has_precheck:
            result = self.backend.precheck(job)
        elif (static := static_stage(job)) is not None:
            result = static
        elif self.interpret_check:
            result = interpret_checks(self.backend.pool, job)
        else:
            failure, resources = compile_stage(self.backend.pool, job)
            result = failure or job.result(Verdict.OK, resources=resources,
                                           compile_s=sum(r.compile_s or 0.0 for r in resources))
            result.resources = resources
        result.backend, result.versions = self.backend.name, result.versions or software_versions()
        result.wall_s = time.monotonic() - start
        result.walls = {**job.walls, **result.walls}
        return result

    def remeasure(self, a: JobSpec, b: JobSpec) -> Samples | None:
        """Interleaved A/B timing, where the backend offers it (``can_remeasure``)."""
        if not self.backend.can_remeasure:
            return None
        samples_a, samples_b = self.backend.remeasure(a.job(), b.job())
        return list(samples_a), list(samples_b)

    def close(self) -> None:
        self.backend.close()


def worker_error(key: str, spec: JobSpec, exc: BaseException) -> Completion:
    """A worker-side exception is a bug in trusted code, not the candidate's fault: crashed, with the reason."""
    result = EvalResult(verdict=Verdict.CRASHED, reason="worker_error", task=spec.variant.task,
                        variant_hash=spec.variant.source_hash, params=dict(spec.params),
                        message=f"the evaluation worker raised {type(exc).__name__}: {str(exc)[:400]}")
    return Completion(key, result=result)


class EvalPool:
    """What the campaign drives: ``submit`` jobs (and A/B re-measurements), ``poll`` for completions."""

    backend_name: str = ""
    depth: int = 1  # jobs to keep submitted so no worker waits for the orchestrator
    can_remeasure: bool = False
    describe: str = ""

    def submit(self, spec: JobSpec) -> None:
        raise NotImplementedError

    def submit_remeasure(self, key: str, a: JobSpec, b: JobSpec) -> None:
        raise NotImplementedError

    def poll(self, timeout: float) -> list[Completion]:
        raise NotImplementedError

    def pump(self) -> None:
        """Let finished workers start their next job now (a no-op where workers pull jobs themselves)."""

    def close(self) -> None:
        pass


@dataclass
class PoolConfig:
    """How to evaluate: in-process or on Ray, how many workers, and where.

    ``workers``: evaluation workers (one per GPU for a GPU backend; 0 = every GPU Ray sees, or one per CPU).
    ``use_ray``: None chooses Ray when ``workers != 1`` or ``address`` is given (see docs/pipeline.md).
    """

    workers: int = 1
    compile_workers: int | None = None  # CPU actors compiling ahead of GPU workers (None: one per GPU worker)
    use_ray: bool | None = None
    address: str | None = None
    gpu_resource: str = "GPU"  # a custom resource name stands in for GPUs in CPU tests
    num_cpus: int | None = None  # for a local ray.init
    max_attempts: int = 3  # a job whose worker dies this many times is recorded as crashed
    interpret_check: bool = False  # also run interpreter correctness on CPU actors before the GPU
    backend_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def wants_ray(self) -> bool:
        return self.use_ray if self.use_ray is not None else (self.workers != 1 or self.address is not None)
