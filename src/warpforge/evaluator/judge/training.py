"""Trusted-side judgement of a training check: judge.Judge, with each case's outputs judged part by part.

A training case's saved outputs are ``launch``'s output, ``launch_forward``'s output, then one gradient per
``GRAD_INPUTS`` entry (child/backward.py). Every rule of judge.Judge applies unchanged to that whole call
(operator recorder, Triton launches, inputs unchanged, outputs fresh, rerun under a second sentinel, grid
order, compiled kernels only); what this class adds:

- ``matches``: both forward outputs against the reference with the task's tolerance, each gradient against
  torch autograd of the reference in float64 (gradients.grad_references) with ``task.grad_tolerance``,
  the same comparator (compare.compare_outputs); a failure names the part (``grad of input 1 (w)``);
- the upstream gradient is an input too: modifying it is ``input_mutated``;
- ``saved`` holds plain tensors only (``saved_not_tensor``), and each function returns what the contract
  says (``wrong_output_count``, naming the function);
- the ghost replay: *any* part still right with every Triton launch disabled is ``kernel_bypass`` (a
  backward computed outside the kernels is caught even when the forward is honest).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from warpforge.evaluator.judge.compare import Mismatch, compare_outputs, compare_with_spread, forward_references, refine
from warpforge.evaluator.judge.gradients import grad_floors, grad_references, gradient_of, input_names
from warpforge.evaluator.judge.judge import Case, CheckPlan, Judge
from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.supervisor import ChildOutcome


@dataclass(frozen=True)
class PartMismatch(Mismatch):
    """A mismatch in one part of a training call's outputs: ``part`` is "launch", "launch_forward" or the
    label of a gradient; ``grad`` is the gradient's position in GRAD_INPUTS (None for a forward output)."""

    part: str = ""
    inner: Mismatch | None = None
    grad: int | None = None


