"""The evaluation stages, run from the trusted side: static check, correctness, AOT compile, timing.

:func:`evaluate_job` is every evaluation's frame: the static check, then the backend's own stages, then what
every result carries. Each stage returns either data or a failing :class:`EvalResult`; backends (interpret.py,
cuda.py, replay.py) chain them.
Correctness (``check_stage``) plans its cases here (judge.plan_cases: seeds and hidden shapes from
this process's unpredictable RNG), runs them in a child, and judges the child's raw facts in
judge/judge.py. Timing stages live in timing.py; the typed :class:`~warpforge.evaluator.sandbox.job.Job` in
sandbox/job.py.
"""

from __future__ import annotations

import io
import math
import os
import random
import secrets
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import torch

from warpforge.evaluator.judge.compare import lint_task
from warpforge.evaluator.judge.gradients import add_grad_outs
from warpforge.evaluator.judge.judge import CheckPlan, judge_check, plan_cases
from warpforge.evaluator.judge.training import judge_training
from warpforge.evaluator.result import EvalResult, Resources, Verdict
from warpforge.evaluator.run.provenance import software_versions
from warpforge.evaluator.sandbox import isolation, kernel_cache, model_spec
from warpforge.evaluator.sandbox.job import Job, training_check, training_note
from warpforge.evaluator.sandbox.protocol import CheckRequest
from warpforge.evaluator.sandbox.supervisor import ChildOutcome, ChildPool
from warpforge.evaluator.static.checks import check_source
from warpforge.kernels.targets import constraint_shape, limits
from warpforge.kernels.taskdef import Shape, dtype_name, shape_key

CANDIDATE_FILE = "candidate.py"
ARGUMENT_RULES = frozenset({"constexpr_tensor", "kernel_argument_type"})
TASK_DIR = "task"
# Our start-up in a GPU child (the "context" phase: CUDA context creation, from the child's "context" mark to
# the mode's first one) is never the candidate's time; it gets a bound of its own, generous because a loaded
# node or a first driver load is slow, and it only stops a child that never gets going.
CONTEXT_S = 120.0


def hang_bound_s(reference_s: float) -> float:
    """How long a GPU launch may run before it is killed: min(60 s, 10x the reference's time + 5 s)."""
    return min(60.0, 10.0 * reference_s + 5.0)


def phase_budgets(job: Job, reference_s: float | None) -> dict[str, float]:
    """The budget of each phase of a GPU check child, each started by the child's mark and ended by
    its next one (sandbox.PhaseClock):

    - ``context``: ours (CUDA context creation): :data:`CONTEXT_S`;
    - ``compile``: the first call of each case on a copy of its inputs: Triton's JIT (a cache hit when the AOT
      stage compiled that specialization: kernel_cache.py), module load and the first launch: the job's
      timeout, compile's own limit;
    - ``launch``: the candidate's observed call alone, up to its ``launched`` mark: the hang bound from the
      reference's time (``reference_s``; without one, only the job's overall deadline applies).

    Everything else (imports, the harness's saving, the next case's inputs) is bounded by the overall deadline.

    Example::

        >>> from types import SimpleNamespace
        >>> phase_budgets(SimpleNamespace(timeout_s=120.0), 0.002)
        {'context': 120.0, 'compile': 120.0, 'launch': 5.02}
    """
    budgets = {"context": CONTEXT_S, "compile": float(job.timeout_s)}
    if reference_s is not None:
        budgets["launch"] = hang_bound_s(reference_s)
    return budgets


def warm_cache(pool: ChildPool, job: Job) -> Path:
    """The candidate's warm Triton cache on the trusted side (kernel_cache.py), under the pool's scratch root."""
    return kernel_cache.warm_dir(
        pool.scratch_root, job.variant.source_hash, job.params, job.task.source_hash, job.target
    )


def cached(pool: ChildPool, job: Job, prepare: Any, request: dict[str, Any]) -> tuple[Any, list[int]]:
    """``prepare`` that also seeds the candidate's warm cache into the scratch directory, and names it in
    ``request`` (the child sets TRITON_CACHE_DIR); returns it and a list that receives the entries seeded."""
    seeded: list[int] = []
    iso = pool.isolation
    owner = (isolation.SANDBOX_UID, isolation.SANDBOX_GID) if iso.active and iso.as_root else None
    request["triton_cache"] = kernel_cache.CACHE_NAME

    def wrapped(scratch: Path) -> None:
        if prepare is not None:
            prepare(scratch)
        seeded.append(kernel_cache.seed(scratch, warm_cache(pool, job), owner))

    return wrapped, seeded


