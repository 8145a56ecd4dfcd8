"""The Ray worker pool: long-lived actors, one per GPU, plus CPU actors compiling ahead of them.

Each actor is a :class:`~warpforge.evaluator.run.pool.Worker`: it builds its Backend, whose ChildPool gives
every candidate a fresh child process. For a GPU backend each evaluation actor holds one GPU
(``num_gpus=1``: Ray sets ``CUDA_VISIBLE_DEVICES``, which the child inherits) and ``compile_workers``
CPU actors run the static check and the ahead-of-time compile (optionally the interpreter check) first:
a GPU only receives candidates that compile and never waits for a compiler. The pool hands the next
queued job to a free actor before the orchestrator does its database work. Actors never open the
database; results come back as EvalResult JSON. A dead actor (or node) is replaced and its job retried,
then recorded ``crashed`` (``worker_died``) after ``max_attempts``.

Example::

    >>> pool = RayPool(BACKENDS["cuda"], PoolConfig(workers=8))       # doctest: +SKIP
    >>> pool.submit(spec); pool.poll(timeout=60)                        # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import sys
from collections import deque
from dataclasses import dataclass
from typing import Any

import torch

from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.evaluator.run.backend import Backend
from warpforge.evaluator.run.pool import Completion, EvalPool, JobSpec, PoolConfig, PoolError, Worker, worker_error

# A precheck that ends in one of these lets the candidate go on to the GPU: the interpreter cannot judge
# bf16 tl.dot (docs/design.md §8), which the GPU can.
_PASS = (Verdict.OK, Verdict.UNSUPPORTED)


class _RayWorker(Worker):
    """The Ray actor's body: results cross the process boundary as EvalResult JSON."""

    def info(self) -> dict[str, Any]:
        import ray

        return {**super().info(), "node": ray.get_runtime_context().get_node_id()}

    def evaluate_json(self, spec: JobSpec) -> str:
        return self.evaluate(spec).model_dump_json()

    def precheck_json(self, spec: JobSpec) -> str:
        return self.precheck(spec).model_dump_json()


@dataclass
class _Item:
    key: str
    specs: tuple[JobSpec, ...]  # one job, or two for an A/B re-measurement
    attempts: int = 0
    pre: EvalResult | None = None  # the passed CPU stage, in a pipeline


@dataclass
class _Slot:
    role: str  # "eval": evaluates and re-measures (holds a GPU for a GPU backend); "compile": CPU stage
    actor: Any
    ref: Any = None
    item: _Item | None = None


