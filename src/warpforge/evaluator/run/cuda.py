"""The ``cuda`` backend: correctness on the GPU, then live timing in a fresh child, and A/B re-measurement.

Reference and candidate are timed in the same child, with fresh inputs on every timed call and timed outputs
rechecked against a float64 reference (timing.py); :meth:`CudaBackend.remeasure` interleaves two candidates
for the campaign's beyond-noise acceptance.

Example::

    >>> from warpforge.evaluator.run.backend import get_backend
    >>> get_backend("cuda").evaluate(job).verdict       # doctest: +SKIP
    <Verdict.OK: 'ok'>
"""

from __future__ import annotations

import json
import logging

import torch

from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.evaluator.run.backend import Backend, register
from warpforge.evaluator.run.interpret import by_path_notes, coverage
from warpforge.evaluator.run.provenance import fingerprint
from warpforge.evaluator.run.stages import check_stage, compile_stage, phase_budgets
from warpforge.evaluator.run.timing import BenchSettings, ab_stage, bench_stage, measured_result, reference_stage
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.supervisor import ChildPool
from warpforge.kernels.targets import LIMITS
from warpforge.kernels.taskdef import Shape, dtype_name, shape_key

log = logging.getLogger("warpforge.evaluator.run.cuda")


@register
class CudaBackend(Backend):
    """Correctness on the GPU (check + benchmark + hidden shapes), then live timing in a fresh child.

    Hang bounds come from the reference's own time on this GPU (timed once per task and shape set, in
    a child of its own): a launch is killed after min(60 s, 10x the reference + 5 s).
    """

    name = "cuda"
    measures = True
    uses_gpu = True
    live_timing = True
    can_remeasure = True

    def __init__(self, pool: ChildPool | None = None, settings: BenchSettings | None = None) -> None:
        super().__init__(pool)
        self.settings = settings or BenchSettings()
        self._reference: dict[tuple[str, str], dict[str, float]] = {}

    def reference_ms(self, job: Job, shapes: list[Shape]) -> dict[str, float]:
        key = (job.task.source_hash, json.dumps([shapes, [dtype_name(d) for d in job.dtypes]], sort_keys=True))
        if key not in self._reference:
            self._reference[key] = reference_stage(self.pool, job, "cuda", shapes, job.dtypes)
        return self._reference[key]

    def _evaluate(self, job: Job) -> EvalResult:
        if not torch.cuda.is_available():
            return job.result(Verdict.UNSUPPORTED, "no_cuda_device", "no CUDA GPU here; use --backend interpret")
        shapes = list(job.task.check_shapes) + list(job.shapes)
        ref = self.reference_ms(job, shapes)
        # Compile ahead of time for this very GPU first: its kernels land in the candidate's warm cache, so the
        # check and the benchmark look them up instead of compiling them inside their phases.
        major, minor = torch.cuda.get_device_capability()
        job.target = f"sm_{major}{minor}"
        if major * 10 + minor not in LIMITS:
            return job.result(
                Verdict.UNSUPPORTED,
                "unknown_target",
                f"this GPU is {job.target}; the shared-memory table (kernels/targets.py) knows "
                + ", ".join(f"sm_{a}" for a in LIMITS),
            )
        failure, resources = compile_stage(self.pool, job)
        if failure is not None:
            failure.resources = resources
            return failure
        budgets = phase_budgets(job, max(ref.values()) / 1e3 if ref else None)
        if not ref:
            log.warning(
                "%s: the reference could not be timed on this GPU: no speedups, and launches are bounded "
                "only by the %.0f s timeout",
                job.task.name,
                job.timeout_s,
            )
        # Every dtype and seed on the small check shapes (plus hidden ones); the benchmark shapes are
        # checked by the bench stage, which rechecks timed outputs against a float64 reference. Shipping
        # every benchmark shape x dtype x seed through files would move GBs per evaluation (an 8192^3
        # fp16 matmul alone has 256 MB of inputs).
        check_shapes = list(job.task.check_shapes) or list(job.task.small_shapes) or shapes
        failure, checked = check_stage(
            self.pool, job, "cuda", False, check_shapes, job.dtypes, budgets=budgets, ref_device="cuda"
        )
        if failure is not None:
            failure.checked = checked
            return failure
        failure, shape_results, device = bench_stage(
            self.pool, job, "cuda", False, job.shapes, job.dtypes[0], self.settings, ref, ref_device="cuda"
        )
        if failure is not None:
            failure.checked = checked
            return failure
        result = measured_result(job, checked, shape_results, device, fingerprint(device))
        result.resources = resources
        if result.verdict is Verdict.OK:
            result.unchecked.append(
                coverage(result)
                + "; benchmark shapes "
                + ", ".join(shape_key(s) for s in job.shapes)
                + " checked by the timed runs against a float64 reference"
            )
            result.unchecked += by_path_notes(job)
        if not ref:  # recorded with the result: its speedup is missing for this reason, not an oversight
            result.unchecked.append("reference: could not be timed on this GPU, so no speedup")
        return result

    def remeasure(self, job_a: Job, job_b: Job, rounds: int = 30) -> tuple[list[float], list[float]]:
        """Interleaved A/B timing of two checked candidates on fresh inputs per round (GPU only).

        Returns per-round samples (ms, geometric mean over the benchmark shapes) for A and B, for
        :func:`warpforge.evaluator.run.stats.is_faster` (``paired=True``). Raises RuntimeError when the
        re-measurement itself fails (a candidate that misbehaves only here).
        """
        if not torch.cuda.is_available():
            raise RuntimeError("remeasure needs a CUDA GPU")
        failure, a, b = ab_stage(
            self.pool,
            job_a,
            job_b,
            "cuda",
            False,
            job_a.shapes,
            job_a.dtypes[0],
            rounds,
            self.settings,
            ref_device="cuda",
        )
        if failure is not None:
            raise RuntimeError(f"A/B re-measurement failed: {failure.summary()}: {failure.message}")
        return a, b