def cache_use(stage: str, scratch: Path, seeded: list[int]) -> kernel_cache.CacheUse:
    """What a reading child did with its seeded cache: entries given, entries it compiled anew (misses)."""
    given = seeded[0] if seeded else 0
    return kernel_cache.CacheUse(stage, given, len(kernel_cache.entries(scratch / kernel_cache.CACHE_NAME)) - given)


def harvest(pool: ChildPool, job: Job, outcome: ChildOutcome, seeded: list[int], stage: str) -> None:
    """After the AOT child's sandbox is dead: keep what it compiled, and record the use on the job.

    Only the AOT stage's entries are kept: its child ran the candidate's module and ``launch`` on fake
    tensors before compiling, code the static rules allow no file writes, so it cannot plant an entry.
    The check and benchmark children only read the warm entries (what they add is counted, then dropped).
    """
    warm = warm_cache(pool, job)
    warm.mkdir(parents=True, exist_ok=True)
    job.kernel_cache.append(kernel_cache.harvest(outcome.scratch, warm, seeded[0] if seeded else 0, stage))


def largest_checked(job: Job, shapes: Sequence[Shape]) -> str:
    """What an interpreter ``ok`` does not cover: every benchmark shape it did not run itself."""
    if not shapes:
        return "shapes: none checked"

    def size(s: Shape) -> int:
        return math.prod(int(v) for v in s.values())

    big = max(shapes, key=size)
    ran = {shape_key(s) for s in shapes}
    missed = [s for s in job.shapes if shape_key(s) not in ran and size(s) > size(big)]
    if not missed:
        return f"shapes: correctness checked up to {shape_key(big)}, the largest benchmark shape included"
    bench = max(missed, key=size)
    return (
        f"shapes: correctness checked up to {shape_key(big)} (product of dimensions {size(big)}); "
        f"no full benchmark shape was run, e.g. {shape_key(bench)} (product {size(bench)}): check on a GPU "
        "(--backend cuda checks the benchmark shapes)"
    )


def static_stage(job: Job) -> EvalResult | None:
    finding = check_source(job.variant.source, job.static_rules)
    if finding is not None:  # a source that does not parse is a compile error, every other rule a refusal
        verdict = Verdict.COMPILE_ERROR if finding.reason == "syntax_error" else Verdict.REJECTED
        return job.result(verdict, finding.reason, finding.message, device="static check (nothing ran)")
    unknown = sorted(set(job.params) - set(job.variant.space))
    if job.variant.space and unknown:
        return job.result(
            Verdict.INVALID_CONFIG,
            "unknown_parameter",
            f"parameters {unknown} are not in the variant's SPACE {sorted(job.variant.space)}",
        )
    return None


def evaluate_job(job: Job, backend: str, implementation: Callable[[Job], EvalResult]) -> EvalResult:
    """The static check, then ``implementation`` (a backend's own stages) unless the check refused the source,
    then what every result carries: the backend, the software versions, the wall time, the walls its children
    ran behind and, on an ``ok``, a backward that was not judged."""
    start = time.monotonic()
    result = static_stage(job) or implementation(job)
    result.backend = backend
    result.versions = result.versions or software_versions()
    result.wall_s = time.monotonic() - start
    result.walls = {**job.walls, **result.walls}
    note = training_note(job.task, job.variant)
    if note is not None and result.verdict is Verdict.OK:
        result.unchecked.append(note)
    return result


def task_path(job: Job) -> str:
    """Where the child finds the task file: a copy in its scratch directory (relative to its cwd), since
    the sandbox's user may not be able to read the original's directory."""
    return f"{TASK_DIR}/{Path(job.task.path).name}"


def copy_task(scratch: Path, job: Job) -> None:
    (scratch / TASK_DIR).mkdir(exist_ok=True)
    (scratch / task_path(job)).write_bytes(Path(job.task.path).read_bytes())