class TrainingJudge(Judge):
    def __init__(self, job: Job, plan: CheckPlan, outcome: ChildOutcome, ref_device: str = "cpu") -> None:
        super().__init__(job, plan, outcome, ref_device)
        self._grads: dict[int, tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]] = {}
        names = input_names(job.task)
        self.labels = [
            f"grad of input {i} ({names[i]})" if i < len(names) else f"grad of input {i}" for i in job.task.grad_inputs
        ]

    def judge(self) -> EvalResult | None:
        found = super().judge()
        self.checked = [f"{label} (forward + backward)" for label in self.checked]
        return found

    def grads(self, case: Case) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        if case.id not in self._grads:
            self._grads[case.id] = grad_references(
                self.job.task.reference,
                case.inputs,
                self.job.task.grad_inputs,
                self.plan.grad_outs[case.id],
                self.ref_device,
            )
        return self._grads[case.id]

    def floors(self, case: Case) -> tuple[float, ...]:
        return grad_floors(self.job.task, case.inputs, self.plan.grad_outs[case.id])

    def _layout(self, case: Case) -> tuple[int, int]:
        """(outputs per forward function, gradients): what the contract says the saved outputs hold."""
        return len(self.refs(case)[0]), len(self.job.task.grad_inputs)

    def matches(self, case: Case, outs: Sequence[torch.Tensor]) -> PartMismatch | None:
        k, g = self._layout(case)
        if len(outs) != 2 * k + g:
            return PartMismatch(
                "wrong_output_count",
                f"{len(outs)} outputs in all, the contract gives {2 * k + g} "
                f"({k} from launch, {k} from launch_forward, {g} gradients)",
                part="training call",
            )
        r64, rlp = self.refs(case)
        atol, rtol = self.job.task.tolerance(case.dtype)
        for name, part in (("launch", outs[:k]), ("launch_forward", outs[k : 2 * k])):
            found = compare_with_spread(
                part,
                r64,
                rlp,
                atol,
                rtol,
                forward_references(self.job.task.reference, self.ref_device),
                case.inputs,
                case.seed,
            )
            if found is not None:
                return PartMismatch(found.reason, f"{name}: {found.message}", part=name, inner=found)
        g64, glp = self.grads(case)
        atol, rtol = self.job.task.grad_tolerance(case.dtype)
        floors = self.floors(case)
        for j, label in enumerate(self.labels):
            grad_of = gradient_of(
                self.job.task.reference, self.job.task.grad_inputs, self.plan.grad_outs[case.id], j, self.ref_device
            )
            found = compare_with_spread(
                [outs[2 * k + j]], [g64[j]], [glp[j]], atol, rtol, grad_of, case.inputs, case.seed, floors[j]
            )
            if found is not None:
                message = found.message.removeprefix("output 0: ").removeprefix("output 0 ")
                return PartMismatch(found.reason, f"{label}: {message}", part=label, inner=found, grad=j)
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
        assert isinstance(mismatch, PartMismatch)
        k, _ = self._layout(case)
        if mismatch.inner is None:  # the count is wrong: nothing to refine
            return self.job.result(Verdict.INCORRECT, mismatch.reason, f"{case.label}: {mismatch.message}")
        if mismatch.grad is None:  # a forward output: judge.Judge's refinements, on that output alone
            start = 0 if mismatch.part == "launch" else k
            part = outs[start : start + k]
            result = super()._explain(
                case, part, r64, rlp, mismatch.inner, [(c, o[start : start + k]) for c, o in previous]
            )
            result.message = f"{mismatch.part}: {result.message}"
            return result
        for old, old_outs in previous:
            if len(old_outs) == len(outs) and all(
                a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(outs, old_outs)
            ):
                return self.job.result(
                    Verdict.REJECTED,
                    "replayed_output",
                    f"{case.label}: the training call "
                    f"returned the outputs of an earlier call ({old.label}) for new inputs",
                )
        g64, glp = self.grads(case)
        j = mismatch.grad
        found = refine(mismatch.inner, [outs[2 * k + j]], [g64[j]], [glp[j]], case.sentinel, None)
        detail = f"{mismatch.part}: {found.message.removeprefix('output 0: ')}"
        if case.adversarial:
            return self.job.result(
                Verdict.INCORRECT,
                "fails_adversarial_input",
                f"right on random inputs, wrong on the task's '{case.adversarial}' inputs ({case.label}): {detail}",
            )
        if case.scale:
            return self.job.result(
                Verdict.INCORRECT,
                "fails_benchmark_scale",
                f"right on the check shapes, wrong on {case.label}, a dimension at its benchmark size: {detail}",
            )
        if case.hidden:
            return self.job.result(
                Verdict.INCORRECT,
                "fails_hidden_shape",
                f"right on every published shape, "
                f"wrong on {case.label}: is it hard-coded to the benchmark sizes? {detail}",
            )
        reason = (
            found.reason
            if found.reason in ("output_unwritten", "non_finite_output", "shape_mismatch", "dtype_mismatch")
            else "wrong_gradient"
        )
        return self.job.result(Verdict.INCORRECT, reason, f"{detail} ({case.label})")

    def _launches(self) -> EvalResult | None:
        found = super()._launches()
        if found is not None:
            return found
        by_id = {c["id"]: c for c in self.report.get("cases", [])}
        k, g = self._layout(self.plan.cases[0]) if self.plan.cases else (1, 0)
        for case in self.plan.cases:
            info = by_id[case.id]
            parts = info.get("parts")
            if not isinstance(parts, list) or len(parts) != 3:
                return self.job.result(Verdict.REJECTED, "missing_artefact", f"no training facts for {case.label}")
            for name, got, want in zip(("launch", "launch_forward", "launch_backward"), parts, (k, k, g)):
                if got != want:
                    return self.job.result(
                        Verdict.INCORRECT,
                        "wrong_output_count",
                        f"{name} returned {got} "
                        f"output(s), the contract {want} ({case.label}): launch_backward "
                        "returns one gradient per GRAD_INPUTS entry, in that order",
                    )
            kinds = info.get("saved_kinds") or []
            if any(kind != "Tensor" for kind in kinds):
                return self.job.result(
                    Verdict.REJECTED,
                    "saved_not_tensor",
                    f"launch_forward saved {kinds[:6]}; "
                    "saved is a tuple of plain torch.Tensors (statistics the backward reads)",
                )
            saved = self.load(f"out_{case.id}.pt")
            assert saved is not None  # judge.Judge._launches checked every file
            after = saved.get("inputs_after", [])
            grad_out = self.plan.grad_outs[case.id]
            if len(after) != len(case.inputs) + 1 or not (
                isinstance(after[-1], torch.Tensor) and torch.equal(after[-1], grad_out)
            ):
                return self.job.result(
                    Verdict.REJECTED,
                    "input_mutated",
                    f"launch_backward modified grad_out ({case.label}); the upstream gradient is read-only",
                )
        return None

    def bypassed(self, case: Case, outs: Sequence[torch.Tensor]) -> str | None:
        k, g = self._layout(case)
        if len(outs) != 2 * k + g:
            return None
        r64, rlp = self.refs(case)
        atol, rtol = self.job.task.tolerance(case.dtype)
        for name, part in (("launch's output", outs[:k]), ("launch_forward's output", outs[k : 2 * k])):
            if compare_outputs(part, r64, rlp, atol, rtol) is None:
                return name
        g64, glp = self.grads(case)
        atol, rtol = self.job.task.grad_tolerance(case.dtype)
        floors = self.floors(case)
        for j, label in enumerate(self.labels):
            if compare_outputs([outs[2 * k + j]], [g64[j]], [glp[j]], atol, rtol, floors[j]) is None:
                return f"launch_backward's {label}"
        return None


def judge_training(
    job: Job, plan: CheckPlan, outcome: ChildOutcome, ref_device: str = "cpu"
) -> tuple[EvalResult | None, list[str]]:
    """judge.judge_check for a training check (job.training_check)."""
    judge = TrainingJudge(job, plan, outcome, ref_device)
    return judge.judge(), judge.checked
