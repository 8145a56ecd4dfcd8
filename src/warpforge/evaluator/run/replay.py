"""The ``replay`` backend: times looked up in recorded real-GPU measurements, labelled with that GPU.

Recordings (their layout: evaluator/run/recordings.py) are Kernel Tuner cache files written by
``benchmarks/record_spaces.py`` on a GPU. Only configurations that passed the GPU correctness check were
recorded with a time; failures are recorded as ``CompilationFailedConfig``/``RuntimeFailedConfig``; a
configuration absent from a file was outside the variant's constraints.

Example::

    >>> from warpforge.evaluator.run.recordings import has_recordings
    >>> has_recordings("softmax")  # doctest: +SKIP
    True
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from warpforge.evaluator.gpus import peaks_for
from warpforge.evaluator.result import EvalResult, ShapeResult, Timing, Verdict, aggregate
from warpforge.evaluator.run.backend import Backend, register
from warpforge.evaluator.run.provenance import fingerprint
from warpforge.evaluator.run.recorded_spaces import RecordedSpace, read_space
from warpforge.evaluator.run.recordings import recordings_root
from warpforge.evaluator.sandbox.job import Job
from warpforge.kernels.taskdef import dtype_name, parse_dtype, shape_key

log = logging.getLogger("warpforge.evaluator.run.replay")


@dataclass(frozen=True)
class Recording:
    gpu: str
    path: Path
    space: RecordedSpace


@lru_cache(maxsize=256)
def _read(path: Path) -> RecordedSpace:
    return read_space(path)


def find_recordings(
    task: str, variant: str, source_hash: str, root: Path | None = None, gpu: str | None = None
) -> dict[str, list[Recording]]:
    """Recordings of one exact variant source, by GPU folder."""
    root = root or recordings_root()
    found: dict[str, list[Recording]] = {}
    for folder in sorted(root.glob(f"*/{task}/{variant}-{source_hash[:12]}")):
        gpu_slug = folder.parent.parent.name
        if gpu is not None and gpu.lower() not in gpu_slug.lower():
            continue
        for path in sorted(folder.glob("*.json.gz")):
            space = _read(path)
            found.setdefault(gpu_slug, []).append(Recording(space.device_name or gpu_slug, path, space))
    return found


@register
class ReplayBackend(Backend):
    """Ranks configurations by recorded GPU times; never runs the kernel, never invents a time."""

    name = "replay"
    measures = True  # recorded GPU times rank configurations; they cannot change: no live_timing, no remeasure

    def __init__(self, pool=None, root: Path | None = None, gpu: str | None = None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(pool)
        self.root = root
        self.gpu = gpu  # a substring of the GPU name to replay, or None for the best-covered GPU
        self._pinned: str | None = None
        self._missed: set[str] = set()

    def _miss(self, key: str, message: str) -> None:
        """A replay miss, logged once per variant (each result also says it)."""
        if key not in self._missed:
            self._missed.add(key)
            log.warning("replay: %s: %s", key, message)

    def _evaluate(self, job: Job) -> EvalResult:
        by_gpu = find_recordings(job.task.name, job.variant.name, job.variant.source_hash, self.root, self.gpu)
        if not by_gpu:
            self._miss(
                f"{job.task.name}/{job.variant.name}",
                "no recorded GPU times for this exact source: "
                "its evaluations are unsupported (record them with benchmarks/record_spaces.py)",
            )
            return job.result(
                Verdict.UNSUPPORTED,
                "no_recording",
                f"no recorded GPU times for {job.task.name}/{job.variant.name} (this exact source); "
                "record them on a GPU with benchmarks/record_spaces.py",
            )
        # One GPU answers for this backend's whole life (a campaign): the first evaluation pins the GPU
        # with the most recorded shapes, so two variants are never ranked on times from different GPUs.
        if self._pinned is None:
            self._pinned = max(by_gpu, key=lambda g: len(by_gpu[g]))
        recordings = by_gpu.get(self._pinned, [])
        if not recordings:
            return job.result(
                Verdict.UNSUPPORTED,
                "no_recording",
                f"no recorded times for {job.task.name}/{job.variant.name} on {self._pinned}, the "
                "GPU this campaign ranks on",
            )
        gpu = recordings[0].gpu
        wanted = {(shape_key(s), dtype_name(job.dtypes[0])) for s in job.shapes}
        shapes: list[ShapeResult] = []
        peaks = peaks_for(gpu)
        for rec in recordings:
            meta = rec.space.problem_size if isinstance(rec.space.problem_size, dict) else {}
            shape, dtype = meta.get("shape"), meta.get("dtype")
            if not isinstance(shape, dict) or (shape_key(shape), dtype) not in wanted:
                continue
            entry = rec.space.lookup(job.params)
            if entry is None:
                log.debug("replay miss: %s %s is outside %s", job.variant.name, job.params, rec.path.name)
                return job.result(
                    Verdict.INVALID_CONFIG,
                    "not_in_recording",
                    f"{job.params} is outside the recorded space of {rec.path.name}: it violates "
                    "the variant's constraints",
                )
            if entry.failed:
                verdict = Verdict.COMPILE_ERROR if entry.status == "compile" else Verdict.RUNTIME_ERROR
                return job.result(
                    verdict,
                    f"recorded_{entry.status}_failure",
                    f"this configuration failed on {gpu} when it was recorded ({rec.path.name})",
                )
            samples = entry.times or [entry.time_ms or 0.0]
            p20, p50, p80 = _quantiles(samples)
            ref = meta.get("reference_ms") or [None, None, None]
            sr = ShapeResult(
                shape=shape,
                dtype=str(dtype),
                p20_ms=p20,
                p50_ms=p50,
                p80_ms=p80,
                ref_p20_ms=ref[0],
                ref_p50_ms=ref[1],
                ref_p80_ms=ref[2],
                speedup=(ref[1] / p50) if ref[1] else None,
                # warpforge's own recordings keep 3 quantiles, not samples
                samples_ms=list(samples) if len(samples) > 3 else None,
            )
            if peaks is not None:
                dt = parse_dtype(str(dtype))
                sol = peaks.sol_ms(job.task.flops(shape, dt), job.task.bytes_moved(shape, dt), dt)
                sr.sol_ms, sr.roofline_pct = sol, 100.0 * sol / p50
                if p50 < sol:
                    return job.result(
                        Verdict.REJECTED,
                        "below_speed_of_light",
                        f"recorded {p50:.4g} ms beats the {sol:.4g} ms physical bound on {gpu}",
                    )
            shapes.append(sr)
        result = job.result(
            Verdict.OK,
            device=gpu,
            fingerprint=fingerprint({"gpu": gpu}),
            shapes=shapes,
            timing=Timing(
                source="recorded",
                gpu=gpu,
                recorded_at=str(recordings[0].space.problem_size.get("recorded_at", ""))
                if isinstance(recordings[0].space.problem_size, dict)
                else None,
            ),
            checked=[f"correctness checked on {gpu} when recorded"],
        )
        if len(shapes) < len(wanted):
            missing = len(wanted) - len(shapes)
            self._miss(
                f"{job.task.name}/{job.variant.name}/shapes",
                f"{missing} benchmark shape(s) have no recording on {gpu}: objectives cover the recorded shapes only",
            )
            result.unchecked.append(f"timing: {missing} benchmark shape(s) have no recording on {gpu}")
            return result
        return aggregate(result)


def _quantiles(samples: list[float]) -> tuple[float, float, float]:
    """p20/p50/p80 of recorded samples; warpforge's own recordings store exactly [p20, p50, p80]."""
    if len(samples) < 2:
        return samples[0], samples[0], samples[0]
    if len(samples) == 3:
        low, mid, high = sorted(samples)
        return low, mid, high
    q = statistics.quantiles(samples, n=10, method="inclusive")
    return q[1], statistics.median(samples), q[7]