def candidate_bytes(job: Job) -> bytes:
    """The exact bytes the grammar checked (UTF-8); the child imports them only if their SHA-256 is the
    request's ``candidate_sha256`` (child/common.load_candidate)."""
    return job.variant.source.encode("utf-8")


def _write_candidate(job: Job) -> Any:
    def prepare(scratch: Path) -> None:
        (scratch / CANDIDATE_FILE).write_bytes(candidate_bytes(job))
        copy_task(scratch, job)

    return prepare


def load_factor() -> float:
    """How much slower than idle this machine is likely to run a child: the 1-minute load average per
    CPU, at least 1 and at most 4 (7 test runs on 2 cores measured a load of 6-9, 3-4.5 per CPU)."""
    try:
        load = os.getloadavg()[0] / max(1, os.cpu_count() or 1)
    except OSError:
        return 1.0
    return min(4.0, max(1.0, load))


def budget_s(job: Job, multiple: float = 1.0) -> float:
    """A child's overall deadline: the job's timeout (x ``multiple``) scaled by the measured load."""
    return job.timeout_s * multiple * load_factor()


def child_failure(job: Job, outcome: ChildOutcome, what: str) -> EvalResult | None:
    """Map a child that produced no usable report, or reported an error, to a verdict."""
    if outcome.walls is not None:  # stored with the result (EvalResult.walls): which walls this stage ran behind
        job.walls[what] = outcome.walls.summary()
    if outcome.status == "walls_down":
        problem = outcome.walls.problem if outcome.walls is not None else "a wall did not install"
        return job.result(
            Verdict.CRASHED,
            "wall_not_installed",
            f"evaluator error, not the candidate's: {problem} (the {what}); nothing it reported was "
            "judged. `warpforge doctor` shows which walls install on this machine",
        )
    if outcome.status == "timeout":
        if outcome.phase:
            budget = (
                f"the '{outcome.phase}' phase's budget of {outcome.limit_s:.3g} s (set from the reference's "
                "measured time, or the job timeout for 'compile')"
            )
        else:
            budget = (
                f"its budget of {outcome.limit_s or job.timeout_s:.3g} s (the job timeout of "
                f"{job.timeout_s:g} s x the machine's load factor {outcome.limit_s / job.timeout_s:.2g})"
                if outcome.limit_s
                else f"the job timeout of {job.timeout_s:g} s"
            )
        return job.result(
            Verdict.TIMEOUT,
            "timed_out",
            f"the {what} did not finish within {budget}; its sandbox was killed and a fresh worker "
            "took its place. Raise the budget with `warpforge eval --timeout S` (Job.timeout_s) if "
            "the variant is honest but slow here",
        )
    if outcome.status == "oom":
        return job.result(
            Verdict.RUNTIME_ERROR,
            "out_of_memory",
            f"the {what} used {outcome.peak_rss / 2**30:.1f} GiB of host memory, over its "
            f"{job.rss_limit_bytes / 2**30:g} GiB limit, and was killed",
        )
    if outcome.status == "flooded":
        return job.result(
            Verdict.REJECTED,
            "output_flood",
            f"the {what} sent {outcome.flood} on the result pipe; reading stopped at the cap and its "
            "sandbox was killed (sandbox.MAX_MARKS, MAX_MARK_BYTES, MAX_REPORT_BYTES)",
        )
    if outcome.survivors:
        return job.result(
            Verdict.REJECTED,
            "process_escaped",
            f"{outcome.survivors} process(es) of the candidate were still alive after its sandbox "
            "was killed; nothing it wrote was read",
        )
    if outcome.status == "malformed":
        return job.result(
            Verdict.REJECTED,
            "malformed_report",
            f"the {what}'s report does not fit the protocol ({outcome.malformed}): the harness writes "
            "typed reports, so something else in the candidate's process wrote it",
        )
    if outcome.status == "forged":
        return job.result(
            Verdict.REJECTED,
            "forged_report",
            "the child's report did not carry this evaluation's nonce: something other than the "
            "harness wrote to the result pipe",
        )
    if outcome.status == "crashed" or outcome.report is None:
        code = outcome.returncode
        tail = outcome.stderr_tail.strip().splitlines()[-1:] or [""]
        if code == 0:
            return job.result(
                Verdict.CRASHED,
                "exited_without_report",
                f"the candidate ended the {what} process (exit code 0) before the harness reported; "
                "only the trusted side issues verdicts",
            )
        return job.result(
            Verdict.CRASHED,
            "process_died",
            f"the candidate process exited with code {code} before reporting: {tail[0][:300]}",
        )
    err = outcome.report.get("error")
    if not err:
        return None
    summary = f"{err['type']}: {err['message'].splitlines()[0][:400] if err['message'] else ''}"
    kind = err["kind"]
    if kind == "sandbox":
        return job.result(
            Verdict.REJECTED,
            "sandbox_violation",
            f"the candidate tried something the sandbox forbids ({summary}): writing outside its "
            "scratch directory, reading other processes, creating processes or reaching the network",
        )
    if kind == "import":
        return job.result(
            Verdict.COMPILE_ERROR,
            "import_failed",
            f"the variant failed to import ({summary}); install the missing module or remove the import",
        )
    if kind == "compile":
        return job.result(Verdict.COMPILE_ERROR, "compile_failed", summary)
    if kind == "resources":
        return job.result(Verdict.INVALID_CONFIG, "out_of_resources", summary)
    if kind == "wall_not_installed":  # child/__main__.py: its filter did not install; no candidate code ran
        return job.result(
            Verdict.CRASHED, "wall_not_installed", f"evaluator error, not the candidate's: {err['message'][:600]}"
        )
    if kind == "evaluator_limit":  # child/__main__.py: the cap it was asked to set, not the candidate
        return job.result(
            Verdict.CRASHED, "evaluator_limit", f"evaluator error, not the candidate's: {err['message'][:600]}"
        )
    if kind == "argument":  # child/launcher.py: typed as the compiler types kernel arguments
        rule = err.get("rule") if err.get("rule") in ARGUMENT_RULES else "kernel_argument_type"
        return job.result(Verdict.REJECTED, rule, f"{err['message'][:600]}")
    if kind == "interpreter_layout":  # child/faithful.py, child/grid.py: fail closed
        return job.result(
            Verdict.UNSUPPORTED,
            "interpreter_internals",
            f"the installed Triton's interpreter is not laid out as warpforge's faithful layer "
            f"expects ({err['message'][:400]}): no CPU verdict; check on a GPU (--backend cuda)",
        )
    if kind == "state_mismatch":  # child/model_new.py: ModelNew's parameters are not the reference's
        return job.result(Verdict.REJECTED, "state_mismatch", err["message"][:1000])
    simple = {
        "oom": "out_of_memory",
        "exit": "exit_called",
        "illegal_memory_access": "illegal_memory_access",
        "device_assert": "device_assert",
    }
    if kind in simple:
        return job.result(Verdict.RUNTIME_ERROR, simple[kind], summary)
    if err["stage"] == "constraints":
        return job.result(Verdict.RUNTIME_ERROR, "constraints_failed", f"constraints() raised {summary}")
    return job.result(Verdict.RUNTIME_ERROR, "exception", summary)


