"""Plan search: valid plans only, exhaustive when the space is small, Optuna (TPE) when it is large.

The space: TP (powers of two up to a node, dividing heads/KV heads/FFN), CP, PP (any divisor of the
remaining GPUs up to the layer count), EP (MoE), micro-batch, interleaving, recompute and ZeRO stage; DP
fills the cluster. Every candidate is checked (divisibility, batch) and simulated; plans that do not fit
in HBM are kept out of the ranking. Externally proposed plans (``enqueue=``) are always evaluated, ranked
with the rest, and also handed to Optuna's ``enqueue_trial`` so the sampler learns from them.

Example::

    >>> from warpforge.parallel import load_model, load_cluster, PlanConfig
    >>> from warpforge.parallel.search import search_plans
    >>> res = search_plans(load_model("llama3-8b"), load_cluster("dgx-h100"), top=3,
    ...                    enqueue=[PlanConfig(tp=2, dp=4)])
    >>> res.plans[0].prediction.fits, len(res.plans) <= 3 + 1
    (True, True)
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from warpforge.parallel.calibration import Calibration, calibration_for
from warpforge.parallel.errors import InvalidPlanError, NoFeasiblePlanError, SpecError
from warpforge.parallel.explain import explain
from warpforge.parallel.frameworks import FRAMEWORKS, Framework, framework_for_plan
from warpforge.parallel.prediction import Prediction
from warpforge.parallel.simulator import check_plan, peak_memory_gib, predict
from warpforge.parallel.specs import ClusterSpec, ModelSpec, PlanConfig

EXHAUSTIVE_LIMIT = 20_000  # ~0.2 ms per simulated plan: 20k candidates take ~4 s on one core
MICRO_BATCHES = (1, 2, 4, 8)
RECOMPUTE = ("none", "selective", "full")
MAX_INTERLEAVE = 8


class RankedPlan(BaseModel):
    """One plan of a search answer, with its prediction and the reasons it ranks where it does."""

    model_config = ConfigDict(frozen=True)

    rank: int
    source: Literal["search", "enqueued"]
    prediction: Prediction
    why: list[str]


class EnqueuedResult(BaseModel):
    """What became of an externally proposed plan."""

    plan: PlanConfig
    status: Literal["ranked", "does_not_fit", "invalid"]
    message: str = ""
    prediction: Prediction | None = None


class SearchResult(BaseModel):
    """The answer of ``search_plans``: ranked fitting plans plus search statistics."""

    model: str
    cluster: str
    nodes: int
    gpus: int
    global_batch: int
    method: Literal["exhaustive", "optuna"]
    space_size: int
    evaluated: int
    feasible: int
    elapsed_s: float
    cpu_s: float = 0.0  # CPU time of this process (the wall time depends on what else the machine runs)
    framework: str = "any"
    precision: str = "bf16"
    plans: list[RankedPlan]
    enqueued: list[EnqueuedResult] = []
    feasible_predictions: list[Prediction] = []  # all fitting plans, best first (for storage)

    def to_json(self) -> dict[str, Any]:
        """The ``plan search --json`` document (without the full list of feasible plans)."""
        return self.model_dump(mode="json", exclude={"feasible_predictions"})


def _pow2_upto(n: int) -> list[int]:
    return [1 << i for i in range(n.bit_length()) if (1 << i) <= n]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def space_axes(model: ModelSpec, cluster: ClusterSpec) -> dict[str, list[Any]]:
    """Candidate values per axis (before cross-axis validity)."""
    g = cluster.total_gpus
    tps = [
        t
        for t in _pow2_upto(cluster.gpus_per_node)
        if model.heads % t == 0
        and model.n_kv_heads % t == 0
        and model.ffn_dim % t == 0
        and (not model.is_moe or model.expert_ffn % t == 0)
        and g % t == 0
    ]
    cps = [c for c in _pow2_upto(min(16, g)) if c == 1 or model.seq % (2 * c) == 0]
    pps = [p for p in _divisors(g) if p <= model.layers]
    eps = [e for e in _divisors(model.experts) if g % e == 0] if model.is_moe else [1]
    return {
        "tp": tps,
        "cp": cps,
        "pp": pps,
        "ep": eps,
        "micro_batch": list(MICRO_BATCHES),
        "interleave": list(range(1, MAX_INTERLEAVE + 1)),
        "recompute": list(RECOMPUTE),
        "zero": [0, 1, 2, 3],
    }


def _candidates(
    model: ModelSpec, cluster: ClusterSpec, gb: int, fw: Framework | None = None
) -> Iterator[dict[str, Any]]:
    fw = fw or FRAMEWORKS["any"]
    for tp, cp, pp, ep, dp, etp in _meshes(model, cluster, gb, fw):
        for mb in MICRO_BATCHES:
            if gb % (dp * mb):
                continue
            vs = _interleaves(model, pp, gb // (dp * mb)) if fw.interleave else [1]
            zeros = fw.zeros(pp) if dp * cp > 1 else (0,)
            for v, rc, z in itertools.product(vs, RECOMPUTE, zeros):
                yield {
                    "tp": tp,
                    "cp": cp,
                    "pp": pp,
                    "dp": dp,
                    "ep": ep,
                    "micro_batch": mb,
                    "interleave": v,
                    "recompute": rc,
                    "zero": z,
                    "global_batch": gb,
                    "expert_tp": etp,
                }


def candidate_plans(
    model: ModelSpec, cluster: ClusterSpec, global_batch: int, framework: str = "any", precision: str = "bf16"
) -> Iterator[PlanConfig]:
    """Every structurally valid plan that uses all of the cluster's GPUs (and that ``framework`` runs)."""
    for fields in _candidates(model, cluster, global_batch, FRAMEWORKS[framework]):
        yield PlanConfig(**fields, precision=precision)  # type: ignore[arg-type]


