"""Evaluation backends (one registry): ``interpret``, ``cuda``, ``replay``, chosen by ``auto``.

- ``interpret``: correctness in Triton's interpreter on the CPU plus ahead-of-time compilation for the
  target GPU. Never a timing objective: its results carry no times.
- ``cuda``: correctness on the GPU, then live timing (reference and candidate in the same child).
- ``replay``: the interpreter's correctness and compile checks, plus times looked up in recorded
  real-GPU measurements, labelled with the GPU they came from.

Example::

    >>> from warpforge.evaluator.backends import get_backend
    >>> backend = get_backend("interpret")  # doctest: +SKIP
    >>> result = backend.evaluate(job)      # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable

import torch

import warpforge
from warpforge.evaluator.gpus import peaks_for
from warpforge.evaluator.result import EvalResult, ShapeResult, Timing, Verdict, aggregate
from warpforge.evaluator.sandbox import ChildPool, child_env
from warpforge.evaluator.stages import (
    CANDIDATE_FILE,
    Job,
    _child_failure,
    check_stage,
    compile_stage,
    static_stage,
)
from warpforge.kernels.task import dtype_name, parse_dtype

BF16_DOT = re.compile(r"tl\.dot\b")


def fingerprint(details: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(details, sort_keys=True).encode()).hexdigest()[:16]


def software_versions() -> dict[str, str]:
    import triton

    return {"torch": torch.__version__, "triton": triton.__version__, "warpforge": warpforge.__version__}


class Backend(ABC):
    """Evaluates a :class:`Job` to exactly one verdict."""

    name: str = ""
    measures: bool = False  # does it produce times that may rank configurations?

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
        return result

    def close(self) -> None:
        if self._owns_pool:
            self.pool.close()


BACKENDS: dict[str, Callable[..., Backend]] = {}


def register(cls: type[Backend]) -> type[Backend]:
    BACKENDS[cls.name] = cls
    return cls


def _interpret_checks(pool: ChildPool, job: Job) -> EvalResult:
    """Correctness under the interpreter on CHECK_SHAPES, then AOT compilation; no times."""
    dtypes = list(job.dtypes)
    unchecked: list[str] = []
    if torch.bfloat16 in dtypes and BF16_DOT.search(job.variant.source):
        # DESIGN 8: the interpreter computes tl.dot on bf16 wrongly (relative error ~1e9): unsupported there.
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
    shapes = job.task.check_shapes or job.task.small_shapes
    failure, checked = check_stage(pool, job, "cpu", True, shapes, dtypes)
    if failure is not None:
        failure.checked, failure.unchecked, failure.resources = checked, unchecked, resources
        return failure
    return job.result(Verdict.OK, checked=checked, unchecked=unchecked, resources=resources,
                      device="cpu (triton interpreter)",
                      compile_s=sum(r.compile_s or 0.0 for r in resources),
                      fingerprint=fingerprint({"host": platform.machine(), "kind": "interpreter"}))


@register
class InterpretBackend(Backend):
    name = "interpret"

    def _evaluate(self, job: Job) -> EvalResult:
        result = _interpret_checks(self.pool, job)
        if result.verdict is Verdict.OK:
            result.unchecked.append("timing: no GPU measurement (the interpreter's wall time is never a timing)")
        return result


@register
class CudaBackend(Backend):
    name = "cuda"
    measures = True

    def _evaluate(self, job: Job) -> EvalResult:
        if not torch.cuda.is_available():
            return job.result(Verdict.UNSUPPORTED, "no_cuda_device", "no CUDA GPU here; use --backend interpret")
        shapes = list(job.task.check_shapes) + list(job.shapes)
        failure, checked = check_stage(self.pool, job, "cuda", False, shapes, job.dtypes)
        if failure is not None:
            failure.checked = checked
            return failure
        cases = [{"shape": s, "dtype": dtype_name(d), "seed": 0} for s in job.shapes for d in job.dtypes[:1]]
        request = {"mode": "bench", "candidate": CANDIDATE_FILE, "params": job.params, "device": "cuda",
                   "task_path": str(job.task.path), "cases": cases}

        def prepare(scratch):  # type: ignore[no-untyped-def]
            (scratch / CANDIDATE_FILE).write_text(job.variant.source)

        outcome = self.pool.run(request, child_env(False), job.timeout_s * 4, prepare)
        try:
            failure = _child_failure(job, outcome, "benchmark")
            if failure is not None:
                return failure
            report = outcome.report or {}
        finally:
            self.pool.release(outcome)
        device = report["device"]
        peaks = peaks_for(device["name"])
        shape_results = []
        for case in report["cases"]:
            dtype = parse_dtype(case["dtype"])
            p20, p50, p80 = case["ms"]
            r20, r50, r80 = case["ref_ms"]
            sr = ShapeResult(shape=case["shape"], dtype=case["dtype"], p20_ms=p20, p50_ms=p50, p80_ms=p80,
                             ref_p20_ms=r20, ref_p50_ms=r50, ref_p80_ms=r80, speedup=r50 / p50)
            if peaks is not None:
                sol = peaks.sol_ms(job.task.flops(case["shape"], dtype), job.task.bytes_moved(case["shape"], dtype),
                                   dtype)
                sr.sol_ms, sr.roofline_pct = sol, 100.0 * sol / p50
                if p50 < sol:
                    return job.result(Verdict.REJECTED, "below_speed_of_light",
                                      f"{p50:.4g} ms is faster than physics allows ({sol:.4g} ms) on {device['name']}")
            shape_results.append(sr)
        result = job.result(Verdict.OK, checked=checked, shapes=shape_results, device=device["name"],
                            fingerprint=fingerprint(device), timing=Timing(source="live", gpu=device["name"]))
        return aggregate(result)


def resolve_backend_name(name: str, task_name: str | None = None) -> str:
    """``auto``: a live GPU when there is one, else recorded GPU times when they exist, else interpret."""
    if name != "auto":
        if name not in BACKENDS:
            raise ValueError(f"unknown backend {name!r}: choose from auto, {', '.join(sorted(BACKENDS))}")
        return name
    if torch.cuda.is_available():
        return "cuda"
    if task_name is not None and "replay" in BACKENDS:
        from warpforge.evaluator.replay import has_recordings

        if has_recordings(task_name):
            return "replay"
    return "interpret"


def get_backend(name: str = "auto", task_name: str | None = None, pool: ChildPool | None = None,
                **kwargs: object) -> Backend:
    return BACKENDS[resolve_backend_name(name, task_name)](pool=pool, **kwargs)


# The replay backend lives in its own module and registers itself; import it so the registry is complete.
from warpforge.evaluator import replay as _replay  # noqa: E402,F401