class CaseFeed:
    """Answers the check child's ``need`` marks: a case's inputs, only after the candidate is imported
    (mark ``imported``), each case once (the pair's case once more for the rerun, the ghost and each perturbed
    run). Nothing is on disk."""

    def __init__(self, plan: CheckPlan) -> None:
        self.by_id = {c.id: c for c in plan.cases}
        self.grad_outs = plan.grad_outs  # a training check sends each case's upstream gradient after its inputs
        self.allowed = {c.id: 1 for c in plan.cases}
        if plan.pair is not None:
            self.allowed[plan.pair.id] = 3 + len(plan.perturb_seeds)
        self.imported = False
        self.refused: list[str] = []

    def __call__(self, msg: dict[str, Any]) -> bytes | None:
        if msg.get("mark") == "imported":
            self.imported = True
            return None
        if msg.get("mark") != "need":
            return None
        case_id = msg.get("case")
        if not self.imported or not isinstance(case_id, int) or self.allowed.get(case_id, 0) <= 0:
            self.refused.append(f"case {case_id!r} ({'before import' if not self.imported else 'not due'})")
            return None
        self.allowed[case_id] -= 1
        buffer = io.BytesIO()
        inputs = self.by_id[case_id].inputs
        torch.save((*inputs, self.grad_outs[case_id]) if case_id in self.grad_outs else inputs, buffer)
        return buffer.getvalue()


