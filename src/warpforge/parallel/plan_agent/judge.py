"""Judging a proposed plan against the simulator: pure, so the same answer always gets the same verdict.

``PlanJudge.build`` turns the fields the model wrote into the plan it meant (the search's global batch and
precision, DP filling the cluster, expert TP spelled out as the search spells it, so the same plan has the
same key) or says in one line why it cannot be one; ``judge`` gives it one of ``plan_parse.PLAN_OUTCOMES``
with the simulator's prediction: ``invalid`` (the simulator's own reason when it refuses the plan),
``duplicate`` (its key is in ``seen``), ``does_not_fit`` (over the usable HBM: how much it needs and the
shares that take it) or ``ranked``.

Example::

    >>> from warpforge.parallel import load_model, load_cluster
    >>> j = PlanJudge(load_model("llama3-8b"), load_cluster("dgx-h100"), 512, "bf16")
    >>> j.judge(ProposedPlan(plan={"tp": 3}, rationale="odd")).outcome
    'invalid'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from warpforge.parallel.plan_agent.parse import ProposedPlan
from warpforge.parallel.plan_agent.prompting import does_not_fit_message
from warpforge.parallel.prediction import Prediction
from warpforge.parallel.specs import ClusterSpec, ModelSpec, PlanConfig


@dataclass
class Judged:
    raw: ProposedPlan
    plan: PlanConfig | None
    outcome: str  # plan_parse.PLAN_OUTCOMES
    message: str
    prediction: Prediction | None = None


@dataclass
class PlanJudge:
    model: ModelSpec
    cluster: ClusterSpec
    gb: int
    precision: str
    framework: str = "any"
    memory_margin: float = 0.05
    seen: set[str] = field(default_factory=set)  # keys of the plans already proposed in this run

    def __post_init__(self) -> None:
        from warpforge.parallel.calibration import calibration_for
        from warpforge.parallel.frameworks import FRAMEWORKS

        self.calib = calibration_for(self.cluster)  # what search_plans uses: the same prediction as the ranking
        self.fw = FRAMEWORKS.get(self.framework, FRAMEWORKS["any"])
        self.usable = self.cluster.hbm_gb * (1.0 - self.memory_margin)

    def build(self, raw: dict[str, Any]) -> PlanConfig | str:
        """The plan the model meant, or why it cannot be one (a one-line message)."""
        g = self.cluster.total_gpus
        if raw.get("global_batch", self.gb) != self.gb:
            return f"global_batch is fixed at {self.gb}; leave it out"
        if raw.get("precision", self.precision) != self.precision:
            return f"precision is fixed at {self.precision}; leave it out"
        fields = {**raw, "global_batch": self.gb, "precision": self.precision}
        if "dp" not in raw:
            per = int(raw.get("tp", 1)) * int(raw.get("pp", 1)) * int(raw.get("cp", 1))
            if g % per:
                return f"tp x pp x cp = {per} does not divide the {g} GPUs"
            fields["dp"] = g // per
        plan = PlanConfig.model_validate(fields)
        if plan.expert_tp is None:
            # The search spells expert TP out (= TP by default): the same plan must have the same key.
            plan = plan.model_copy(update={"expert_tp": plan.tp})
        if plan.gpus != g:
            return f"tp x pp x dp x cp = {plan.gpus} GPUs; every plan here uses all {g}"
        why_not = self.fw.why_not(plan)
        return why_not + "; propose a plan it runs" if why_not else plan

    def judge(self, raw: ProposedPlan) -> Judged:
        from warpforge.parallel.errors import InvalidPlanError
        from warpforge.parallel.simulator import predict

        plan = self.build(raw.plan)
        if isinstance(plan, str):
            return Judged(raw, None, "invalid", plan)
        if plan.key() in self.seen:
            return Judged(raw, plan, "duplicate", "proposed before in this run")
        try:
            pred = predict(self.model, self.cluster, plan, self.calib)
        except InvalidPlanError as exc:
            return Judged(raw, plan, "invalid", str(exc))
        if pred.peak_mem_gb > self.usable:
            return Judged(raw, plan, "does_not_fit", does_not_fit_message(pred, self.usable), pred)
        return Judged(raw, plan, "ranked", "", pred)

    def __call__(self, raw: ProposedPlan) -> Judged:
        return self.judge(raw)