class RayPool(EvalPool):
    """Long-lived Ray actors, each supervising fresh child processes (see the module docstring)."""

    def __init__(self, backend_cls: type[Backend], config: PoolConfig, startup_timeout_s: float = 120.0) -> None:
        import ray

        self._ray, self._started_ray = ray, False
        gpu = backend_cls.uses_gpu
        unit = config.gpu_resource if gpu else "CPU"

        def compilers(workers: int) -> int:  # default: one CPU compile worker per GPU worker
            return (workers if config.compile_workers is None else config.compile_workers) if gpu else 0

        if not ray.is_initialized():
            guess = config.workers or (torch.cuda.device_count() if unit == "GPU" else 0)
            try:
                if config.address:
                    ray.init(address=config.address, log_to_driver=False, logging_level=logging.WARNING)
                else:  # every asked-for actor must fit: one logical CPU each, even beyond the physical cores
                    ray.init(
                        num_cpus=config.num_cpus or max(os.cpu_count() or 1, guess + compilers(guess)),
                        include_dashboard=False,
                        log_to_driver=False,
                        logging_level=logging.WARNING,
                    )
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = f"the Ray cluster at {config.address}" if config.address else "a local Ray instance"
                raise PoolError(
                    f"cannot start or join {where}: {exc}; check --ray-address, or run without Ray "
                    "(--workers 1 or --no-ray)"
                ) from exc
            self._started_ray = True
        available = ray.cluster_resources()
        workers = config.workers or int(available.get(unit, 0))
        compile_workers = compilers(workers)
        if workers < 1:
            raise PoolError(
                f"Ray sees no {unit} resource ({available}); use --backend interpret or join a GPU "
                "cluster with --ray-address"
            )
        placement: dict[str, Any] = ({"num_gpus": 1} if unit == "GPU" else {"resources": {unit: 1}}) if gpu else {}
        module = sys.modules.get(backend_cls.__module__)
        if module is not None and module.__name__ != "__main__" and not module.__name__.startswith("warpforge."):
            ray.cloudpickle.register_pickle_by_value(module)  # a stand-in backend from a test or benchmark
        self._actor_cls = ray.remote(max_restarts=0)(_RayWorker)
        self._args = (backend_cls, config.backend_kwargs, config.interpret_check)
        self._opts: dict[str, dict[str, Any]] = {"eval": {"num_cpus": 1, **placement}, "compile": {"num_cpus": 1}}
        self.backend_name, self.max_attempts, self.pipeline = backend_cls.name, config.max_attempts, compile_workers > 0
        self.can_remeasure = backend_cls.can_remeasure
        # One running and one queued per evaluation worker, plus one compiling per CPU actor.
        self.depth = 2 * workers + compile_workers
        self.describe = f"Ray, {workers} {'GPU ' if gpu else ''}worker{'s' if workers > 1 else ''}" + (
            f" + {compile_workers} CPU compile worker(s)" if compile_workers else ""
        )
        self._slots = [_Slot("eval", self._spawn("eval")) for _ in range(workers)]
        self._slots += [_Slot("compile", self._spawn("compile")) for _ in range(compile_workers)]
        self._early: list[Completion] = []  # finished during pump(), returned by the next poll()
        self._pre: deque[_Item] = deque()  # waiting for a compile worker
        self._ready: deque[_Item] = deque()  # waiting for an evaluation worker
        try:
            ray.get([s.actor.info.remote() for s in self._slots], timeout=startup_timeout_s)
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise PoolError(
                f"could not place {workers} {unit} worker(s) and {compile_workers} compile worker(s) "
                f"within {startup_timeout_s:.0f} s; the cluster offers {available}: lower --workers "
                "or add nodes"
            ) from None

    def _spawn(self, role: str) -> Any:
        return self._actor_cls.options(**self._opts[role]).remote(*self._args)

    def actors(self, role: str = "eval") -> list[Any]:
        """The live actor handles of one role (tests kill them to exercise replacement)."""
        return [s.actor for s in self._slots if s.role == role]

    def submit(self, spec: JobSpec) -> None:
        (self._pre if self.pipeline else self._ready).append(_Item(spec.key, (spec,)))
        self._dispatch()

    def submit_remeasure(self, key: str, a: JobSpec, b: JobSpec) -> None:
        self._ready.appendleft(_Item(key, (a, b)))  # first in line: the campaign waits on its decision
        self._dispatch()

    def _dispatch(self) -> None:
        for slot in self._slots:
            todo = self._pre if slot.role == "compile" else self._ready
            if slot.item is not None or not todo:
                continue
            item = slot.item = todo.popleft()
            if len(item.specs) == 2:
                slot.ref = slot.actor.remeasure.remote(*item.specs)
            elif slot.role == "compile":
                slot.ref = slot.actor.precheck_json.remote(item.specs[0])
            else:
                slot.ref = slot.actor.evaluate_json.remote(item.specs[0])

    def poll(self, timeout: float) -> list[Completion]:
        out, self._early = self._early, []
        out += self._collect(0.0 if out else timeout)
        return out

    def pump(self) -> None:
        """Take in finished work and hand out queued jobs now; called between the orchestrator's database
        steps (each ~5-20 ms on SQLite), so a free GPU waits for one step, not a whole iteration."""
        self._early += self._collect(0.0)

    def _collect(self, timeout: float) -> list[Completion]:
        self._dispatch()
        busy = {slot.ref: slot for slot in self._slots if slot.item is not None}
        if not busy:
            return []
        ready, _ = self._ray.wait(list(busy), num_returns=1, timeout=timeout)
        if ready:
            ready, _ = self._ray.wait(list(busy), num_returns=len(busy), timeout=0)
        out: list[Completion] = []
        for ref in ready:
            out += self._finish(busy[ref])
        self._dispatch()  # hand the next queued jobs out before the orchestrator does its database work
        return out

    def _finish(self, slot: _Slot) -> list[Completion]:
        ray, item, ref = self._ray, slot.item, slot.ref
        assert item is not None
        slot.item = slot.ref = None
        try:
            value = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:  # the worker's own code raised: a bug, not worth a retry
            return [worker_error(item.key, item.specs[0], exc)]
        except ray.exceptions.RayError as exc:  # the actor (or its node) died: replace it, retry the job
            ray.kill(slot.actor, no_restart=True)
            slot.actor = self._spawn(slot.role)
            item.attempts += 1
            if item.attempts >= self.max_attempts:
                spec = item.specs[0]
                result = EvalResult(
                    verdict=Verdict.CRASHED,
                    reason="worker_died",
                    task=spec.variant.task,
                    variant_hash=spec.variant.source_hash,
                    params=dict(spec.params),
                    message=f"the evaluation worker died {item.attempts} times running this job "
                    f"({type(exc).__name__}); it was given up",
                )
                return [Completion(item.key, result=result, attempts=item.attempts)]
            (self._pre if slot.role == "compile" else self._ready).appendleft(item)
            return []
        if len(item.specs) == 2:
            return [Completion(item.key, samples=value, attempts=item.attempts + 1)]
        result = EvalResult.model_validate_json(value)
        if slot.role == "compile" and result.verdict in _PASS:
            item.pre = result
            self._ready.append(item)
            return []
        if item.pre is not None:  # the GPU stage keeps what the CPU stage learnt
            result.resources = result.resources or item.pre.resources
            result.compile_s = result.compile_s if result.compile_s is not None else item.pre.compile_s
        return [Completion(item.key, result=result, attempts=item.attempts + 1)]

    def close(self) -> None:
        ray = self._ray
        closing = [s.actor.close.remote() for s in self._slots]  # idle actors remove their warm spare children
        ray.wait(closing, num_returns=len(closing), timeout=5)
        for slot in self._slots:
            ray.kill(slot.actor, no_restart=True)
        self._slots = []
        if self._started_ray:
            ray.shutdown()