def space_size(model: ModelSpec, cluster: ClusterSpec, global_batch: int, framework: str = "any") -> int:
    """Number of candidate plans (counted without building them)."""
    return sum(1 for _ in _candidates(model, cluster, global_batch, FRAMEWORKS[framework]))


def _rank_key(p: Prediction) -> tuple[float, float]:
    # Throughput first; between equals, the plan with more memory headroom.
    return (-p.tokens_per_s, p.peak_mem_gb)


class _Evaluator:
    """Simulates plans once each (Optuna may propose the same plan twice). With ``prefilter``, a plan whose
    memory alone exceeds the usable HBM is not timed (two thirds of a typical space: ~3x faster)."""

    def __init__(
        self, model: ModelSpec, cluster: ClusterSpec, calib: Calibration, usable_gb: float, framework: str = "any"
    ) -> None:
        self.model, self.cluster, self.calib, self.usable_gb = model, cluster, calib, usable_gb
        self.framework = framework_for_plan(framework)
        self.cache: dict[str, Prediction | None] = {}
        self.checked = 0
        self.leanest_gb = math.inf

    def framed(self, plan: PlanConfig) -> PlanConfig:
        """The plan under the searched framework's memory accounting (a plan that names one keeps it)."""
        if self.framework != "megatron" and plan.framework == "megatron":
            return plan.model_copy(update={"framework": self.framework})
        return plan

    def __call__(self, plan: PlanConfig, prefilter: bool = False) -> Prediction | None:
        plan = self.framed(plan)
        key = plan.key()
        if key in self.cache:
            return self.cache[key]
        self.checked += 1
        try:
            if prefilter:
                check_plan(self.model, self.cluster, plan)
                peak = peak_memory_gib(self.model, plan)
                self.leanest_gb = min(self.leanest_gb, peak)
                if peak > self.usable_gb:
                    self.cache[key] = None
                    return None
            pred = predict(self.model, self.cluster, plan, self.calib)
            self.leanest_gb = min(self.leanest_gb, pred.peak_mem_gb)
        except InvalidPlanError:
            pred = None
        self.cache[key] = pred
        return pred

    def feasible(self, pred: Prediction | None) -> bool:
        return pred is not None and pred.peak_mem_gb <= self.usable_gb


Mesh = tuple[int, int, int, int, int, int]  # tp, cp, pp, ep, dp, expert tp


def _meshes(model: ModelSpec, cluster: ClusterSpec, gb: int, fw: Framework | None = None) -> list[Mesh]:
    """(tp, cp, pp, ep, dp, etp) combinations that use every GPU and divide the batch. MoE layouts with
    TP > 1 come with expert TP = TP (EP out of DP x CP) and expert TP = 1 (Megatron's folding)."""
    fw = fw or FRAMEWORKS["any"]
    ax, g, out = space_axes(model, cluster), cluster.total_gpus, []
    cps = ax["cp"] if fw.cp else [1]
    for tp, cp, pp, ep in itertools.product(ax["tp"], cps, ax["pp"], ax["ep"]):
        if g % (tp * cp * pp):
            continue
        dp = g // (tp * cp * pp)
        if gb % dp:
            continue
        etps = [tp] + ([1] if model.is_moe and tp > 1 and fw.expert_tp else [])
        for etp in etps:
            if (tp * dp * cp) % (etp * ep) == 0 and (etp == tp or model.expert_ffn % etp == 0):
                out.append((tp, cp, pp, ep, dp, etp))
    return out


