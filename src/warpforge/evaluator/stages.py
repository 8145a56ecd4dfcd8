"""The evaluation stages, run from the trusted side: static check, correctness, AOT compile, timing.

Each stage returns either data or a failing :class:`EvalResult`; backends (backends.py) chain them.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from warpforge.evaluator.compare import as_tuple, compare_outputs, upcast
from warpforge.evaluator.result import EvalResult, Resources, Verdict
from warpforge.evaluator.sandbox import ChildOutcome, ChildPool, child_env
from warpforge.evaluator.static import check_source
from warpforge.kernels.task import Shape, Task, dtype_name, shape_key
from warpforge.kernels.variant import Variant

CANDIDATE_FILE = "candidate.py"
# Largest dynamic shared memory per block (bytes) by compute capability: sm_90 232448 (227 KB),
# sm_80 166912 (163 KB), sm_86/89 101376 (99 KB).
SHARED_LIMIT = {90: 232448, 80: 166912, 86: 101376, 89: 101376}


@dataclass
class Job:
    """One candidate to evaluate: the task, the variant source, its parameters and how to check it."""

    task: Task
    variant: Variant
    params: dict[str, Any]
    seeds: int = 2
    target: str = "sm_90"
    dtypes: list[torch.dtype] = field(default_factory=list)
    shapes: list[Shape] = field(default_factory=list)  # benchmark shapes (timing, constraints)
    timeout_s: float = 120.0

    def __post_init__(self) -> None:
        self.dtypes = self.dtypes or list(self.task.dtypes)
        self.shapes = self.shapes or list(self.task.shapes)

    def result(self, verdict: Verdict, reason: str = "", message: str = "", **kw: Any) -> EvalResult:
        return EvalResult(verdict=verdict, reason=reason, message=message, task=self.task.name,
                          variant_hash=self.variant.source_hash, params=dict(self.params), **kw)


def static_stage(job: Job) -> EvalResult | None:
    finding = check_source(job.variant.source)
    if finding is not None:
        return job.result(Verdict.REJECTED, finding.reason, finding.message)
    unknown = sorted(set(job.params) - set(job.variant.space))
    if job.variant.space and unknown:
        return job.result(Verdict.INVALID_CONFIG, "unknown_parameter",
                          f"parameters {unknown} are not in the variant's SPACE {sorted(job.variant.space)}")
    return None


def _write_candidate(job: Job) -> Any:
    def prepare(scratch: Path) -> None:
        (scratch / CANDIDATE_FILE).write_text(job.variant.source)

    return prepare


def _child_failure(job: Job, outcome: ChildOutcome, what: str) -> EvalResult | None:
    """Map a child that produced no usable report, or reported an error, to a verdict."""
    if outcome.status == "timeout":
        return job.result(Verdict.TIMEOUT, "timed_out",
                          f"the {what} did not finish within {job.timeout_s:.0f} s and was killed")
    if outcome.status == "crashed" or outcome.report is None:
        code = outcome.returncode
        tail = outcome.stderr_tail.strip().splitlines()[-1:] or [""]
        return job.result(Verdict.CRASHED, "process_died",
                          f"the candidate process exited with code {code} before reporting: {tail[0][:300]}")
    err = outcome.report.get("error")
    if not err:
        return None
    summary = f"{err['type']}: {err['message'].splitlines()[0][:400] if err['message'] else ''}"
    kind = err["kind"]
    if kind == "import":
        return job.result(Verdict.COMPILE_ERROR, "import_failed",
                          f"the variant failed to import ({summary}); install the missing module or remove the import")
    if kind == "compile":
        return job.result(Verdict.COMPILE_ERROR, "compile_failed", summary)
    if kind == "resources":
        return job.result(Verdict.INVALID_CONFIG, "out_of_resources", summary)
    if kind == "oom":
        return job.result(Verdict.RUNTIME_ERROR, "out_of_memory", summary)
    if err["stage"] == "constraints":
        return job.result(Verdict.RUNTIME_ERROR, "constraints_failed", f"constraints() raised {summary}")
    return job.result(Verdict.RUNTIME_ERROR, "exception", summary)


@dataclass
class _Case:
    id: int
    shape: Shape
    dtype: torch.dtype
    seed: int
    sentinel: float
    inputs: tuple[Any, ...]

    @property
    def label(self) -> str:
        return f"{shape_key(self.shape)} {dtype_name(self.dtype)} seed={self.seed}"


def _cases(job: Job, shapes: Sequence[Shape], dtypes: Sequence[torch.dtype]) -> list[_Case]:
    # Seeds come from the OS: the candidate cannot predict its inputs. Sentinels alternate NaN and a
    # finite value, so output left unwritten fails either the finite check or the value check.
    sentinels = [math.nan, 12345.0]
    cases = []
    for shape in shapes:
        for dtype in dtypes:
            for s in range(job.seeds):
                seed = secrets.randbits(31)
                inputs = job.task.make_inputs(dict(shape), dtype, seed, "cpu")
                cases.append(_Case(len(cases), dict(shape), dtype, seed, sentinels[s % 2], tuple(inputs)))
    return cases


def check_stage(pool: ChildPool, job: Job, device: str, interpret: bool,
                shapes: Sequence[Shape], dtypes: Sequence[torch.dtype]) -> tuple[EvalResult | None, list[str]]:
    """Run the candidate on fresh inputs in a child; compare in this process. Returns (failure, checked)."""
    cases = _cases(job, shapes, dtypes)

    def prepare(scratch: Path) -> None:
        _write_candidate(job)(scratch)
        for case in cases:
            torch.save(case.inputs, scratch / f"in_{case.id}.pt")

    request = {
        "mode": "check", "candidate": CANDIDATE_FILE, "params": job.params, "device": device,
        "task_path": str(job.task.path), "constraint_shapes": job.shapes,
        "cases": [{"id": c.id, "inputs": f"in_{c.id}.pt", "sentinel": c.sentinel} for c in cases],
    }
    outcome = pool.run(request, child_env(interpret), job.timeout_s, prepare)
    try:
        failure = _child_failure(job, outcome, "correctness check")
        if failure is not None:
            return failure, []
        report = outcome.report or {}
        if "invalid_config" in report:
            return job.result(Verdict.INVALID_CONFIG, "constraints_false",
                              f"constraints(params, shape) is False for shape {report['invalid_config']}"), []
        checked: list[str] = []
        by_id = {c["id"]: c for c in report.get("cases", [])}
        for case in cases:
            info = by_id.get(case.id)
            if info is None:
                return job.result(Verdict.CRASHED, "missing_case", f"no report for case {case.label}"), checked
            if any(kind != "Tensor" for kind in info["kinds"]):
                return job.result(Verdict.REJECTED, "output_not_tensor",
                                  f"launch returned {info['kinds']}; a plain torch.Tensor is required"), checked
            if any(info["aliases"]):
                return job.result(Verdict.REJECTED, "output_aliases_input",
                                  "an output shares memory with an input; allocate outputs fresh"), checked
            saved = torch.load(outcome.scratch / f"out_{case.id}.pt", weights_only=True)
            for before, after in zip(case.inputs, saved["inputs_after"]):
                if isinstance(before, torch.Tensor) and not torch.equal(before, after):
                    return job.result(Verdict.REJECTED, "input_mutated",
                                      f"launch modified an input ({case.label}); inputs are read-only"), checked
            ref_lowp = as_tuple(job.task.reference(*case.inputs))
            ref64 = as_tuple(job.task.reference(*upcast(case.inputs)))
            atol, rtol = job.task.tolerance(case.dtype)
            mismatch = compare_outputs(saved["out"], ref64, ref_lowp, atol, rtol)
            if mismatch is not None:
                return job.result(Verdict.INCORRECT, mismatch.reason, f"{case.label}: {mismatch.message}"), checked
            checked.append(case.label)
        return None, checked
    finally:
        pool.release(outcome)


def compile_stage(pool: ChildPool, job: Job) -> tuple[EvalResult | None, list[Resources]]:
    """Ahead-of-time compilation for the target GPU on this machine; no GPU needed."""
    first = job.dtypes[0]
    cases = [{"shape": s, "dtype": dtype_name(first)} for s in job.shapes]
    cases += [{"shape": job.shapes[0], "dtype": dtype_name(d)} for d in job.dtypes[1:]]
    request = {"mode": "compile", "candidate": CANDIDATE_FILE, "params": job.params,
               "task_path": str(job.task.path), "target": job.target, "cases": cases}
    outcome = pool.run(request, child_env(interpret=False), job.timeout_s, _write_candidate(job))
    try:
        failure = _child_failure(job, outcome, "ahead-of-time compile")
        report = outcome.report or {}
        resources = [
            Resources(kernel=k["kernel"], target=job.target, registers=k["registers"], spill_bytes=k["spill_bytes"],
                      shared_bytes=k["shared_bytes"], compile_s=k["compile_s"])
            for k in report.get("kernels", [])
        ]
        if failure is not None:
            return failure, resources
        if not resources:
            return job.result(Verdict.REJECTED, "no_triton_kernel",
                              "launch ran no @triton.jit kernel: the variant must launch a Triton kernel"), resources
        arch = int("".join(ch for ch in job.target if ch.isdigit()) or 90)
        limit = SHARED_LIMIT.get(arch)
        for r in resources:
            if limit is not None and r.shared_bytes is not None and r.shared_bytes > limit:
                return job.result(Verdict.INVALID_CONFIG, "out_of_resources",
                                  f"{r.kernel} needs {r.shared_bytes} bytes of shared memory; {job.target} "
                                  f"allows {limit}", resources=resources), resources
        return None, resources
    finally:
        pool.release(outcome)


def space_stage(pool: ChildPool, job: Job) -> tuple[EvalResult | None, list[dict[str, Any]]]:
    """The configurations of SPACE that satisfy ``constraints`` on every benchmark shape (run in a child)."""
    request = {"mode": "space", "candidate": CANDIDATE_FILE, "space": job.variant.space, "shapes": job.shapes}
    outcome = pool.run(request, child_env(interpret=True), job.timeout_s, _write_candidate(job))
    try:
        failure = _child_failure(job, outcome, "constraint enumeration")
        if failure is not None:
            return failure, []
        report = outcome.report or {}
        names = report["names"]
        return None, [dict(zip(names, values)) for values in report["feasible"]]
    finally:
        pool.release(outcome)