def add_spec_cases(plan: CheckPlan, job: Job, dtypes: Sequence[torch.dtype], rng: random.Random) -> None:
    """One case at the smallest shape that has each benchmark shape's specialization (the AOT child found it:
    child/compile._smallest_shapes), so the interpreter runs the path the compiled benchmark kernel takes."""
    from warpforge.evaluator.judge.judge import Case, reference_error
    from warpforge.kernels.taskdef import parse_dtype

    have = {(shape_key(c.shape), c.dtype) for c in plan.cases}
    for entry in job.spec_shapes:
        shape, dtype = entry.get("shape"), parse_dtype(str(entry.get("dtype")))
        if not shape or dtype not in dtypes or (shape_key(shape), dtype) in have:
            continue
        # keys that size nothing (a group count) stay as every benchmark shape has them: elsewhere the reference
        # is another function than the one the variant was specialized for (child/compile.py keeps them)
        moved = [
            k
            for k in job.task.fixed_keys
            if k in shape and all(k in s and int(s[k]) != int(shape[k]) for s in job.task.shapes)
        ]
        if moved:
            plan.notes.append(f"specializations: {shape_key(shape)} changes {', '.join(sorted(moved))}; not checked")
            continue
        have.add((shape_key(shape), dtype))
        seed = rng.getrandbits(31)
        try:
            inputs = tuple(job.task.make_inputs(dict(shape), dtype, seed, "cpu"))
        except Exception as exc:  # noqa: BLE001 - the task's code: the specialization stays unjudged (spec_stage)
            plan.notes.append(f"specializations: make_inputs rejected {shape_key(shape)} ({type(exc).__name__})")
            continue
        # the shape is the child's answer: where the task's own function is not defined (its reference raises)
        # nothing can be compared, and the specialization stays unjudged (spec_stage says so)
        why = reference_error(job.task, inputs)
        if why is not None:
            plan.notes.append(f"specializations: the reference does not run at {shape_key(shape)} ({why}); not checked")
            continue
        sentinel = math.nan if len(plan.cases) % 2 == 0 else float(rng.randint(1000, 9000))
        plan.cases.append(Case(len(plan.cases), dict(shape), dtype, seed, sentinel, inputs, scale=True))


