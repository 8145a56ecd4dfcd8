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

Example::

    >>> pool = make_pool("interpret", PoolConfig(workers=1))                 # doctest: +SKIP
    >>> pool.submit(JobSpec.of(job, key="a"))                                # doctest: +SKIP
    >>> [c.result.verdict for c in pool.poll(timeout=600)]                   # doctest: +SKIP
    [<Verdict.OK: 'ok'>]
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any

from warpforge.evaluator.run.backend import BACKENDS, Backend
from warpforge.evaluator.run.workers import (  # noqa: F401 - the pool's public names, re-exported
    Completion,
    EvalPool,
    JobSpec,
    PoolConfig,
    PoolError,
    Samples,
    Worker,
    worker_error,
)


class LocalPool(EvalPool):
    """``workers`` daemon threads in this process, each with its own Backend (daemon: Ctrl-C exits at once)."""

    def __init__(self, backend_cls: type[Backend], backend_kwargs: dict[str, Any] | None = None,
                 workers: int = 1, interpret_check: bool = False) -> None:
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


def make_pool(backend: str | type[Backend], config: PoolConfig) -> EvalPool:
    """The pool for one backend: :class:`LocalPool` when Ray isn't wanted, else a ``RayPool`` (ray_pool.py)."""
    cls = BACKENDS[backend] if isinstance(backend, str) else backend
    if config.wants_ray:
        from warpforge.evaluator.run.ray_pool import RayPool  # importing ray costs ~1 s: only when wanted

        return RayPool(cls, config)
    workers = config.workers or (os.cpu_count() or 1)
    if cls.uses_gpu and workers > 1:
        raise PoolError(f"{workers} in-process workers would time candidates on one GPU at once, which corrupts "
                        "the times: drop --no-ray (one Ray worker per GPU) or use --workers 1")
    return LocalPool(cls, config.backend_kwargs, workers, config.interpret_check)
