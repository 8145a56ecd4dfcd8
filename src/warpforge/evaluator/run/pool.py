"""Evaluation worker pools: in-process threads, or Ray actors (one per GPU, plus CPU compile actors).

Every worker owns a :class:`~warpforge.evaluator.run.backend.Backend` and with it a ChildPool, so each
candidate still runs in a fresh single-use child (pipes, SIGKILL on timeout, EOF = crash). Workers
never open the database: results come back to the orchestrator (the single writer) as EvalResult JSON.

- :class:`LocalPool` (no Ray): ``workers`` threads in this process, each with its own Backend. The
  default for ``warpforge run`` (``--workers 1``): no 3 s ``ray.init``, no extra daemons.
- ``RayPool`` (ray_pool.py): long-lived Ray actors. For a GPU backend (``cuda``) each GPU actor holds one
  GPU (``num_gpus=1``) and ``compile_workers`` CPU actors run the static check and the ahead-of-time
  compile (optionally the interpreter check) first, so a GPU only ever receives candidates that compile,
  and never waits for a compiler: a two-stage pipeline. Without GPUs every actor runs the whole
  evaluation (``interpret``/``replay``). A dead actor is replaced and its job retried, then ``crashed``.

Both build on what this module defines first: the portable job (:class:`JobSpec`), the :class:`Worker`,
completions, the pool interface and its config; ``make_pool`` (the run package's front door) picks one.
A :class:`Worker` reads its backend's declared capabilities (``has_precheck``,
``can_remeasure``; evaluator/run/backend.py), never probes for methods.

Example::

    >>> from warpforge.evaluator.run import make_pool
    >>> pool = make_pool("interpret", PoolConfig(workers=1))                 # doctest: +SKIP
    >>> pool.submit(JobSpec.of(job, key="a"))                                # doctest: +SKIP
    >>> [c.result.verdict for c in pool.poll(timeout=600)]                   # doctest: +SKIP
    [<Verdict.OK: 'ok'>]
"""

from __future__ import annotations

import hashlib
import os
import queue
import socket
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warpforge.errors import WarpforgeError
from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.evaluator.run.backend import Backend
from warpforge.evaluator.run.interpret import interpret_checks
from warpforge.evaluator.run.provenance import software_versions
from warpforge.evaluator.run.stages import compile_stage, static_stage
from warpforge.evaluator.sandbox.job import Job
from warpforge.kernels.task import get_task
from warpforge.kernels.taskdef import Task, dtype_name, parse_dtype
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
        return cls(
            key,
            job.task.name if job.task.builtin else str(job.task.path),
            job.task.source_hash,
            source,
            job.variant,
            dict(job.params),
            job.seeds,
            job.target,
            job.timeout_s,
            tuple(dtype_name(d) for d in job.dtypes),
            tuple(dict(s) for s in job.shapes),
        )

    def job(self) -> Job:
        return Job(
            _load_task(self),
            self.variant,
            dict(self.params),
            seeds=self.seeds,
            target=self.target,
            timeout_s=self.timeout_s,
            dtypes=[parse_dtype(d) for d in self.dtypes],
            shapes=[dict(s) for s in self.shapes],
        )


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

    def __init__(
        self, backend_cls: type[Backend], backend_kwargs: dict[str, Any] | None = None, interpret_check: bool = False
    ) -> None:
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
            result = failure or job.result(
                Verdict.OK, resources=resources, compile_s=sum(r.compile_s or 0.0 for r in resources)
            )
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
    result = EvalResult(
        verdict=Verdict.CRASHED,
        reason="worker_error",
        task=spec.variant.task,
        variant_hash=spec.variant.source_hash,
        params=dict(spec.params),
        message=f"the evaluation worker raised {type(exc).__name__}: {str(exc)[:400]}",
    )
    return Completion(key, result=result)


class EvalPool(ABC):
    """What the campaign drives: ``submit`` jobs (and A/B re-measurements), ``poll`` for completions."""

    backend_name: str = ""
    depth: int = 1  # jobs to keep submitted so no worker waits for the orchestrator
    can_remeasure: bool = False
    describe: str = ""

    @abstractmethod
    def submit(self, spec: JobSpec) -> None: ...

    @abstractmethod
    def submit_remeasure(self, key: str, a: JobSpec, b: JobSpec) -> None: ...

    @abstractmethod
    def poll(self, timeout: float) -> list[Completion]: ...

    def pump(self) -> None:  # noqa: B027 - optional: pools whose workers pull jobs need no pump
        """Let finished workers start their next job now (a no-op where workers pull jobs themselves)."""

    def close(self) -> None:  # noqa: B027 - optional: a pool holding nothing has nothing to close
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


class LocalPool(EvalPool):
    """``workers`` daemon threads in this process, each with its own Backend (daemon: Ctrl-C exits at once)."""

    def __init__(
        self,
        backend_cls: type[Backend],
        backend_kwargs: dict[str, Any] | None = None,
        workers: int = 1,
        interpret_check: bool = False,
    ) -> None:
        self.backend_name = backend_cls.name
        self.can_remeasure = backend_cls.can_remeasure
        # Two per worker: the next job is already queued when a worker finishes one.
        self.depth = 2 * workers if workers > 1 else 1
        self.describe = f"in-process, {workers} worker{'s' if workers > 1 else ''}"
        self._todo: queue.Queue[tuple[str, tuple[JobSpec, ...]] | None] = queue.Queue()
        self._done: queue.Queue[Completion] = queue.Queue()
        self._threads = []
        for i in range(workers):
            worker = Worker(backend_cls, backend_kwargs, interpret_check)
            thread = threading.Thread(target=self._loop, args=(worker,), name=f"wf-eval-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _loop(self, worker: Worker) -> None:
        try:
            while (item := self._todo.get()) is not None:
                key, specs = item
                try:
                    if len(specs) == 2:
                        done = Completion(key, samples=worker.remeasure(*specs))
                    else:
                        done = Completion(key, result=worker.evaluate(specs[0]))
                except Exception as exc:  # noqa: BLE001 - reported as a crashed evaluation, the pool goes on
                    done = worker_error(key, specs[0], exc)
                self._done.put(done)
        finally:
            worker.close()

    def submit(self, spec: JobSpec) -> None:
        self._todo.put((spec.key, (spec,)))

    def submit_remeasure(self, key: str, a: JobSpec, b: JobSpec) -> None:
        self._todo.put((key, (a, b)))

    def poll(self, timeout: float) -> list[Completion]:
        try:
            out = [self._done.get(timeout=timeout)]
        except queue.Empty:
            return []
        while True:
            try:
                out.append(self._done.get_nowait())
            except queue.Empty:
                return out

    def close(self) -> None:
        for _ in self._threads:
            self._todo.put(None)
        for thread in self._threads:
            thread.join(timeout=5)
