"""Trusted-side judgement of a ``check`` run: from the child's raw facts and saved outputs to a verdict.

The child (child_check.py) only reports what happened; every decision is taken here, in the process
that never imported the candidate. In order (the first finding wins; cheating outranks inaccuracy):

1. files written next to the candidate, global numeric flags flipped, harness functions replaced;
2. per launch: non-Tensor outputs, outputs aliasing inputs, threads left running, torch operators
   called outside Triton, no Triton launch at all, inputs modified;
3. the rerun pair: the same inputs under a NaN and a finite sentinel must agree (never-written
   elements and reads of uninitialised memory show here);
4. values against the float64 reference, published shapes first, then the hidden ones; a wrong
   answer is refined (replayed from an earlier call, unwritten, constant, precision downgrade);
5. kernels did the work: every launch made a Triton launch, and in the ghost replay (every Triton
   launch disabled) the output is no longer right.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch

from warpforge.evaluator.judge.compare import (
    PrecisionProbe,
    compare_with_spread,
    forward_references,
    is_sentinel,
    references,
    refine,
)
from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.protocol import CheckReport, LaunchFacts
from warpforge.evaluator.sandbox.readback import OUTPUT_CAP, NotReadable, load_saved, read_regular
from warpforge.evaluator.sandbox.sentinel import exact_sentinel
from warpforge.evaluator.sandbox.supervisor import ChildOutcome
from warpforge.evaluator.static.checks import disallowed_ops
from warpforge.kernels.taskdef import Shape, Task, dtype_name, shape_key

# Hidden shapes stay within 1.2x of a check shape (+2): the interpreter's cost grows with size.
HIDDEN_GROWTH = 1.2


@dataclass
class Case:
    """One correctness case: inputs made here from a seed the child never sees."""

    id: int
    shape: Shape
    dtype: torch.dtype
    seed: int
    sentinel: float
    inputs: tuple[Any, ...]
    hidden: bool = False
    adversarial: str = ""  # the name of the task's adversarial input set, "" for random inputs
    precision: bool = False  # the task's accumulation-precision case (Task.accumulation)
    scale: bool = False  # a benchmark-scale case (scale_shapes)
    # a training check's upstream gradient seed (judge/gradients.py): with ``seed`` and the shape, the labelled
    # case replays exactly (make_inputs, then draw_grad_out)
    grad_seed: int | None = None

    @property
    def label(self) -> str:
        tag = " (hidden shape)" if self.hidden else ""
        tag += f" (adversarial inputs: {self.adversarial})" if self.adversarial else ""
        tag += " (cancelling long reduction)" if self.precision else ""
        tag += " (benchmark scale)" if self.scale else ""
        grad = f" grad_seed={self.grad_seed}" if self.grad_seed is not None else ""
        return f"{shape_key(self.shape)} {dtype_name(self.dtype)} seed={self.seed}{grad}{tag}"


@dataclass
class CheckPlan:
    cases: list[Case]
    pair: Case | None  # the case rerun under a second sentinel and replayed without kernels
    rerun_sentinel: float
    notes: list[str]
    grid_seed: int | None = None  # interpreter only: the seed of the shuffled grid orders (child/grid.py)
    shuffled: frozenset[int] = frozenset()  # the cases whose launches run their programs shuffled
    # A training check (evaluator/judge/gradients.py): each case's upstream gradient, sent after its inputs.
    grad_outs: dict[int, torch.Tensor] = field(default_factory=dict)
    # Interpreter only: the seeds of the pair's runs under perturbed arithmetic (child/perturb.py).
    perturb_seeds: tuple[int, ...] = ()


def _primes(lo: int, hi: int) -> list[int]:
    return [n for n in range(max(lo, 2), hi + 1) if all(n % d for d in range(2, int(n**0.5) + 1))]


def perturb_dim(value: int, rng: random.Random) -> int:
    """A random size near ``value``: a prime (a non-multiple of every tile size) in [value/2, 1.2 value + 2]."""
    if value <= 3:
        return rng.randint(1, 4)
    choices = _primes(value // 2, int(value * HIDDEN_GROWTH) + 2)
    return rng.choice(choices) if choices else value + 1


def split(plain: Sequence[torch.Tensor], moved: Sequence[torch.Tensor]) -> str:
    """Where a perturbed run's outputs leave the plain run's: the first element that differs most."""
    for i, (a, b) in enumerate(zip(plain, moved)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"output {i} came back {tuple(b.shape)} {b.dtype}, not {tuple(a.shape)} {a.dtype}"
        if a.is_floating_point():
            diff = (a.double() - b.double()).abs().nan_to_num(nan=math.inf)
            if diff.numel() and float(diff.max()) > 0:
                at = int(diff.argmax())
                return f"output {i} splits at flat index {at}: {float(a.flatten()[at]):.6g} plain, " + (
                    f"{float(b.flatten()[at]):.6g} perturbed"
                )
        elif not torch.equal(a, b):
            at = int((a != b).flatten().nonzero()[0])
            return f"output {i} splits at flat index {at}: {a.flatten()[at].item()} plain, {b.flatten()[at].item()}"
    return "the outputs agree with the plain run's elementwise at the largest difference"


def race_message(found: list[Any], label: str) -> str:
    """The first race a launch reported (child/races.py), for a person: the element and the two programs."""
    first = found[0] if isinstance(found[0], dict) else {}
    programs = first.get("programs") or [[], []]
    where = str(first.get("where", "?"))[:80]  # the child's claim: printed through inert() where read
    kind = "both store" if first.get("kind") == "store/store" else "one stores, the other loads"
    return (
        f"programs {tuple(programs[0])} and {tuple(programs[1])} of one launch touch {where} ({label}): {kind} "
        f"without an atomic, so a GPU running them at once loses or reads a partial update ({len(found)} race(s) "
        "reported); use tl.atomic_add (or another atomic) for shared accumulators"
    )


def hidden_shapes(task: Task, rng: random.Random, count: int = 1) -> list[Shape]:
    """Small shapes nobody has seen, derived from CHECK_SHAPES with the parent's unpredictable RNG.

    A variant hard-coded to the published sizes (benchmark or check) passes those and fails these. Keys that
    size no input (``Task.fixed_keys``: a reduced dimension's index, a flag) keep the base shape's value.
    """
    base = list(task.check_shapes or task.small_shapes)
    known = {shape_key(s) for s in [*task.shapes, *task.check_shapes, *task.small_shapes]}
    out: list[Shape] = []
    for _ in range(20 * count):
        if len(out) >= count or not base:
            break
        shape = {k: int(v) if k in task.fixed_keys else perturb_dim(int(v), rng) for k, v in rng.choice(base).items()}
        if shape_key(shape) not in known:
            known.add(shape_key(shape))
            out.append(shape)
    return out


def _input_shapes(inputs: Sequence[Any]) -> list[tuple[int, ...]]:
    return [tuple(x.shape) for x in inputs if isinstance(x, torch.Tensor)]


def reference_error(task: Task, inputs: tuple[Any, ...]) -> str | None:
    """Why the task's reference raises on these inputs (its exception's name); None when it runs."""
    try:
        task.reference(*inputs)
    except Exception as exc:  # noqa: BLE001 - the task's own code at a shape it may not be defined at
        return type(exc).__name__
    return None


def plan_cases(
    task: Task,
    shapes: Sequence[Shape],
    dtypes: Sequence[torch.dtype],
    seeds: int,
    hidden: int,
    rng: random.Random,
    scale: Sequence[Shape] = (),
) -> CheckPlan:
    """Cases for the published shapes (``seeds`` each), then ``hidden`` fresh shapes (one seed each).

    Sentinels alternate NaN and a random finite value, so output left unwritten fails either the finite
    check or the value check. The rerun pair is the first NaN case of the largest published shape.
    """
    cases: list[Case] = []
    notes: list[str] = []

    def add(shape: Shape, dtype: torch.dtype, s: int, is_hidden: bool) -> Case:
        seed = rng.getrandbits(31)
        sentinel = math.nan if s % 2 == 0 else float(rng.randint(1000, 9000))
        inputs = tuple(task.make_inputs(dict(shape), dtype, seed, "cpu"))
        case = Case(len(cases), dict(shape), dtype, seed, sentinel, inputs, is_hidden)
        cases.append(case)
        return case

    for shape in shapes:
        for dtype in dtypes:
            for s in range(seeds):
                add(shape, dtype, s, False)
    public = list(cases)
    runs_here: bool | None = None
    for shape in hidden_shapes(task, rng, hidden):
        for dtype in dtypes:
            try:
                case = add(shape, dtype, 0, True)
            except Exception as exc:  # noqa: BLE001 - a task whose inputs need a particular shape
                notes.append(f"hidden shapes: make_inputs rejected {shape_key(shape)} ({type(exc).__name__})")
                break
            if runs_here is None:  # a reference that needs the GPU (fp8) runs at no shape here: no test
                runs_here = bool(public) and reference_error(task, public[0].inputs) is None
            why = reference_error(task, case.inputs) if runs_here else None
            if why is not None:
                # the task's own function is not defined there (a problem's 3x5x7 kernel over a hidden 4x4x8
                # input): no kernel can be judged at that shape
                cases.pop()
                notes.append(f"hidden shapes: the reference does not run at {shape_key(shape)} ({why}); not a case")
                break
            if any(_input_shapes(case.inputs) == _input_shapes(c.inputs) for c in public):
                cases.pop()  # make_inputs ignores the shape dict (KernelBench files): nothing hidden here
                notes.append("hidden shapes: the task's make_inputs ignores the shape, so none was tried")
                break
    _add_adversarial(task, cases, dtypes, rng, notes)
    _add_precision(task, cases, dtypes, rng)
    for shape in scale:  # benchmark scale: one seed, the first dtype (interpret.scale_shapes)
        seed = rng.getrandbits(31)
        try:
            inputs = tuple(task.make_inputs(dict(shape), dtypes[0], seed, "cpu"))
        except Exception as exc:  # noqa: BLE001 - a task whose inputs need a particular shape
            notes.append(f"benchmark scale: make_inputs rejected {shape_key(shape)} ({type(exc).__name__})")
            continue
        sentinel = math.nan if len(cases) % 2 == 0 else float(rng.randint(1000, 9000))
        cases.append(Case(len(cases), dict(shape), dtypes[0], seed, sentinel, inputs, scale=True))
    nan_cases = [c for c in public if math.isnan(c.sentinel)]
    pair = max(nan_cases, key=lambda c: (math.prod(c.shape.values()), -c.id)) if nan_cases else None
    return CheckPlan(cases, pair, float(rng.randint(1000, 9000)), notes)


def _add_adversarial(
    task: Task, cases: list[Case], dtypes: Sequence[torch.dtype], rng: random.Random, notes: list[str]
) -> None:
    """The task's declared adversarial inputs, on its largest check shape, every dtype, one seed each."""
    make = task.adversarial_inputs
    base = list(task.check_shapes or task.small_shapes)
    if make is None or not base:
        notes.append("adversarial inputs: the task declares none (adversarial_inputs in its task file)")
        return
    shape = max(base, key=lambda s: math.prod(s.values()))
    for dtype in dtypes:
        seed = rng.getrandbits(31)
        for name, inputs in make(dict(shape), dtype, seed, "cpu").items():
            sentinel = math.nan if len(cases) % 2 == 0 else float(rng.randint(1000, 9000))
            cases.append(Case(len(cases), dict(shape), dtype, seed, sentinel, tuple(inputs), adversarial=name))


