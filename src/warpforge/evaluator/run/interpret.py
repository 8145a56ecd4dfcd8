"""The ``interpret`` backend: correctness in Triton's interpreter on the CPU plus ahead-of-time compilation.

Never a timing objective: its results carry no times. :func:`interpret_checks` (compile for the target, then
check on CHECK_SHAPES in the interpreter) is also the CPU stage ahead of a GPU (the pool's precheck) and
the correctness half of ``replay``.

Example::

    >>> from warpforge.evaluator.run.backend import get_backend
    >>> get_backend("interpret").evaluate(job).verdict   # doctest: +SKIP
    <Verdict.OK: 'ok'>
"""

from __future__ import annotations

import logging
import math
import platform

from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.evaluator.run.backend import Backend, register
from warpforge.evaluator.run.interpreter_dtypes import fp8_dtypes
from warpforge.evaluator.run.provenance import fingerprint
from warpforge.evaluator.run.stages import check_stage, compile_stage, largest_checked, spec_stage
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.supervisor import ChildPool
from warpforge.kernels.taskdef import Shape, Task, shape_key

log = logging.getLogger("warpforge.evaluator.run.interpret")

# What the child's interpreter layer (sandbox/child/faithful.py) does not make behave as the compiled kernel
# does; every interpreter ``ok`` names it (docs/evaluator.md, "Interpreter and compiled kernel").
NOT_EMULATED = (
    "interpreter: not emulated (within tolerance or GPU-only): the order of tl.dot and reduction accumulation, "
    "approximate transcendentals (tl.exp is ex2.approx.f32, fp32 / is div.full.f32, ~2 ulp), fp8 (refused as "
    "interpreter_fp8), integer division by zero (div.s32: undefined), out-of-bounds unmasked accesses "
    "(host memory here, an illegal address or garbage on the GPU)"
)


def coverage(result: EvalResult) -> str:
    """What an ``ok`` checked, from its case labels (judge.Case.label: "<shape> <dtype> seed=<n> (tags)")."""
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
    return f"coverage: shapes {'; '.join(shapes) or 'none'}; input kinds {', '.join(kinds)}"


def by_path_notes(job: Job) -> list[str]:
    """A by-path problem's own notes (kernels/kernelbench.py): sizes not derived, the built-in task matched."""
    from warpforge.kernels.kernelbench import NOTES

    note = NOTES.get(str(job.task.path), "") if not job.task.builtin else ""
    return [note] if note else []


# The interpreter runs ~10 ms per program (SCALE_BUDGET below): inputs above this many bytes at a check shape
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
            return job.result(
                Verdict.UNSUPPORTED,
                "shape_too_large_for_interpreter",
                f"{job.task.path.name}: its check shape {shape_key(shape)} moves {size / 1e9:.2g} GB, "
                "more than the Triton interpreter can judge on a CPU; "
                + (notes + "; " if notes else "")
                + "run with --backend cuda on a GPU, or give the problem smaller sizes as module "
                "globals read by get_inputs()",
            )
    return None


# What the interpreter can afford for one benchmark-scale case. Measured here (2 cores, load ~10):
# softmax's online template takes 0.7 s for one row of 32768 (a row is one vectorised program) but
# 10.5 s for 1024 rows of 1 and 55 s for 4096 (~10 ms per program). So the last dimension (the
# contiguous, reduced one in every built-in task) goes to its benchmark maximum within SCALE_BUDGET
# elements (65536: 256 programs of an elementwise kernel's 256-wide blocks, ~2.5 s at that load),
# every other dimension, which usually sets the number of programs, stops at SCALE_MAX_OTHER, and the
# ok says where each stopped.
SCALE_BUDGET = 1 << 16
SCALE_MAX_OTHER = 256


