"""Trusted-side timing: plan what the child times, then judge its raw samples (child_bench.py).

The child reports samples and facts; quantiles, speedups and every verdict come from here:

- ``timed_output_incorrect``: outputs of chosen *timed* calls, rebuilt inputs and all, are compared with
  a float64 reference (judge/timed.py): a candidate that caches, replays or skips work once it is being
  timed fails;
- ``work_outside_timed_stream``: after the end event completed, a device-wide synchronize still waited
  (median over calls above max(20 us, a quarter of the timed median)): work on a side stream or thread;
- ``timing_inconsistent``: the parent's own clock, from the child's marks around a block of back-to-back
  calls sized from the reference's time (~250 ms), saw at least 0.1 ms per call and more than twice the
  reported median (timers tampered with; blocks under 200 ms are not judged);
- ``below_speed_of_light``: a median below max(flops / peak, bytes / bandwidth) for the detected GPU;
- ``harness_tampered``, ``global_state_modified``, ``background_thread``: as in judge/judge.py.
"""

from __future__ import annotations

import math
import random
import secrets
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from warpforge.evaluator.gpus import peaks_for
from warpforge.evaluator.judge.timed import recheck_timed_call
from warpforge.evaluator.result import EvalResult, ShapeResult, Verdict
from warpforge.evaluator.run.stages import (
    CANDIDATE_FILE,
    CONTEXT_S,
    budget_s,
    cache_use,
    cached,
    child_failure,
    copy_task,
    hang_bound_s,
    load_factor,
    task_path,
)
from warpforge.evaluator.run.stats import quantiles
from warpforge.evaluator.sandbox import model_spec
from warpforge.evaluator.sandbox.job import Job, training_check
from warpforge.evaluator.sandbox.supervisor import ChildPool, Mark
from warpforge.kernels.taskdef import Shape, dtype_name, shape_key

# A device-wide synchronize right after the end event costs ~5-10 us when nothing is pending.
PENDING_FLOOR_MS = 0.02
# Below 0.1 ms per call the parent's clock sees launch overhead, not the kernel. The parent timestamps a
# mark when it gets to read it: on a loaded 2-core machine that came 10-35 ms late (measured), so a block
# shorter than 200 ms proves nothing.
WALL_FLOOR_MS = 0.1
WALL_BLOCK_MIN_MS = 200.0
# The parent sizes the back-to-back block from the reference's time (measured apart, trusted): ~250 ms.
WALL_BLOCK_TARGET_MS = 250.0


@dataclass
class BenchSettings:
    """How much to time: calls per shape, input sets rotated, timed outputs rechecked, L2 flush size."""

    warmup: int = 10
    reps: int = 100
    input_sets: int = 3
    recheck: int = 2
    wall_calls: int = 20
    flush_bytes: int = 256 << 20  # larger than any current L2 (H100/H200: 50 MB)


def _first_float(inputs: Sequence[Any]) -> int:
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel():
            return i
    raise ValueError("the task's inputs have no floating-point tensor to vary between timed calls")