def check_stage(
    pool: ChildPool,
    job: Job,
    device: str,
    interpret: bool,
    shapes: Sequence[Shape],
    dtypes: Sequence[torch.dtype],
    budgets: dict[str, float] | None = None,
    ref_device: str = "cpu",
) -> tuple[EvalResult | None, list[str]]:
    """Run the candidate on fresh inputs in a child; judge in this process. Returns (failure, checked)."""
    problem = lint_task(job.task)
    if problem is not None:
        return job.result(Verdict.UNSUPPORTED, "degenerate_task", problem), []
    rng = random.Random(secrets.randbits(64))  # the child never sees this state
    plan = plan_cases(job.task, shapes, dtypes, job.seeds, job.hidden_shapes, rng, scale=job.scale_shapes)
    if interpret:
        add_spec_cases(plan, job, dtypes, rng)
    if interpret:  # the judge's switch: seed and shuffled cases chosen here, the orders verified in judge/judge.py
        plan.grid_seed = rng.getrandbits(31)
        plan.shuffled = frozenset(c.id for i, c in enumerate(plan.cases) if i % 2 == 1)
    training = training_check(job.task, job.variant)
    if training:  # the backward is judged on every case too (judge/gradients.py, judge/training.py)
        add_grad_outs(plan, job.task, rng)

    # Under the interpreter every other case runs its grids in a shuffled order (child/grid.py).
    request: CheckRequest = {
        "mode": "check",
        "candidate": CANDIDATE_FILE,
        "candidate_sha256": job.variant.source_hash,
        "params": job.params,
        "device": device,
        "constraint_shapes": [constraint_shape(s, job.target) for s in job.shapes],
        "grid_seed": plan.grid_seed or 0,
        "cases": [{"id": c.id, "sentinel": c.sentinel, "shuffled": c.id in plan.shuffled} for c in plan.cases],
    }
    if training:
        request["training"] = True
    model_spec.attach(request, job.task, job.variant, [c.shape for c in plan.cases])
    if plan.pair is not None:
        request["rerun"] = {"case": plan.pair.id, "sentinel": plan.rerun_sentinel}
        request["ghost"] = {"case": plan.pair.id, "sentinel": float("nan")}
        if interpret:  # the pair again under two seeds of perturbed arithmetic (child/perturb.py)
            plan.perturb_seeds = (rng.getrandbits(31), rng.getrandbits(31))
            request["perturbed"] = {"case": plan.pair.id, "seeds": list(plan.perturb_seeds)}
    cuda = device.startswith("cuda")
    feed = CaseFeed(plan)
    prepare: Any = _write_candidate(job)
    seeded: list[int] = []
    if not interpret:  # a compiling child: the AOT stage's kernels are in its cache (what it adds is not kept)
        prepare, seeded = cached(pool, job, prepare, cast(dict[str, Any], request))
    with pool.running(
        request,
        job.env(interpret, cuda),
        budget_s(job),
        prepare,
        budgets=budgets,
        rss_limit_bytes=job.rss_limit_bytes,
        feed=feed,
    ) as outcome:
        if not interpret:
            job.kernel_cache.append(cache_use("check", outcome.scratch, seeded))
        if feed.refused and outcome.status == "done":
            return job.result(
                Verdict.REJECTED,
                "input_request_refused",
                f"the child asked for inputs out of turn ({feed.refused[:3]}): each case's inputs "
                "are sent once, after the candidate is imported",
            ), []
        failure = child_failure(job, outcome, "correctness check")
        if failure is not None:
            return failure, []
        report = outcome.report or {}
        from warpforge.evaluator.sandbox.child.launcher import spec_key

        for facts in [*report.get("cases", []), report.get("rerun") or {}]:
            for spec in facts.get("specs", []) if isinstance(facts, dict) else []:
                if isinstance(spec, dict) and {"hash", "args", "options"} <= set(spec):
                    job.interpreted_specs[spec_key(spec)] = spec
        if "invalid_config" in report:
            return job.result(
                Verdict.INVALID_CONFIG,
                "constraints_false",
                f"constraints(params, shape) is False for shape {report['invalid_config']}",
            ), []
        failure, checked = (judge_training if training else judge_check)(job, plan, outcome, ref_device)
        if failure is not None:
            failure.unchecked = list(plan.notes)
        return failure, checked


def compile_stage(pool: ChildPool, job: Job) -> tuple[EvalResult | None, list[Resources]]:
    """Ahead-of-time compilation for the target GPU on this machine; no GPU needed."""
    first = job.dtypes[0]
    cases: list[dict[str, Any]] = [{"shape": s, "dtype": dtype_name(first)} for s in job.shapes]
    cases += [{"shape": job.shapes[0], "dtype": dtype_name(d)} for d in job.dtypes[1:]]
    # The check shapes too, compiling only kernels not met yet: a variant that picks another kernel for
    # small sizes has that kernel through Triton's real front end as well (and its hash on the list).
    cases += [
        {"shape": s, "dtype": dtype_name(first), "only_new": True}
        for s in (job.task.check_shapes or job.task.small_shapes)
    ]
    request: dict[str, Any] = {
        "mode": "compile",
        "candidate": CANDIDATE_FILE,
        "candidate_sha256": job.variant.source_hash,
        "params": job.params,
        "task_path": task_path(job),
        "target": job.target,
        "cases": cases,
        "training": training_check(job.task, job.variant),
        # the smallest shape of each benchmark specialization (child/compile.py)
        "spec_budget": SPEC_BUDGET,
        "spec_floor": _floor(job),
    }
    model_spec.attach(request, job.task, job.variant, [c["shape"] for c in cases])
    prepare, seeded = cached(pool, job, _write_candidate(job), request)
    with pool.running(
        request, job.env(interpret=False), budget_s(job), prepare, rss_limit_bytes=job.rss_limit_bytes
    ) as outcome:
        harvest(pool, job, outcome, seeded, "compile")
        failure = child_failure(job, outcome, "ahead-of-time compile")
        report = outcome.report or {}
        resources = [
            Resources(
                kernel=k["kernel"],
                target=job.target,
                registers=k["registers"],
                spill_bytes=k["spill_bytes"],
                shared_bytes=k["shared_bytes"],
                compile_s=k["compile_s"],
                shape=k.get("shape"),
                dtype=k.get("dtype"),
                num_warps=k.get("num_warps"),
            )
            for k in report.get("kernels", [])
        ]
        job.compiled_kernels = sorted(set(report.get("compiled_hashes", [])))
        job.compiled_specs = dict(report.get("compiled_specs") or {})
        job.spec_shapes = [e for e in report.get("spec_shapes") or [] if isinstance(e, dict)]
        if failure is not None:
            return failure, resources
        if not resources:
            return job.result(
                Verdict.REJECTED,
                "no_triton_kernel",
                "launch ran no @triton.jit kernel: the variant must launch a Triton kernel",
            ), resources
        limit = limits(job.target).shared_bytes
        for r in resources:
            if r.shared_bytes is not None and r.shared_bytes > limit:
                return job.result(
                    Verdict.INVALID_CONFIG,
                    "out_of_resources",
                    f"{r.kernel} needs {r.shared_bytes} bytes of shared memory; {job.target} allows {limit}",
                    resources=resources,
                ), resources
        return None, resources