def scale_shapes(task: Task) -> tuple[list[Shape], str]:
    """Benchmark-scale cases the interpreter can afford, and a sentence for the ``ok`` saying what they cover.

    Each dimension in turn at its largest benchmark value (capped as above), the others at their smallest
    check value: a kernel that changes behaviour above some size of one dimension meets that size here.
    The smallest full benchmark shape is added when it fits SCALE_BUDGET.
    """
    if not task.shapes or not (task.check_shapes or task.small_shapes):
        return [], "benchmark scale: the task has no shapes to scale"
    small = task.check_shapes or task.small_shapes
    keys = [d for d in task.shapes[0] if all(d in s for s in [*task.shapes, *small])]
    low = {d: min(int(s[d]) for s in small) for d in keys}
    # keys that size nothing (a group count, a flag: Task.fixed_keys) keep their check value and are no
    # dimension: at another group count the reference is another function than the variant's
    dims = [d for d in keys if d not in task.fixed_keys]

    def size(shape: Shape) -> int:
        return math.prod(int(shape[d]) for d in dims)

    out: list[Shape] = []
    capped: list[str] = []
    for d in dims:
        top = max(int(s[d]) for s in task.shapes)
        value = top if d == dims[-1] else min(top, SCALE_MAX_OTHER)
        shape = {**low, d: value}
        while size(shape) > SCALE_BUDGET and shape[d] > 1:
            shape[d] //= 2
        if shape[d] < top:
            capped.append(f"{d} up to {shape[d]} (benchmark {top})")
        if shape[d] > max(int(s[d]) for s in small) and shape not in out:
            out.append(shape)
    full = min(task.shapes, key=lambda s: math.prod(int(v) for v in s.values()))
    fits = size(full) <= SCALE_BUDGET and all(int(full[d]) <= SCALE_MAX_OTHER for d in dims[:-1])
    if fits and full not in out:
        out.append(dict(full))
    covered = ", ".join(shape_key(s) for s in out) or "none"
    limits = f"; only {', '.join(capped)}: the interpreter runs ~10 ms per program" if capped else ""
    note = f"benchmark scale: checked {covered} (one dimension at a time at its benchmark size{limits}" + (
        "; the smallest full benchmark shape too)"
        if fits
        else f"; no full benchmark shape, the smallest is {shape_key(full)}: check it on a GPU)"
    )
    return out, note


def interpret_checks(pool: ChildPool, job: Job) -> EvalResult:
    """Correctness under the interpreter on CHECK_SHAPES, then AOT compilation; no times."""
    # Every dtype is checked: the child's interpreter computes bf16 tl.dot as the compiled kernel does
    # (sandbox/child/faithful.py; Triton's own multiplies the raw bit patterns).
    dtypes = list(job.dtypes)
    unchecked: list[str] = []
    # Compile first: Triton's real front-end names compile errors that the interpreter would only meet as
    # Python exceptions, and a compile (0.5-1.5 s) is cheaper than the interpreter checks.
    failure, resources = compile_stage(pool, job)
    if failure is not None:
        failure.resources = resources
        return failure
    fp8 = fp8_dtypes(job.task)
    if fp8:  # compiled for the target, never run here: the interpreter's float8 is not the GPU's
        return job.result(
            Verdict.UNSUPPORTED,
            "interpreter_fp8",
            f"correctness needs a GPU (fp8): the Triton interpreter does not compute {', '.join(fp8)} "
            f"as the GPU does; compiled for {job.target} only (check it with --backend cuda)",
            unchecked=unchecked,
            resources=resources,
            compile_s=sum(r.compile_s or 0.0 for r in resources),
        )
    shapes = job.task.check_shapes or job.task.small_shapes
    failure, checked = check_stage(pool, job, "cpu", True, shapes, dtypes)
    if failure is not None:
        failure.checked, failure.unchecked, failure.resources = checked, unchecked, resources
        return failure
    failure, late, note = spec_stage(pool, job, dtypes)  # the specializations judged are ones that compile
    resources += late
    if failure is not None:
        failure.checked, failure.unchecked, failure.resources = checked, unchecked, resources
        return failure
    unchecked += [note, NOT_EMULATED]
    return job.result(
        Verdict.OK,
        checked=checked,
        unchecked=unchecked,
        resources=resources,
        device="cpu (triton interpreter)",
        compile_s=sum(r.compile_s or 0.0 for r in resources),
        fingerprint=fingerprint({"host": platform.machine(), "kind": "interpreter"}),
    )


@register
class InterpretBackend(Backend):
    name = "interpret"

    def __init__(self, pool: ChildPool | None = None) -> None:
        super().__init__(pool)
        self._scaled: dict[str, str] = {}  # variant source hash -> what its benchmark-scale cases covered
        # The pool probed its isolation when it was made; read here, so that no evaluation goes back to the
        # sandbox for it after its verdict.
        iso = self.pool.isolation
        self._unsandboxed = None if iso.active else f"isolation: {iso.summary()}: the candidate ran unsandboxed"

    def _evaluate(self, job: Job) -> EvalResult:
        refused = too_big_for_interpreter(job)
        if refused is not None:
            return refused
        # Benchmark-scale cases once per variant source (scale_shapes), on its first evaluation here.
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
        if self._unsandboxed is not None:
            result.unchecked.append(self._unsandboxed)
        return result