def _unravel(pos: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for dim in reversed(shape):
        index.append(pos % dim)
        pos //= dim
    return tuple(reversed(index))


@dataclass
class TimedCase:
    """One shape to time: input-set seeds and, per call, the element that makes its inputs unique."""

    id: int
    shape: Shape
    dtype: torch.dtype
    ref_seed: int
    seeds: list[int]
    perturb: list[list[Any]]  # per call: [set index, argument, flat position, value]
    recheck: list[int]

    wall_calls: int = 20
    grad_seed: int = 0  # a training bench's upstream gradient (gradients.draw_grad_out)

    def request(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "shape": self.shape,
            "dtype": dtype_name(self.dtype),
            "ref_seed": self.ref_seed,
            "seeds": self.seeds,
            "perturb": self.perturb,
            "recheck": self.recheck,
            "wall_calls": self.wall_calls,
            "grad_seed": self.grad_seed,
        }

    def inputs_of_call(self, job: Job, call: int) -> tuple[Any, ...]:
        """The exact inputs of timed call ``call``, rebuilt here from the seed and its perturbation."""
        j, arg, pos, value = self.perturb[call]
        inputs = list(job.task.make_inputs(dict(self.shape), self.dtype, self.seeds[j], "cpu"))
        target = inputs[arg].clone()
        target[_unravel(pos, tuple(target.shape))] = value
        inputs[arg] = target
        return tuple(inputs)


def _new_value(flat: torch.Tensor, rng: random.Random) -> tuple[int, float]:
    """A position and a value for it taken from elsewhere in the tensor (same distribution), never the
    value already there: otherwise the call's inputs could equal an earlier call's (1 in N)."""
    pos = rng.randrange(flat.numel())
    old = float(flat[pos])
    for _ in range(8):
        value = float(flat[rng.randrange(flat.numel())])
        if value != old:
            return pos, value
    return pos, old + 1.0


def plan_timed(
    job: Job, shapes: Sequence[Shape], dtype: torch.dtype, calls: int, sets: int, recheck: int, rng: random.Random
) -> list[TimedCase]:
    cases = []
    for i, shape in enumerate(shapes):
        seeds = [rng.getrandbits(31) for _ in range(sets)]
        sample = job.task.make_inputs(dict(shape), dtype, seeds[0], "cpu")
        arg = _first_float(sample)
        flat = sample[arg].reshape(-1)
        perturb = [[c % sets, arg, *_new_value(flat, rng)] for c in range(calls)]
        # The last timed call always (a cache that turns on after N calls is caught for any N below the
        # count), plus random ones from the second half (a cache that turns off again is not safe either).
        later = range(calls // 2, calls - 1)
        chosen = sorted({calls - 1, *rng.sample(later, min(max(recheck - 1, 0), len(later)))}) if recheck else []
        cases.append(
            TimedCase(i, dict(shape), dtype, rng.getrandbits(31), seeds, perturb, chosen, grad_seed=rng.getrandbits(31))
        )
    return cases


def _wall_ms(marks: list[Mark], case_id: int, calls: int) -> float | None:
    at = {m.name: m.at for m in marks}
    start, end = at.get(f"wall:{case_id}"), at.get(f"wall_end:{case_id}")
    if start is None or end is None or calls <= 0:
        return None
    return (end - start) * 1e3 / calls


def side_stream_finding(ms: Sequence[float], pending_ms: Sequence[float]) -> str | None:
    """Work still running after the end event, measured by a device-wide synchronize on the host clock."""
    if not ms or not pending_ms:
        return None
    p50, pend = statistics.median(ms), statistics.median(pending_ms)
    if pend > max(PENDING_FLOOR_MS, 0.25 * p50):
        return (
            f"after each timed call ended, the device was still busy for {pend:.4g} ms (median; the call "
            f"itself measured {p50:.4g} ms): work runs on another stream or thread, outside the timing"
        )
    return None


def wall_clock_finding(
    p50_ms: float, wall_ms: float | None, calls: int = 1000, min_block_ms: float = WALL_BLOCK_MIN_MS
) -> str | None:
    """The parent's clock governs: a reported median under half of what it saw per call is not believed.

    ``min_block_ms``: blocks shorter than this prove nothing (the parent reads marks late); bench_stage
    scales it by the machine's load factor, since a busier machine reads them later still (at a load of
    14 on 2 cores an honest 2-call interpreter block read 200+ ms long, against a 27 ms median).
    """
    if wall_ms is None or wall_ms < WALL_FLOOR_MS or wall_ms * calls < min_block_ms:
        return None
    if p50_ms < 0.5 * wall_ms:
        return (
            f"the child reported {p50_ms:.4g} ms per call but the parent's clock saw {wall_ms:.4g} ms per call "
            "back to back: the timing in the child was tampered with"
        )
    return None


def _facts_finding(job: Job, report: dict[str, Any]) -> EvalResult | None:
    if report.get("tampered"):
        return job.result(
            Verdict.REJECTED, "harness_tampered", f"the candidate replaced {report['tampered'][:5]} during timing"
        )
    if report.get("state_changed"):
        return job.result(
            Verdict.REJECTED,
            "global_state_modified",
            f"the candidate changed {report['state_changed'][:5]} during timing",
        )
    for case in report.get("cases", []):
        if case.get("threads"):
            return job.result(Verdict.REJECTED, "background_thread", "threads still ran after timed calls")
    return None


def bench_stage(
    pool: ChildPool,
    job: Job,
    device: str,
    interpret: bool,
    shapes: Sequence[Shape],
    dtype: torch.dtype,
    settings: BenchSettings | None = None,
    reference_ms: dict[str, float] | None = None,
    ref_device: str = "cpu",
) -> tuple[EvalResult | None, list[ShapeResult], dict[str, Any]]:
    """Time the reference then the candidate in one child; judge here. Returns (failure, shapes, device)."""
    s = settings or BenchSettings()
    rng = random.Random(secrets.randbits(64))
    calls = s.warmup + s.reps
    cases = plan_timed(job, shapes, dtype, calls, s.input_sets, s.recheck, rng)
    cuda = device.startswith("cuda")
    request = {
        "mode": "bench",
        "candidate": CANDIDATE_FILE,
        "candidate_sha256": job.variant.source_hash,
        "params": job.params,
        "device": device,
        "task_path": task_path(job),
        "warmup": s.warmup,
        "reps": s.reps,
        "wall_calls": s.wall_calls,
        "flush_bytes": s.flush_bytes if cuda else 0,
        "training": training_check(job.task, job.variant),
    }
    budgets: dict[str, float] = {"context": CONTEXT_S, "compile": job.timeout_s}
    for c in cases:
        ref_ms = (reference_ms or {}).get(f"{shape_key(c.shape)} {dtype_name(dtype)}")
        c.wall_calls = s.wall_calls
        if ref_ms is not None and cuda:
            c.wall_calls = max(s.wall_calls, min(5000, math.ceil(WALL_BLOCK_TARGET_MS / max(ref_ms, 1e-4))))
            budgets[f"bench:{c.id}"] = hang_bound_s(calls * ref_ms / 1e3)
            budgets[f"wall:{c.id}"] = hang_bound_s(c.wall_calls * ref_ms / 1e3)
    # After wall_calls is set: built before, every case asked the child for TimedCase's default of 20 wall
    # calls while the parent divided the block by s.wall_calls (an honest 57 ms interpreter call "took" 575 ms)
    request["cases"] = [c.request() for c in cases]
    model_spec.attach(request, job.task, job.variant, [c.shape for c in cases])

    def prepare(scratch: Path) -> None:
        (scratch / CANDIDATE_FILE).write_bytes(job.variant.source.encode("utf-8"))
        copy_task(scratch, job)

    seeded: list[int] = []
    if not interpret:  # the AOT and check stages' kernels are in its cache: the first call compiles nothing new
        prepare, seeded = cached(pool, job, prepare, request)
    with pool.running(
        request,
        job.env(interpret, cuda),
        budget_s(job, 4),
        prepare,
        budgets=budgets,
        rss_limit_bytes=job.rss_limit_bytes,
    ) as outcome:
        if not interpret:
            job.kernel_cache.append(cache_use("bench", outcome.scratch, seeded))
        failure = child_failure(job, outcome, "benchmark")
        report = outcome.report or {}
        failure = failure or _facts_finding(job, report)
        if failure is not None:
            return failure, [], {}
        device_info = report.get("device", {})
        peaks = peaks_for(str(device_info.get("name", ""))) if cuda else None
        results = []
        for case, facts in zip(cases, report["cases"]):
            for call in facts.get("saved", []):
                problem = recheck_timed_call(job, case, outcome, call, f"timed_{case.id}_{call}.pt", ref_device)
                if problem:
                    return (
                        job.result(
                            Verdict.REJECTED,
                            "timed_output_incorrect",
                            f"outputs of timed calls are rechecked with fresh inputs per call: {problem}",
                        ),
                        [],
                        device_info,
                    )
            missing = sorted(set(case.recheck) - set(facts.get("saved", [])))
            if missing:
                return (
                    job.result(
                        Verdict.REJECTED, "output_not_tensor", f"timed calls {missing} did not return plain tensors"
                    ),
                    [],
                    device_info,
                )
            p20, p50, p80 = quantiles(facts["ms"])
            r20, r50, r80 = quantiles(facts["ref_ms"])
            finding = side_stream_finding(facts["ms"], facts.get("pending_ms", []))
            if finding:
                return job.result(Verdict.REJECTED, "work_outside_timed_stream", finding), [], device_info
            finding = wall_clock_finding(
                p50,
                _wall_ms(outcome.marks, case.id, case.wall_calls),
                case.wall_calls,
                WALL_BLOCK_MIN_MS * load_factor(),
            )
            if finding:
                return job.result(Verdict.REJECTED, "timing_inconsistent", finding), [], device_info
            sr = ShapeResult(
                shape=case.shape,
                dtype=dtype_name(dtype),
                p20_ms=p20,
                p50_ms=p50,
                p80_ms=p80,
                ref_p20_ms=r20,
                ref_p50_ms=r50,
                ref_p80_ms=r80,
                speedup=r50 / p50,
                samples_ms=list(facts["ms"]),
                ref_samples_ms=list(facts["ref_ms"]),
            )
            for field_name in ("forward_ms", "backward_ms", "ref_forward_ms", "ref_backward_ms"):
                if facts.get(field_name):  # a training bench: each part's median beside their sum's quantiles
                    setattr(sr, field_name.replace("_ms", "_p50_ms"), statistics.median(facts[field_name]))
            if peaks is not None:
                sol = peaks.sol_ms(job.task.flops(case.shape, dtype), job.task.bytes_moved(case.shape, dtype), dtype)
                sr.sol_ms, sr.roofline_pct = sol, 100.0 * sol / p50
                if p50 < sol:
                    return (
                        job.result(
                            Verdict.REJECTED,
                            "below_speed_of_light",
                            f"{p50:.4g} ms is faster than physics allows ({sol:.4g} ms) on {device_info.get('name')}",
                        ),
                        [],
                        device_info,
                    )
            results.append(sr)
        return None, results, device_info


def reference_stage(
    pool: ChildPool, job: Job, device: str, shapes: Sequence[Shape], dtypes: Sequence[torch.dtype]
) -> dict[str, float]:
    """Median reference time per 'shape dtype' (ms), timed alone in a child: the basis of hang bounds."""
    keyed = [(shape_key(s), dtype_name(d), s, d) for s in shapes for d in dtypes]
    request = {
        "mode": "reference",
        "device": device,
        "task_path": task_path(job),
        "reps": 5,
        "cases": [{"id": i, "shape": s, "dtype": dn, "seed": i} for i, (_, dn, s, _) in enumerate(keyed)],
    }
    with pool.running(
        request, job.env(False, device.startswith("cuda")), budget_s(job), lambda scratch: copy_task(scratch, job)
    ) as outcome:
        report = outcome.report or {}
        if outcome.status != "done" or "error" in report:
            return {}
        return {f"{keyed[c['id']][0]} {keyed[c['id']][1]}": statistics.median(c["ms"]) for c in report["cases"]}


def ab_stage(
    pool: ChildPool,
    job_a: Job,
    job_b: Job,
    device: str,
    interpret: bool,
    shapes: Sequence[Shape],
    dtype: torch.dtype,
    rounds: int = 30,
    settings: BenchSettings | None = None,
    ref_device: str = "cpu",
) -> tuple[EvalResult | None, list[float], list[float]]:
    """Interleaved A/B re-measurement: per round, the geometric mean over shapes of each one's time (ms).

    Both run in one child on the same fresh inputs per round, the order alternating (AB, BA, ...); the
    last round's outputs of both are rechecked. Returns (failure or None, samples of A, samples of B).
    """
    if job_a.task.path != job_b.task.path:
        raise ValueError("A/B re-measurement compares two variants of one task")
    s = settings or BenchSettings()
    rng = random.Random(secrets.randbits(64))
    cases = plan_timed(job_a, shapes, dtype, rounds, s.input_sets, 0, rng)
    # Forward + backward when both can train (a training variant against a forward-only one compares forward)
    training = training_check(job_a.task, job_a.variant) and job_b.variant.has_backward
    cuda = device.startswith("cuda")
    files = ["candidate_a.py", "candidate_b.py"]
    case_requests = [c.request() for c in cases]
    if job_a.variant.model_new or job_b.variant.model_new:  # each case's init inputs (evaluator/sandbox/model_spec.py)
        for sent, c in zip(case_requests, cases):
            sent["init"] = model_spec.case_init(job_a.task, c.shape)
    request = {
        "mode": "ab",
        "device": device,
        "task_path": task_path(job_a),
        "rounds": rounds,
        "flush_bytes": s.flush_bytes if cuda else 0,
        "warmup": 2,
        "training": training,
        "candidates": [
            {
                "file": f,
                "params": j.params,
                "sha256": j.variant.source_hash,
                "model_new": model_spec.model_new_request(j.task, j.variant),
            }
            for f, j in zip(files, (job_a, job_b))
        ],
        "cases": case_requests,
    }

    def prepare(scratch: Path) -> None:
        for f, j in zip(files, (job_a, job_b)):
            (scratch / f).write_bytes(j.variant.source.encode("utf-8"))
        copy_task(scratch, job_a)

    with pool.running(
        request, job_a.env(interpret, cuda), budget_s(job_a, 4), prepare, rss_limit_bytes=job_a.rss_limit_bytes
    ) as outcome:
        failure = child_failure(job_a, outcome, "A/B re-measurement")
        report = outcome.report or {}
        failure = failure or _facts_finding(job_a, {**report, "cases": [{"threads": report.get("threads")}]})
        if failure is not None:
            return failure, [], []
        for which, job in enumerate((job_a, job_b)):
            for case in cases:
                name = f"timed_ab_{which}_{case.id}.pt"
                problem = recheck_timed_call(job, case, outcome, rounds - 1, name, ref_device, training)
                if problem:
                    return job.result(Verdict.REJECTED, "timed_output_incorrect", problem), [], []
        per_round = [
            [
                math.exp(sum(math.log(max(report["samples"][w][k][r], 1e-9)) for k in range(len(cases))) / len(cases))
                for r in range(rounds)
            ]
            for w in range(2)
        ]
        return None, per_round[0], per_round[1]


def measured_result(
    job: Job, checked: list[str], shapes: list[ShapeResult], device_info: dict[str, Any], fingerprint: str
) -> EvalResult:
    from warpforge.evaluator.result import Timing, aggregate

    name = str(device_info.get("name", ""))
    result = job.result(
        Verdict.OK,
        checked=checked,
        shapes=shapes,
        device=name,
        fingerprint=fingerprint,
        timing=Timing(source="live", gpu=name),
    )
    return aggregate(result)