def _interleaves(model: ModelSpec, pp: int, m: int) -> list[int]:
    if pp == 1 or m % pp:
        return [1]
    return [1] + [v for v in range(2, MAX_INTERLEAVE + 1) if model.layers % (pp * v) == 0]


def _optuna_search(
    ev: _Evaluator, gb: int, trials: int, seed: int, enqueue: Sequence[PlanConfig], fw: Framework, precision: str
) -> None:
    """TPE over a parametrisation in which every suggestion maps to a valid plan: the mesh is an index
    into the valid (TP, CP, PP, EP, expert TP) layouts (an integer: Optuna compares categorical choices
    one by one, which cost 20 s on DeepSeek-V3's 2,000+ layouts), and micro-batch / interleaving are
    clamped to the nearest valid value for that mesh."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    meshes = sorted(_meshes(ev.model, ev.cluster, gb, fw))
    if not meshes:
        return
    index = {m: i for i, m in enumerate(meshes)}
    zeros = list(fw.zeros(2))
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=seed, multivariate=True))

    def build(i: int, mb: int, v_rank: int, recompute: str, zero: int) -> PlanConfig:
        tp, cp, pp, ep, dp, etp = meshes[i]
        mb = max(b for b in MICRO_BATCHES if b <= mb and gb % (dp * b) == 0)
        vs = _interleaves(ev.model, pp, gb // (dp * mb)) if fw.interleave else [1]
        ok = [z for z in zeros if z in fw.zeros(pp)]
        return PlanConfig(
            tp=tp,
            cp=cp,
            pp=pp,
            ep=ep,
            dp=dp,
            micro_batch=mb,
            global_batch=gb,
            interleave=vs[min(v_rank, len(vs) - 1)],
            recompute=recompute,  # type: ignore[arg-type]
            zero=(zero if zero in ok else ok[-1]) if dp * cp > 1 else 0,
            expert_tp=etp,
            precision=precision,  # type: ignore[arg-type]
        )

    for plan in enqueue:
        mesh = (plan.tp, plan.cp, plan.pp, plan.ep, plan.dp, plan.etp)
        vs = _interleaves(ev.model, plan.pp, gb // (plan.dp * plan.micro_batch))
        if mesh in index and plan.micro_batch in MICRO_BATCHES and plan.interleave in vs and plan.zero in zeros:
            study.enqueue_trial(
                {
                    "mesh": index[mesh],
                    "micro_batch": plan.micro_batch,
                    "interleave_rank": vs.index(plan.interleave),
                    "recompute": plan.recompute,
                    "zero": plan.zero,
                },
                skip_if_exists=True,
            )
    for _ in range(trials):
        trial = study.ask()
        plan = build(
            trial.suggest_int("mesh", 0, len(meshes) - 1),
            trial.suggest_categorical("micro_batch", list(MICRO_BATCHES)),
            trial.suggest_categorical("interleave_rank", [0, 1, 2, 3]),
            trial.suggest_categorical("recompute", list(RECOMPUTE)),
            trial.suggest_categorical("zero", zeros),
        )
        pred = ev(plan)
        if pred is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        # Plans over the usable HBM score worse the further they overflow, so TPE learns the direction.
        over = max(0.0, pred.peak_mem_gb / ev.usable_gb - 1.0)
        study.tell(trial, pred.step_time_s * (1.0 + 10.0 * over) * (1.0 if ev.feasible(pred) else 2.0))


def _diverse(ranked: list[Prediction], top: int) -> list[Prediction]:
    """The best plan of each layout, in rank order, ``top`` of them."""
    seen: set[tuple[int, ...]] = set()
    out: list[Prediction] = []
    for p in ranked:
        mesh = (p.plan.tp, p.plan.cp, p.plan.pp, p.plan.ep, p.plan.dp, p.plan.etp)
        if mesh not in seen:
            seen.add(mesh)
            out.append(p)
            if len(out) == top:
                break
    return out


def search_plans(
    model: ModelSpec,
    cluster: ClusterSpec,
    *,
    global_batch: int | None = None,
    trials: int = 400,
    top: int = 5,
    enqueue: Sequence[PlanConfig] = (),
    method: Literal["auto", "exhaustive", "optuna"] = "auto",
    memory_margin: float = 0.05,
    diverse: bool = True,
    seed: int = 0,
    calib: Calibration | None = None,
    precision: Literal["bf16", "fp8"] = "bf16",
    framework: str = "any",
) -> SearchResult:
    """Find the fastest plans whose peak memory stays ``memory_margin`` (a fraction of HBM; 5% = 4 GiB of
    80) below capacity, a cushion for allocator fragmentation spikes the model averages out; raise
    NoFeasiblePlanError when none does. With ``diverse``, the ``top`` plans shown have distinct layouts
    (TP, CP, PP, EP, DP): the runner-up that differs only in interleaving is rarely news."""
    t0, c0 = time.perf_counter(), time.process_time()
    if framework not in FRAMEWORKS:
        raise SpecError(f"unknown framework '{framework}'; use one of {', '.join(FRAMEWORKS)}")
    fw = FRAMEWORKS[framework]
    if precision not in fw.precisions:
        raise SpecError(f"{framework} does not train in {precision} here; use --precision {'|'.join(fw.precisions)}")
    gb = global_batch or model.default_global_batch()
    if gb < 1:
        raise SpecError(f"global batch must be positive, got {gb}")
    if not 0.0 <= memory_margin < 1.0:
        raise SpecError(f"memory margin must be in [0, 1), got {memory_margin}")
    usable = cluster.hbm_gb * (1.0 - memory_margin)
    ev = _Evaluator(model, cluster, calib or calibration_for(cluster), usable, framework)
    n_space = space_size(model, cluster, gb, framework)
    if method == "auto":
        method = "exhaustive" if n_space <= EXHAUSTIVE_LIMIT else "optuna"

    enq_results: list[EnqueuedResult] = []
    enq_keys: set[str] = set()
    for plan in enqueue:
        plan = ev.framed(plan if plan.global_batch else plan.model_copy(update={"global_batch": gb}))
        try:
            pred = predict(model, cluster, plan, ev.calib)
        except InvalidPlanError as exc:
            enq_results.append(EnqueuedResult(plan=plan, status="invalid", message=str(exc)))
            continue
        ev.cache[plan.key()] = pred
        ev.leanest_gb = min(ev.leanest_gb, pred.peak_mem_gb)
        enq_keys.add(plan.key())
        ok = ev.feasible(pred)
        enq_results.append(
            EnqueuedResult(
                plan=plan,
                status="ranked" if ok else "does_not_fit",
                prediction=pred,
                message="" if ok else f"needs {pred.peak_mem_gb:.1f} GiB, usable {usable:.1f} GiB",
            )
        )

    if method == "exhaustive":
        for plan in candidate_plans(model, cluster, gb, framework, precision):
            ev(plan, prefilter=True)
    else:
        _optuna_search(ev, gb, trials, seed, enqueue, fw, precision)

    preds = [p for p in ev.cache.values() if p is not None]
    feasible = sorted((p for p in preds if ev.feasible(p)), key=_rank_key)
    if not feasible:
        need = f"; the leanest valid plan needs {ev.leanest_gb:.0f} GiB" if ev.leanest_gb < math.inf else ""
        raise NoFeasiblePlanError(
            f"no plan of {model.name} fits on {cluster.total_gpus} x {cluster.gpu} "
            f"({usable:.0f} of {cluster.hbm_gb:g} GiB usable){need}; add nodes (--nodes) or use a GPU "
            "with more memory"
        )
    shown = _diverse(feasible, top) if diverse else feasible[:top]
    # An enqueued plan that fits is always shown, even below the cut, so its proposer sees the verdict.
    shown += [p for p in feasible[top:] if p.plan.key() in enq_keys]
    ranks = {id(p): i + 1 for i, p in enumerate(feasible)}
    ranked = []
    for p in shown:
        # The winner is contrasted with the next plan shown (the best other layout), the rest with the winner.
        other = shown[1] if p is shown[0] and len(shown) > 1 else (shown[0] if p is not shown[0] else None)
        why = explain(p, ranks[id(p)], other, ranks[id(other)] if other is not None else 0)
        ranked.append(
            RankedPlan(
                rank=ranks[id(p)], prediction=p, why=why, source="enqueued" if p.plan.key() in enq_keys else "search"
            )
        )
    for r in enq_results:
        if r.status == "ranked" and r.prediction is not None:
            r.message = f"rank {ranks[id(ev.cache[r.plan.key()])]} of {len(feasible)} fitting plans"
    return SearchResult(
        model=model.name,
        cluster=cluster.name,
        nodes=cluster.nodes,
        gpus=cluster.total_gpus,
        global_batch=gb,
        method=method,
        space_size=n_space,
        evaluated=ev.checked + len(enq_keys),
        feasible=len(feasible),
        elapsed_s=time.perf_counter() - t0,
        cpu_s=time.process_time() - c0,
        plans=ranked,
        framework=framework,
        precision=precision,
        enqueued=enq_results,
        feasible_predictions=feasible,
    )
