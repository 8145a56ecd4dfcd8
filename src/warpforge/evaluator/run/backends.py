"""Evaluation backends (one registry, above its implementations): ``interpret``, ``cuda``, ``replay``.

The contract and the registry dict live in ``evaluator/run/backend.py``; this module imports every built-in
implementation (``replay`` from its own module), so ``BACKENDS`` is complete once it is imported.

- ``interpret``: correctness in Triton's interpreter on the CPU plus ahead-of-time compilation for the
  target GPU. Never a timing objective: its results carry no times.
- ``cuda``: correctness on the GPU, then live timing (reference and candidate in the same child, fresh
  inputs on every timed call, timed outputs rechecked; timing.py), and interleaved A/B re-measurement.
- ``replay``: the interpreter's correctness and compile checks, plus times looked up in recorded
  real-GPU measurements, labelled with the GPU they came from.

Example::

    >>> from warpforge.evaluator.run.backends import get_backend
    >>> backend = get_backend("interpret")  # doctest: +SKIP
    >>> result = backend.evaluate(job)      # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import torch

from warpforge.errors import UsageError
from warpforge.evaluator.judge.judge import scale_shapes
from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.evaluator.run import replay
from warpforge.evaluator.run.backend import (  # noqa: F401 - the contract's public names, re-exported
    BACKENDS,
    Backend,
    fingerprint,
    interpret_checks,
    register,
    software_versions,
)
from warpforge.evaluator.run.job import Job
from warpforge.evaluator.run.stages import check_stage, compile_stage, largest_checked, phase_budgets
from warpforge.evaluator.run.timing import BenchSettings, ab_stage, bench_stage, measured_result, reference_stage
from warpforge.evaluator.sandbox.supervisor import ChildPool
from warpforge.kernels.task import Shape, dtype_name, shape_key
from warpforge.kernels.variant import Variant

log = logging.getLogger("warpforge.evaluator.run.backends")


def coverage(result: EvalResult) -> str:
    """What an ``ok`` checked, from its case labels (verify.Case.label: "<shape> <dtype> seed=<n> (tags)")."""
    shapes: list[str] = []
    kinds = ["random"]
    for label in result.checked:
        shape = label.split(" ", 1)[0]
        if shape not in shapes:
            shapes.append(shape)
        if "(adversarial inputs: " in label:
            kind = label.split("(adversarial inputs: ", 1)[1].split(")", 1)[0]
            if kind not in kinds:
                kinds.append(kind)
    return (f"coverage: shapes {'; '.join(shapes) or 'none'}; input kinds "
            f"{', '.join(kinds)}")


def by_path_notes(job: Job) -> list[str]:
    """A by-path problem's own notes (kernels/kernelbench.py): sizes not derived, the built-in task matched."""
    from warpforge.kernels.kernelbench import NOTES

    note = NOTES.get(str(job.task.path), "") if not job.task.builtin else ""
    return [note] if note else []


# The interpreter runs ~10 ms per program (evaluator/judge/judge.py): inputs above this many bytes at a check shape
# would take hours; KernelBench's own shapes are 0.3-8.6 GB per input.
INTERPRET_MAX_BYTES = 64 << 20


def too_big_for_interpreter(job: Job) -> EvalResult | None:
    """A by-path problem whose sizes could not be derived keeps its benchmark shape as its only check shape:
    the interpreter refuses it up front instead of running for hours."""
    if job.task.builtin:
        return None
    for shape in job.task.check_shapes:
        try:
            size = job.task.bytes_moved(shape, job.dtypes[0])
        except Exception:  # noqa: BLE001 - the user's code; the check itself will report it
            continue
        if size > INTERPRET_MAX_BYTES:
            notes = " ".join(by_path_notes(job))
            return job.result(Verdict.UNSUPPORTED, "shape_too_large_for_interpreter",
                              f"{job.task.path.name}: its check shape {shape_key(shape)} moves {size / 1e9:.2g} GB, "
                              "more than the Triton interpreter can judge on a CPU; " + (notes + "; " if notes else "")
                              + "run with --backend cuda on a GPU, or give the problem smaller sizes as module "
                              "globals read by get_inputs()")
    return None


