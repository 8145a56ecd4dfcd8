"""What ``warpforge optimize`` reports: a typed document (``--json``) and its markdown rendering."""

from __future__ import annotations

from pydantic import BaseModel, Field

from warpforge.optimize.plans import PlanSection


class Checks(BaseModel):
    """The proof (optimize/prove.py): the patched model against the unpatched one, from the same weights."""

    max_abs_diff: float | None = None  # outputs of the first forward
    output_tolerance: float | None = None
    outputs_match: bool = False
    # per optimizer step, unpatched and patched; None where a loss was not finite (JSON has no NaN)
    losses_before: list[float | None] = Field(default_factory=list)
    losses_after: list[float | None] = Field(default_factory=list)
    loss_tolerance: float | None = None
    losses_match: bool | None = None  # None: inference only
    grad_max_rel_diff: float | None = None  # the first step's parameter gradients, worst relative L2 error
    grad_tolerance: float | None = None
    grads_match: bool | None = None
    kernel_calls: dict[str, int] = Field(default_factory=dict)  # region -> calls that ran an exported kernel
    fallback: dict[str, str] = Field(default_factory=dict)  # region -> why its calls ran the original code
    interpreted: bool = False  # the kernels ran in Triton's interpreter (no GPU)
    error: str = ""


def _num(value: float | None) -> str:
    return "not finite" if value is None else f"{value:.6f}"


class RegionRow(BaseModel):
    name: str
    kind: str
    share: float
    task: str | None
    status: str
    patched: bool
    estimated_us: float
    fused_us: float | None = None


class SpeedupEstimate(BaseModel):
    measured: float | None = None  # a GPU's step time before over after
    estimated: float | None = None
    basis: str
    before_us: float
    after_us: float
    ceiling: float | None = None  # every matched region at its fused bound


class OptimizeReport(BaseModel):
    target: str
    kind: str
    train: bool
    dtype: str
    batch: int
    seq: int
    gpu: str
    regions: list[RegionRow]
    coverage: float
    checks: Checks
    # the share of the model's own ops (the step without warpforge's stand-in loss) in regions with a task
    model_coverage: float | None = None
    speedup: SpeedupEstimate
    campaigns: dict[str, str]
    trials: dict[str, int]
    untimed: bool
    package: str
    patches: str | None
    plans: PlanSection | None = None  # --cluster: the planner's best parallel layouts for this model

    def markdown(self) -> str:
        kinds = sorted({r.kind for r in self.regions if r.patched})
        c, s = self.checks, self.speedup
        lines = [
            f"# warpforge optimize: {self.target}",
            "",
            f"{self.kind} target, {'training step' if self.train else 'inference'}, {self.dtype}, "
            + (f"batch {self.batch} x seq {self.seq}" if self.kind == "transformers" else "its own input sizes")
            + f"; costs priced on {self.gpu}.",
            "",
            f"- coverage: {self.coverage:.1%} of the estimated step is in regions with a task"
            + (
                f"; {self.model_coverage:.1%} of the model's own ops (the step without warpforge's stand-in loss)"
                if self.model_coverage is not None
                else ""
            ),
            f"- patched: {sum(r.patched for r in self.regions)} regions of {len(kinds)} kinds "
            f"({', '.join(kinds) or 'none'})",
            f"- step: {s.before_us:.3f} us before, {s.after_us:.3f} us after "
            f"({'measured' if s.measured else 'estimated'} speedup "
            f"{(s.measured or s.estimated or 0):.3f}x; ceiling {s.ceiling or 0:.3f}x)",
            f"- basis: {s.basis}",
        ]
        if self.untimed:
            lines.append("- kernels: exported untimed (verified ok, never timed on a GPU)")
        lines += ["", "## Equality", ""]
        if c.error:
            lines.append(f"not proven: {c.error}")
        else:
            lines.append(
                f"- outputs: max abs diff {c.max_abs_diff:.3g} (tolerance {c.output_tolerance:.3g}): "
                f"{'match' if c.outputs_match else 'DIFFER'}"
            )
            if c.losses_match is not None:
                pairs = ", ".join(f"{_num(a)}/{_num(b)}" for a, b in zip(c.losses_before, c.losses_after))
                lines.append(
                    f"- losses over {len(c.losses_before)} steps (unpatched/patched): {pairs} "
                    f"(tolerance {c.loss_tolerance:.3g}): {'match' if c.losses_match else 'DIFFER'}"
                )
                lines.append(
                    f"- gradients: worst relative error {c.grad_max_rel_diff:.3g} (tolerance "
                    f"{c.grad_tolerance:.3g}): {'match' if c.grads_match else 'DIFFER'}"
                )
            if c.interpreted:
                lines.append("- the patched kernels ran in Triton's interpreter (no GPU here)")
        lines += ["", "## Regions", "", "| region | kind | share | task | status |", "|---|---|---|---|---|"]
        for r in self.regions:
            lines.append(f"| `{r.name}` | {r.kind} | {r.share:.1%} | {r.task or '-'} | {r.status} |")
        if self.plans is not None:
            p = self.plans
            lines += [
                "",
                "## Parallel plans",
                "",
                f"{p.model.name} ({p.model.layers} layers, hidden {p.model.hidden}, seq {p.model.seq}) on "
                f"{p.cluster}, {p.nodes} node(s), {p.gpus} GPUs, global batch {p.global_batch}: {p.basis}.",
                "",
                "| rank | plan | tokens/s | step s | MFU | peak GiB | fits |",
                "|---|---|---|---|---|---|---|",
            ]
            for row in p.plans:
                lines.append(
                    f"| {row.rank} | {row.plan} | {row.tokens_per_s:,.0f} | {row.step_time_s:.3f} | "
                    f"{row.mfu:.1%} | {row.peak_mem_gb:.1f} of {row.hbm_gb:.0f} | {row.fits} |"
                )
        if self.trials:
            lines += ["", "## Search", "", "| task | trials | campaign |", "|---|---|---|"]
            for task, n in sorted(self.trials.items()):
                lines.append(f"| {task} | {n} | {self.campaigns.get(task, '-')} |")
        return "\n".join(lines) + "\n"