def _add_precision(task: Task, cases: list[Case], dtypes: Sequence[torch.dtype], rng: random.Random) -> None:
    """One case per PRECISION_SHAPE and dtype narrower than the task's accumulation precision, with inputs
    chosen so that accumulating in that narrower dtype fails the tolerance (taskdef.Task.accumulation)."""
    acc, make = task.accumulation, task.precision_inputs
    if acc is None or make is None:
        return
    wide = torch.finfo(acc).bits
    for shape in task.precision_shapes:
        for dtype in dtypes:
            if not dtype.is_floating_point or torch.finfo(dtype).bits >= wide:
                continue
            seed = rng.getrandbits(31)
            sentinel = math.nan if len(cases) % 2 == 0 else float(rng.randint(1000, 9000))
            cases.append(
                Case(
                    len(cases),
                    dict(shape),
                    dtype,
                    seed,
                    sentinel,
                    tuple(make(dict(shape), dtype, seed, "cpu")),
                    precision=True,
                )
            )


def _fail(job: Job, verdict: Verdict, reason: str, message: str) -> EvalResult:
    return job.result(verdict, reason, message)


class Judge:
    """Turns one check report into a verdict; ``checked`` lists the cases that passed."""

    def __init__(self, job: Job, plan: CheckPlan, outcome: ChildOutcome, ref_device: str = "cpu") -> None:
        self.job, self.plan, self.outcome, self.ref_device = job, plan, outcome, ref_device
        self.report = cast(CheckReport, outcome.report or {})
        self.checked: list[str] = []
        self.tampered_files: list[str] = []
        self._refs: dict[int, tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]] = {}

    def refs(self, case: Case) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        if case.id not in self._refs:
            self._refs[case.id] = references(self.job.task.reference, case.inputs, self.ref_device)
        return self._refs[case.id]

    def _hashes(self) -> dict[str, str]:
        facts = [
            *self.report.get("cases", []),
            self.report.get("rerun") or {},
            self.report.get("ghost") or {},
            *self._perturbed_facts(),
        ]
        return {f["saved"]: f.get("sha256", "") for f in facts if isinstance(f, dict) and f.get("saved")}

    def _perturbed_facts(self) -> list[LaunchFacts]:
        runs = self.report.get("perturbed")
        return [r for r in runs if isinstance(r, dict)] if isinstance(runs, list) else []

    def load(self, name: str) -> dict[str, Any] | None:
        """A saved output, only if its bytes are those whose hash the child reported (else None)."""
        try:  # a regular file of the child's, never a link or FIFO, at most OUTPUT_CAP bytes (readback.py)
            data = read_regular(self.outcome.scratch / name, OUTPUT_CAP)
        except (FileNotFoundError, NotReadable):
            return None
        if hashlib.sha256(data).hexdigest() != self._hashes().get(name):
            self.tampered_files.append(name)
            return None
        return load_saved(data)  # None unless it is a saved case as the harness writes one

    def judge(self) -> EvalResult | None:
        found = (
            self._environment()
            or self._grid_orders()
            or self._launches()
            or self._pair()
            or self._values()
            or self._perturbed()
            or self._ghost()
            or self._compiled()
        )
        if self.tampered_files:  # a file changed after its hash was reported outranks what it led to
            return _fail(
                self.job,
                Verdict.REJECTED,
                "output_tampered",
                f"{sorted(set(self.tampered_files))[:3]} "
                "changed after the child reported their hashes: something rewrote the outputs",
            )
        return found

    def _grid_orders(self) -> EvalResult | None:
        """Under the interpreter, every launch's program order is the one this process's seed gives.

        The child logs [gx, gy, gz, shuffled, digest] per launch; replaying the same RNG here, each
        shuffled case's launches must claim the shuffle and its exact order, each other case grid order,
        and there must be one log entry per Triton launch counted. A candidate that switched the shuffle
        off, replaced the executor or edited the log disagrees with the replay.
        """
        if self.plan.grid_seed is None:
            return None
        from warpforge.evaluator.sandbox.child.grid import expected_order, order_digest

        rng = random.Random(self.plan.grid_seed)
        facts: list[LaunchFacts] = [*self.report.get("cases", [])]
        rerun = self.report.get("rerun")
        if rerun:
            facts.append(rerun)
        facts += self._perturbed_facts()  # launched after the rerun, in the child's order
        for info in facts:
            shuffled = info.get("case", info.get("id")) in self.plan.shuffled  # the rerun reports "case"
            grids = info.get("grids")
            if not isinstance(grids, list) or len(grids) != info.get("kernel_calls"):
                return self._order_fail(
                    f"{len(grids) if isinstance(grids, list) else 'no'} logged grid orders for "
                    f"{info.get('kernel_calls')} kernel launches"
                )
            for entry in grids:
                if not (isinstance(entry, list) and len(entry) == 5 and all(isinstance(v, int) for v in entry[:3])):
                    return self._order_fail(f"a malformed grid log entry {str(entry)[:80]}")
                grid = (entry[0], entry[1], entry[2])
                if grid[0] * grid[1] * grid[2] > 1 << 22:
                    return self._order_fail(f"a logged grid of {grid}")
                want = order_digest(expected_order(grid, shuffled, rng))
                if bool(entry[3]) != shuffled or entry[4] != want:
                    ran = "in grid order" if not entry[3] else "in an order other than the judge-seeded one"
                    chose = "shuffled" if shuffled else "ran in order"
                    return self._order_fail(f"a launch of grid {grid} ran {ran} in a case the judge {chose}")
        return None

    def _order_fail(self, what: str) -> EvalResult:
        return _fail(
            self.job,
            Verdict.REJECTED,
            "grid_order_tampered",
            f"{what}: the program order the judge chose (to expose races between programs) was not the order that ran",
        )

    def _compiled(self) -> EvalResult | None:
        """Every kernel launched in the check is one the ahead-of-time stage compiled (by source hash)."""
        compiled = getattr(self.job, "compiled_kernels", None)
        if not compiled:
            return None
        facts = [*self.report.get("cases", []), self.report.get("rerun") or {}]
        launched = {k for f in facts for k in f.get("kernels", [])}
        stray = sorted(launched - set(compiled))
        if stray:
            return _fail(
                self.job,
                Verdict.REJECTED,
                "kernel_not_compiled",
                f"the check launched kernel(s) "
                f"{stray[:3]} that the ahead-of-time compile never saw: a variant must launch the same "
                "kernels whether or not it is interpreted",
            )
        return None

    def _environment(self) -> EvalResult | None:
        job, report = self.job, self.report
        stray = self.outcome.unexpected_files()
        if stray:
            return _fail(
                job,
                Verdict.REJECTED,
                "wrote_files",
                f"the candidate wrote {stray[:5]} into its working "
                "directory; a variant may only compute, never write files",
            )
        changed = sorted(
            {k for c in report.get("cases", []) for k in c.get("state_changed", [])}
            | set(report.get("state_changed_end", []))
        )
        if changed:
            return _fail(
                job,
                Verdict.REJECTED,
                "global_state_modified",
                f"the candidate changed {changed[:5]} "
                "(TF32 / matmul precision / environment); such flags change other code's numerics",
            )
        tampered = sorted(
            {k for c in report.get("cases", []) for k in c.get("tampered", [])} | set(report.get("tampered_end", []))
        )
        if tampered:
            return _fail(
                job,
                Verdict.REJECTED,
                "harness_tampered",
                f"the candidate replaced {tampered[:5]}; "
                "timers, synchronization, saving and allocation belong to the harness",
            )
        return None

    def _launches(self) -> EvalResult | None:
        job = self.job
        by_id = {c["id"]: c for c in self.report.get("cases", [])}
        for case in self.plan.cases:
            info = by_id.get(case.id)
            if info is None:
                return _fail(job, Verdict.CRASHED, "missing_case", f"no report for case {case.label}")
            if any(kind != "Tensor" for kind in info["kinds"]):
                return _fail(
                    job,
                    Verdict.REJECTED,
                    "output_not_tensor",
                    f"launch returned {info['kinds']}; a plain "
                    "torch.Tensor is required (no subclasses, lazy or deferred results)",
                )
            if any(info["aliases"]):
                return _fail(
                    job,
                    Verdict.REJECTED,
                    "output_aliases_input",
                    "an output shares memory with an input; allocate outputs fresh",
                )
            if info.get("threads"):
                return _fail(
                    job,
                    Verdict.REJECTED,
                    "background_thread",
                    f"{info['threads']} thread(s) still ran "
                    f"after launch returned ({case.label}); work must finish inside launch",
                )
            found = info.get("races")
            if isinstance(found, list) and found:
                return _fail(job, Verdict.INCORRECT, "data_race", race_message(found, case.label))
            raw = info.get("refused_arguments")
            refused: list[dict[str, Any]] = [r for r in raw if isinstance(r, dict)] if isinstance(raw, list) else []
            if refused:  # the launcher refused an argument and launch carried on without that launch
                rule = refused[0].get("rule")
                return _fail(
                    job,
                    Verdict.REJECTED,
                    rule if rule in ("constexpr_tensor", "kernel_argument_type") else "kernel_argument_type",
                    str(refused[0].get("message", ""))[:600],
                )
            inside = sorted(op.removeprefix("in_kernel:") for op in info.get("ops", []) if op.startswith("in_kernel:"))
            if inside:
                return _fail(
                    job,
                    Verdict.REJECTED,
                    "torch_compute_call",
                    f"torch operators {inside[:6]} ran inside "
                    "a kernel launch (beyond the interpreter's own argument moves): torch computed what the "
                    "kernel should; pass tensors only to pointer parameters",
                )
            bad = disallowed_ops(info.get("ops", []))
            if bad:
                return _fail(
                    job,
                    Verdict.REJECTED,
                    "torch_compute_call",
                    f"launch called torch operators {bad[:6]} at run time: compute belongs in @triton.jit kernels",
                )
            saved = self.load(f"out_{case.id}.pt")
            if saved is None:
                return _fail(
                    job,
                    Verdict.REJECTED,
                    "missing_artefact",
                    f"no saved output for case {case.label} (or it changed after its hash was reported)",
                )
            inputs_after = saved.get("inputs_after", [])  # load_saved admits a record without the key
            if len(inputs_after) < len(case.inputs):  # the harness saves every input: fewer is a forged record
                return _fail(
                    job,
                    Verdict.REJECTED,
                    "missing_artefact",
                    f"the saved record of case {case.label} holds {len(inputs_after)} inputs of {len(case.inputs)}",
                )
            for before, after in zip(case.inputs, inputs_after):
                if isinstance(before, torch.Tensor) and not (
                    isinstance(after, torch.Tensor) and torch.equal(before, after)
                ):
                    return _fail(
                        job,
                        Verdict.REJECTED,
                        "input_mutated",
                        f"launch modified an input ({case.label}); inputs are read-only",
                    )
        if self.report.get("threads_end"):
            return _fail(job, Verdict.REJECTED, "background_thread", "the candidate left threads running")
        return None

    def _pair(self) -> EvalResult | None:
        """Same inputs, NaN sentinel (case) vs finite sentinel (rerun): never-written or uninitialised reads."""
        pair, rerun = self.plan.pair, self.report.get("rerun")
        if pair is None:
            return None
        first = self.load(f"out_{pair.id}.pt")
        second = self.load("out_rerun.pt") if rerun else None
        if first is None or second is None:  # requested and missing: a failure, never a pass
            return _fail(
                self.job,
                Verdict.REJECTED,
                "missing_artefact",
                f"the rerun of {pair.label} was requested and did not come back (or came back altered)",
            )
        s = self.plan.rerun_sentinel
        for i, (a, b) in enumerate(zip(first["out"], second["out"])):
            if (
                a.shape == b.shape
                and a.numel()
                and not a.is_floating_point()
                and not a.is_complex()
                and a.dtype == b.dtype
            ):
                # integer/boolean: the case's allocation held exact_sentinel(NaN), the rerun's the finite one
                lo, hi = exact_sentinel(a.dtype, math.nan), exact_sentinel(a.dtype, s)
                unwritten = (a == lo) & (b == hi)
                if bool(unwritten.any()):
                    n = int(unwritten.sum())
                    return _fail(
                        self.job,
                        Verdict.INCORRECT,
                        "output_unwritten" if n == a.numel() else "partial_output",
                        f"output {i}: {n}/{a.numel()} elements were never written ({pair.label})",
                    )
                continue
            if not (a.is_floating_point() and a.shape == b.shape and a.numel()):
                continue
            if bool((torch.isnan(a) & ~torch.isnan(b) & ~is_sentinel(b, s)).any()):
                # NaN only where the output memory held NaN, a computed value where it held the finite
                # sentinel: the kernel reads its output before writing it. Judged below as
                # uninitialized_read; checked first because an element whose computed value happens to
                # round to the sentinel (acc + 2x + 1 with 2x + 1 ~ 0) would otherwise look unwritten.
                continue
            unwritten = torch.isnan(a) & is_sentinel(b, s)
            if bool(unwritten.all()):
                return _fail(
                    self.job,
                    Verdict.INCORRECT,
                    "output_unwritten",
                    f"output {i} was never written "
                    f"({pair.label}): it holds whatever the allocation held (NaN-filled here)",
                )
            if bool(unwritten.any()):
                n = int(unwritten.sum())
                return _fail(
                    self.job,
                    Verdict.INCORRECT,
                    "partial_output",
                    f"output {i}: {n}/{a.numel()} elements were never written ({pair.label})",
                )
        same = all(
            torch.equal(a, b) or (a.is_floating_point() and torch.allclose(a, b, 0, 0, equal_nan=True))
            for a, b in zip(first["out"], second["out"])
        )
        if not same:
            ok_a = self.matches(pair, first["out"]) is None
            ok_b = self.matches(pair, second["out"]) is None
            if not (ok_a and ok_b):
                return _fail(
                    self.job,
                    Verdict.REJECTED,
                    "uninitialized_read",
                    "the output depends on what the "
                    f"output memory held before launch ({pair.label}: prefilled with NaN it is "
                    f"{'right' if ok_a else 'wrong'}, with {s:g} it is {'right' if ok_b else 'wrong'})",
                )
        return None

    def matches(self, case: Case, outs: Sequence[torch.Tensor]) -> Any:
        """None when ``outs`` are right for ``case``, else the Mismatch (judge/training.py judges a training check's
        outputs part by part)."""
        r64, rlp = self.refs(case)
        return compare_with_spread(
            outs,
            r64,
            rlp,
            *self.job.task.tolerance(case.dtype),
            forward_references(self.job.task.reference, self.ref_device),
            case.inputs,
            case.seed,
            conditioned=bool(case.adversarial),
        )

    def _values(self) -> EvalResult | None:
        previous: list[tuple[Case, list[torch.Tensor]]] = []
        for case in self.plan.cases:
            saved = self.load(f"out_{case.id}.pt")
            assert saved is not None  # _launches checked every file
            outs = saved["out"]
            mismatch = self.matches(case, outs)
            if mismatch is not None:
                r64, rlp = self.refs(case)
                return self._explain(case, outs, r64, rlp, mismatch, previous)
            previous.append((case, outs))
            self.checked.append(case.label)
        return None

    def _perturbed(self) -> EvalResult | None:
        """The pair's case under two seeds of perturbed arithmetic (child/perturb.py) must still be right: a kernel
        whose path depends on the last bits of a result answers otherwise there (its unperturbed run passed)."""
        pair, seeds = self.plan.pair, self.plan.perturb_seeds
        if pair is None or not seeds:
            return None
        runs = self._perturbed_facts()
        if [r.get("seed") for r in runs] != list(seeds) or any(r.get("case") != pair.id for r in runs):
            return _fail(
                self.job,
                Verdict.REJECTED,
                "missing_artefact",
                f"the perturbed runs of {pair.label} were requested with seeds {list(seeds)} and did not come back",
            )
        plain = self.load(f"out_{pair.id}.pt")
        for i, (seed, run) in enumerate(zip(seeds, runs)):
            saved = self.load(f"out_perturbed_{i}.pt") if run.get("saved") else None
            if saved is None or plain is None:
                return _fail(
                    self.job,
                    Verdict.REJECTED,
                    "missing_artefact",
                    f"the perturbed run {i} of {pair.label} did not come back (or came back altered)",
                )
            mismatch = self.matches(pair, saved["out"])
            if mismatch is not None:
                return _fail(
                    self.job,
                    Verdict.INCORRECT,
                    "arithmetic_dependent",
                    f"right with the interpreter's arithmetic, wrong with every result moved within its compiled "
                    f"error bound (1-2 ulp, seed {seed}) on {pair.label}: the output depends on the last bits of "
                    f"its arithmetic, which the GPU computes otherwise; {split(plain['out'], saved['out'])}; "
                    f"{mismatch.message}",
                )
        self.checked.append(f"{pair.label} under perturbed arithmetic (seeds {', '.join(map(str, seeds))})")
        return None

    def _explain(
        self,
        case: Case,
        outs: list[torch.Tensor],
        r64: tuple[torch.Tensor, ...],
        rlp: tuple[torch.Tensor, ...],
        mismatch: Any,
        previous: list[tuple[Case, list[torch.Tensor]]],
    ) -> EvalResult:
        job = self.job
        for old, old_outs in previous:
            if len(old_outs) == len(outs) and all(
                a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(outs, old_outs)
            ):
                return _fail(
                    job,
                    Verdict.REJECTED,
                    "replayed_output",
                    f"{case.label}: launch returned the output of "
                    f"an earlier call ({old.label}) for new inputs: results are cached across calls",
                )
        if case.adversarial:
            found = refine(mismatch, outs, r64, rlp, case.sentinel, self._probe(case))
            return _fail(
                job,
                Verdict.INCORRECT,
                "fails_adversarial_input",
                f"right on random inputs, wrong on the "
                f"task's '{case.adversarial}' inputs ({case.label}): {found.reason}: {found.message}",
            )
        if case.precision and mismatch.reason == "wrong_values":
            acc = dtype_name(job.task.accumulation) if job.task.accumulation is not None else "?"
            return _fail(
                job,
                Verdict.INCORRECT,
                "precision_downgrade",
                f"right on random inputs, wrong on "
                f"{case.label}: the task accumulates in {acc}, and on partial sums that grow and cancel "
                f"the output is what a narrower accumulator gives: {mismatch.message}",
            )
        if case.scale:
            return _fail(
                job,
                Verdict.INCORRECT,
                "fails_benchmark_scale",
                f"right on the check shapes, wrong on "
                f"{case.label}, a dimension at its benchmark size: {mismatch.message}",
            )
        if case.hidden:
            return _fail(
                job,
                Verdict.INCORRECT,
                "fails_hidden_shape",
                f"right on every published shape, wrong on "
                f"{case.label}: is it hard-coded to the benchmark sizes? {mismatch.message}",
            )
        constant = self._constant_everywhere()
        if constant is not None and not math.isnan(constant):
            return _fail(
                job,
                Verdict.INCORRECT,
                "constant_output",
                f"every output of every case is {constant:g}: {case.label}: {mismatch.message}",
            )
        found = refine(mismatch, outs, r64, rlp, case.sentinel, self._probe(case))
        return _fail(job, Verdict.INCORRECT, found.reason, f"{case.label}: {found.message}")

    def _probe(self, case: Case) -> PrecisionProbe | None:
        """fp32 cases only: what compare.refine needs to test whether a precision loss explains the outputs."""
        if case.dtype != torch.float32:
            return None
        return PrecisionProbe(
            self.job.task.reference, case.inputs, *self.job.task.tolerance(case.dtype), device=self.ref_device
        )

    def _constant_everywhere(self) -> float | None:
        """The single value every float output element of every case holds, if there is one (zeros too)."""
        values: set[float] = set()
        count = 0
        for case in self.plan.cases:
            saved = self.load(f"out_{case.id}.pt")
            for out in (saved or {}).get("out", []):
                if out.is_floating_point() and out.numel():
                    values.update(torch.unique(out.double()).tolist())
                    count += out.numel()
                if len(values) > 1:
                    return None
        return values.pop() if count >= 2 and len(values) == 1 else None

    def _ghost(self) -> EvalResult | None:
        by_id = {c["id"]: c for c in self.report.get("cases", [])}
        for case in self.plan.cases:
            if by_id.get(case.id, {}).get("kernel_calls") == 0:
                return _fail(
                    self.job,
                    Verdict.REJECTED,
                    "kernel_bypass",
                    f"launch returned the right answer for {case.label} without launching any Triton kernel",
                )
        ghost, pair = self.report.get("ghost"), self.plan.pair
        if pair is None or (ghost and ghost.get("error")):  # without its kernels it failed: they mattered
            return None
        saved = self.load("out_ghost.pt") if ghost and ghost.get("saved") else None
        if saved is None:
            return _fail(
                self.job,
                Verdict.REJECTED,
                "missing_artefact",
                "the ghost replay (every Triton launch "
                f"disabled) of {pair.label} was requested and did not come back (or came back altered)",
            )
        bypassed = self.bypassed(pair, saved["out"])
        if bypassed is not None:
            return _fail(
                self.job,
                Verdict.REJECTED,
                "kernel_bypass",
                f"with every Triton launch disabled, {bypassed} "
                f"still came out right ({pair.label}): the work is done outside the kernels "
                "(torch, numpy or the reference)",
            )
        return None

    def bypassed(self, case: Case, outs: Sequence[torch.Tensor]) -> str | None:
        """What is still right in the ghost replay's ``outs`` (None: nothing, the kernels did the work)."""
        return "launch's output" if self.matches(case, outs) is None else None


def judge_check(
    job: Job, plan: CheckPlan, outcome: ChildOutcome, ref_device: str = "cpu"
) -> tuple[EvalResult | None, list[str]]:
    """The verdict of a finished check run (None = every case passed) and the cases that passed."""
    judge = Judge(job, plan, outcome, ref_device)
    return judge.judge(), judge.checked