# A benchmark specialization is interpreted at a shape of at most this many elements (product of dimensions):
# 4x the benchmark-scale budget (interpret.SCALE_BUDGET, ~2.5 s), so ~10 s for an elementwise kernel here.
SPEC_BUDGET = 1 << 18


def _floor(job: Job) -> dict[str, int]:
    """Each dimension's smallest check value: where the shrinking search for a specialization's shape starts."""
    small = job.task.check_shapes or job.task.small_shapes
    dims = set().union(*(s.keys() for s in small)) if small else set()
    return {d: min(int(s[d]) for s in small if d in s) for d in dims}


# At most this many interpreted specializations are compiled after the check: each costs 0.5-1.5 s (DESIGN.md
# section 8) and an honest variant meets a few (one per constexpr block size its hidden shapes pick).
MAX_LATE_SPECS = 64


def spec_stage(
    pool: ChildPool, job: Job, dtypes: Sequence[torch.dtype] | None = None
) -> tuple[EvalResult | None, list[Resources], str]:
    """The kernel judged is the kernel that would run: every specialization the interpreter ran is compiled for
    the target too (those the AOT stage did not meet, in one more compile child); one the compiler rejects is a
    compile error, one that cannot be compiled from this source is refused. Returns the failure, the resources of
    the late compiles and a sentence for the ``ok``."""
    missing = {k: v for k, v in job.interpreted_specs.items() if k not in job.compiled_specs}
    if len(missing) > MAX_LATE_SPECS:
        return (
            job.result(
                Verdict.REJECTED,
                "too_many_specializations",
                f"the interpreter ran {len(missing)} kernel specializations the ahead-of-time compile had "
                f"not met (at most {MAX_LATE_SPECS} are compiled afterwards): constexprs that take a new "
                "value on every shape recompile on every call on a GPU too",
            ),
            [],
            "",
        )
    resources: list[Resources] = []
    started = time.monotonic()
    if missing:
        first = job.dtypes[0]
        request: dict[str, Any] = {
            "mode": "compile",
            "candidate": CANDIDATE_FILE,
            "candidate_sha256": job.variant.source_hash,
            "params": job.params,
            "task_path": task_path(job),
            "target": job.target,
            "cases": [],
            "specs": list(missing.values()),
            "training": False,
            "dtype": dtype_name(first),
        }
        model_spec.attach(request, job.task, job.variant, [])
        prepare, seeded = cached(pool, job, _write_candidate(job), request)
        with pool.running(
            request, job.env(interpret=False), budget_s(job), prepare, rss_limit_bytes=job.rss_limit_bytes
        ) as outcome:
            harvest(pool, job, outcome, seeded, "compile")
            report = outcome.report or {}
            failure = child_failure(job, outcome, "ahead-of-time compile of the interpreted specializations")
            if failure is not None:
                if failure.verdict is Verdict.COMPILE_ERROR:
                    failure.reason = "specialization_compile_failed"
                    failure.message = (
                        f"a specialization the interpreter ran does not compile for {job.target} "
                        f"({report.get('failed_spec', '?')[:300]}): {failure.message}"
                    )
                return failure, resources, ""
            job.compiled_specs.update(report.get("compiled_specs") or {})
            resources = [
                Resources(
                    kernel=k["kernel"],
                    target=job.target,
                    registers=k["registers"],
                    spill_bytes=k["spill_bytes"],
                    shared_bytes=k["shared_bytes"],
                    compile_s=k["compile_s"],
                    num_warps=k.get("num_warps"),
                )
                for k in report.get("kernels", [])
            ]
    never = sorted(k for k in job.interpreted_specs if k not in job.compiled_specs)
    if never:
        spec = job.interpreted_specs[never[0]]
        return (
            job.result(
                Verdict.REJECTED,
                "specialization_not_compiled",
                f"the interpreter ran {spec.get('kernel')} as {never[0][:300]}, which the ahead-of-time "
                f"compile for {job.target} could not build from this source (not a module-level "
                "@triton.jit function): the kernel judged must be a kernel that would run",
            ),
            resources,
            "",
        )
    shipped = sorted(k for k, kind in job.compiled_specs.items() if kind == "benchmark")
    found = {e.get("key"): e for e in job.spec_shapes}
    checked = {dtype_name(d) for d in (job.dtypes if dtypes is None else dtypes)}
    # a dtype the interpreter does not check at all (bf16 with tl.dot) is named in the ok already
    unjudged = [
        k
        for k in shipped
        if k not in job.interpreted_specs and str(found.get(k, {}).get("dtype", next(iter(checked), ""))) in checked
    ]
    if unjudged:
        entry = found.get(unjudged[0], {})
        where = (
            f"its smallest shape found is {shape_key(entry['smallest'])}, over the interpreter's budget of "
            f"{SPEC_BUDGET} elements"
            if entry.get("smallest") and not entry.get("shape")
            else "no smaller shape has it"
        )
        return (
            job.result(
                Verdict.UNSUPPORTED,
                "specialization_not_interpreted",
                f"{len(unjudged)} of the {len(shipped)} kernel specializations compiled for the benchmark "
                f"shapes never ran in the interpreter (e.g. {unjudged[0][:240]}; {where}): a CPU ok would "
                "judge other code than the GPU runs; check it with --backend cuda",
            ),
            resources,
            "",
        )
    note = (
        f"specializations: all {len(job.interpreted_specs)} interpreted were compiled for {job.target} "
        f"({len(missing)} after the check, {time.monotonic() - started:.1f} s), and all {len(shipped)} benchmark "
        "ones were interpreted"
    )
    return None, resources, note