@register
class InterpretBackend(Backend):
    name = "interpret"

    def __init__(self, pool: ChildPool | None = None) -> None:
        super().__init__(pool)
        self._scaled: dict[str, str] = {}  # variant source hash -> what its benchmark-scale cases covered

    def _evaluate(self, job: Job) -> EvalResult:
        refused = too_big_for_interpreter(job)
        if refused is not None:
            return refused
        # Benchmark-scale cases once per variant source (verify.scale_shapes), on its first evaluation here.
        first = job.variant.source_hash not in self._scaled
        if first:
            job.scale_shapes, note = scale_shapes(job.task)
        result = interpret_checks(self.pool, job)
        if first and result.verdict is Verdict.OK:
            self._scaled[job.variant.source_hash] = note
        elif not first:
            note = self._scaled[job.variant.source_hash] + " on an earlier evaluation of this source"
        if result.verdict is Verdict.OK:
            checked_shapes = job.task.check_shapes or job.task.small_shapes
            if all(s in checked_shapes for s in job.shapes):  # scale_shapes speaks of shapes never skipped here
                note = "benchmark scale: every benchmark shape was itself a check shape"
            result.unchecked.append(coverage(result))
            result.unchecked.append("timing: no GPU measurement (the interpreter's wall time is never a timing)")
            result.unchecked.append(largest_checked(job, checked_shapes))
            result.unchecked.append(note)
            result.unchecked += by_path_notes(job)
        if not self.pool.isolation.active:
            result.unchecked.append(f"isolation: {self.pool.isolation.summary()}: the candidate ran unsandboxed")
        return result


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
        # check and the benchmark look them up instead of compiling them inside their phases (issue 27).
        major, minor = torch.cuda.get_device_capability()
        job.target = f"sm_{major}{minor}"
        failure, resources = compile_stage(self.pool, job)
        if failure is not None:
            failure.resources = resources
            return failure
        budgets = phase_budgets(job, max(ref.values()) / 1e3 if ref else None)
        if not ref:
            log.warning("%s: the reference could not be timed on this GPU: no speedups, and launches are bounded "
                        "only by the %.0f s timeout", job.task.name, job.timeout_s)
        # Every dtype and seed on the small check shapes (plus hidden ones); the benchmark shapes are
        # checked by the bench stage, which rechecks timed outputs against a float64 reference. Shipping
        # every benchmark shape x dtype x seed through files would move GBs per evaluation (an 8192^3
        # fp16 matmul alone has 256 MB of inputs).
        check_shapes = list(job.task.check_shapes) or list(job.task.small_shapes) or shapes
        failure, checked = check_stage(self.pool, job, "cuda", False, check_shapes, job.dtypes, budgets=budgets,
                                       ref_device="cuda")
        if failure is not None:
            failure.checked = checked
            return failure
        failure, shape_results, device = bench_stage(self.pool, job, "cuda", False, job.shapes, job.dtypes[0],
                                                     self.settings, ref, ref_device="cuda")
        if failure is not None:
            failure.checked = checked
            return failure
        result = measured_result(job, checked, shape_results, device, fingerprint(device))
        result.resources = resources
        if result.verdict is Verdict.OK:
            result.unchecked.append(coverage(result) + "; benchmark shapes " + ", ".join(
                shape_key(s) for s in job.shapes) + " checked by the timed runs against a float64 reference")
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
        failure, a, b = ab_stage(self.pool, job_a, job_b, "cuda", False, job_a.shapes, job_a.dtypes[0], rounds,
                                 self.settings, ref_device="cuda")
        if failure is not None:
            raise RuntimeError(f"A/B re-measurement failed: {failure.summary()}: {failure.message}")
        return a, b


def resolve_backend_name(name: str, task_name: str | None = None) -> str:
    """``auto``: a live GPU when there is one, else recorded GPU times when they exist, else interpret."""
    if name != "auto":
        if name not in BACKENDS:
            raise UsageError(f"unknown backend {name!r}: choose from auto, {', '.join(sorted(BACKENDS))}")
        return name
    if torch.cuda.is_available():
        return "cuda"
    if task_name is not None and replay.has_recordings(task_name):
        return "replay"
    return "interpret"


def get_backend(name: str = "auto", task_name: str | None = None, pool: ChildPool | None = None,
                **kwargs: object) -> Backend:
    return BACKENDS[resolve_backend_name(name, task_name)](pool=pool, **kwargs)


class BackendUnavailable(UsageError):
    """The backend asked for cannot evaluate here; the message says what to use instead (a usage error)."""


def usable_backend(name: str, task_name: str, variants: Sequence[Variant] | None = None) -> str:
    """The backend that will evaluate ``task_name`` here, checked before the first evaluation (issue 19).

    ``auto``: cuda with a GPU, else replay when recorded times exist for one of ``variants`` (their exact
    sources; any of the task's when None), else interpret, so it never picks a backend that can only answer
    ``unsupported``. An explicit cuda without a GPU, or replay without such recordings, raises
    :class:`BackendUnavailable` naming what to run instead.

    Example::

        >>> usable_backend("auto", "softmax", builtin_variants("softmax"))  # doctest: +SKIP
        'interpret'
    """
    has_recordings, recordings_root = replay.has_recordings, replay.recordings_root

    def recorded() -> bool:
        if variants is None:
            return has_recordings(task_name)
        root = recordings_root()  # replay.py's layout: <gpu>/<task>/<variant>-<hash[:12]>/*.json.gz (not read here)
        return any(any(root.glob(f"*/{task_name}/{v.name}-{v.source_hash[:12]}/*.json.gz")) for v in variants)

    resolved = resolve_backend_name(name, task_name)  # unknown names: ValueError naming the choices
    if name == "auto":
        if torch.cuda.is_available():
            return "cuda"
        return "replay" if "replay" in BACKENDS and recorded() else "interpret"
    if resolved == "cuda" and not torch.cuda.is_available():
        alt = "--backend replay (recorded GPU times) or " if recorded() else ""
        raise BackendUnavailable(
            f"--backend cuda needs a CUDA GPU and torch sees none here: use {alt}--backend interpret (correctness "
            "in the Triton interpreter plus compile facts, no times), or run on a GPU machine")
    if resolved == "replay" and not recorded():
        names = ", ".join(v.name for v in variants or [])
        which = f" (variant{'s' if len(variants or []) > 1 else ''} {names})" if names else ""
        raise BackendUnavailable(
            f"--backend replay has no recorded GPU times for {task_name!r}{which} under {recordings_root()}: use "
            "--backend interpret here, record on a GPU with benchmarks/record_spaces.py, or point "
            "WARPFORGE_RECORDINGS at a folder of recordings")
    return resolved