def space_stage(pool: ChildPool, job: Job) -> tuple[EvalResult | None, list[dict[str, Any]]]:
    """The configurations of SPACE that satisfy ``constraints`` on every benchmark shape (run in a child).

    The grammar comes first: ``constraints`` is the candidate's code, and none of it runs unchecked."""
    refused = static_stage(job)
    if refused is not None:
        return refused, []
    request = {
        "mode": "space",
        "candidate": CANDIDATE_FILE,
        "candidate_sha256": job.variant.source_hash,
        "space": job.variant.space,
        "shapes": [constraint_shape(s, job.target) for s in job.shapes],
    }
    with pool.running(
        request, job.env(interpret=True), budget_s(job), _write_candidate(job), rss_limit_bytes=job.rss_limit_bytes
    ) as outcome:
        failure = child_failure(job, outcome, "constraint enumeration")
        if failure is not None:
            return failure, []
        report = outcome.report or {}
        # Each reported value is mapped back to SPACE's own (the child is the candidate's process: a row is a
        # claim). One that is not in SPACE is a malformed report, never a parameter.
        names = list(job.variant.space)
        configs = []
        for row in report.get("feasible", []):
            ours = [
                next((v for v in job.variant.space[n] if _same_value(v, got)), _MISSING) for n, got in zip(names, row)
            ]
            if any(v is _MISSING for v in ours):
                return job.result(
                    Verdict.REJECTED,
                    "malformed_report",
                    f"the constraint enumeration reported {str(row)[:80]}, not a configuration of SPACE: "
                    "the harness reports SPACE's own values",
                ), []
            configs.append(dict(zip(names, ours)))
        return None, configs


_MISSING = object()


def _same_value(ours: Any, got: Any) -> bool:
    """SPACE's value and the child's JSON copy of it: equal and of the same type (JSON true is not 1)."""
    return type(ours) is type(got) and ours == got
