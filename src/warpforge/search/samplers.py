"""Sampler registry and the feasibility layer that puts Optuna's samplers on explicit tuning spaces.

Every registered sampler is a :class:`Policy`: given the study's history over a :class:`SearchSpace`,
it picks the next configuration *among the feasible ones never told*. Optuna's own samplers become
policies through :class:`OptunaArm`: the sampler proposes ordinal indices (``IntDistribution(0, n-1)``
per parameter, so TPE/CMA-ES/GP see "block 64 lies between 32 and 128"), and the proposal is snapped
to the nearest unseen feasible configuration. Snapping happens inside ``sample_relative`` of
:class:`FeasibleSampler`, so the trial stores the configuration actually measured and every sampler
learns from real evaluations only (no phantom infeasible trials in the study).

``wf-default`` (:data:`DEFAULT_SAMPLER`) is a portfolio: a uniform space-filling start, then
multivariate TPE for global moves interleaved with hill-climbing on the incumbent's adjacent
neighbours (see docs/search.md for the measured comparison that selected it).

Example:
    >>> sorted(SAMPLERS)[:3], DEFAULT_SAMPLER
    (['cmaes', 'gp', 'local'], 'wf-default')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, IntDistribution
from optuna.samplers import BaseSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from warpforge.search.space import SearchSpace

ARM_ATTR = "wf:arm"  # system attr: which policy arm proposed the trial
REPAIR_ATTR = "wf:repair"  # system attr: "infeasible" / "duplicate" when the raw proposal was snapped


@dataclass
class Context:
    """What a policy sees when it proposes: the space, the history, and the unseen mask."""

    space: SearchSpace
    study: Study
    trial: FrozenTrial
    seen: np.ndarray  # bool per feasible row: told, running or queued
    rows: list[int]  # finished trials' rows, in trial order
    values: list[float | None]  # their objective (None: failed or unmeasured)
    failed: list[bool]
    arms: list[str]  # their proposing arm ("" when unknown, e.g. enqueued)
    rng: np.random.Generator

    @property
    def best_row(self) -> int | None:
        scored = [(v, r) for r, v in zip(self.rows, self.values) if v is not None]
        return min(scored)[1] if scored else None


@dataclass
class Pick:
    row: int
    arm: str
    repair: str | None = None


class Policy:
    """Chooses the next feasible, unseen row; ``None`` lets the caller fall back to uniform sampling."""

    name = "policy"

    def propose(self, ctx: Context) -> Pick | None:
        raise NotImplementedError

    def optuna_samplers(self) -> list[BaseSampler]:
        return []


class UniformArm(Policy):
    """Uniform over the unseen feasible configurations: random sampling without replacement."""

    name = "random"

    def propose(self, ctx: Context) -> Pick | None:
        free = np.flatnonzero(~ctx.seen)
        return Pick(int(ctx.rng.choice(free)), self.name) if free.size else None


class OptunaArm(Policy):
    """An Optuna sampler proposes ordinal indices; the proposal is snapped to the nearest unseen row."""

    def __init__(self, name: str, sampler: BaseSampler) -> None:
        self.name = name
        self.sampler = sampler

    def optuna_samplers(self) -> list[BaseSampler]:
        return [self.sampler]

    def propose(self, ctx: Context) -> Pick | None:
        dists = ordinal_distributions(ctx.space)
        rel_space = self.sampler.infer_relative_search_space(ctx.study, ctx.trial)
        raw: dict[str, Any] = {}
        if rel_space:
            raw.update(self.sampler.sample_relative(ctx.study, ctx.trial, rel_space))
        for name, dist in dists.items():
            if name not in raw:
                raw[name] = (dist.low if dist.single()
                             else self.sampler.sample_independent(ctx.study, ctx.trial, name, dist))
        target = np.array([int(raw[n]) for n in ctx.space.params])
        row = ctx.space.row(ctx.space.from_index(target))
        if row is not None and not ctx.seen[row]:
            return Pick(row, self.name)
        snapped = nearest_unseen(ctx.space, target, ctx.seen, ctx.rng)
        if snapped is None:
            return None
        return Pick(snapped, self.name, "infeasible" if row is None else "duplicate")


class LocalArm(Policy):
    """Hill-climbing step: an unseen feasible neighbour of the incumbent, fewest parameters changed.

    Neighbours move each parameter by at most one ordinal step (Kernel Tuner's "adjacent"
    neighbourhood); ties are broken at random. Returns None at a local optimum.
    """

    name = "local"

    def propose(self, ctx: Context) -> Pick | None:
        best = ctx.best_row
        if best is None:
            return None
        mat = ctx.space.index_matrix
        delta = np.abs(mat - mat[best])
        ok = (delta.max(axis=1) <= 1) & ~ctx.seen
        if not ok.any():
            return None
        changed = np.where(ok, (delta > 0).sum(axis=1), np.iinfo(np.int32).max)
        ties = np.flatnonzero(changed == changed.min())
        return Pick(int(ctx.rng.choice(ties)), self.name)


class Portfolio(Policy):
    """``wf-default``: space-filling start, then TPE interleaved with local refinement.

    Schedule (chosen by measurement, docs/search.md): the first ``n_init`` proposals are uniform
    (TPE's own startup is also random, but uniform-over-feasible wastes nothing); afterwards, while
    the incumbent has unseen adjacent neighbours the local arm takes ``local_share`` of the proposals
    and the model arm the rest; at a local optimum the model arm proposes until it finds a better
    incumbent.
    """

    name = "wf-default"

    def __init__(self, model: Policy, n_init: int = 10, local_share: float = 0.5) -> None:
        self.model = model
        self.local = LocalArm()
        self.uniform = UniformArm()
        self.n_init = n_init
        self.local_share = local_share

    def optuna_samplers(self) -> list[BaseSampler]:
        return self.model.optuna_samplers()

    def propose(self, ctx: Context) -> Pick | None:
        n = len(ctx.rows)
        if n < self.n_init:
            return self.uniform.propose(ctx)
        # Local share as a deterministic ratio over recent proposals, so a resumed study continues
        # the same schedule from its stored arms.
        recent = ctx.arms[self.n_init:]
        n_local = sum(a == self.local.name for a in recent)
        if n_local < self.local_share * (len(recent) + 1):
            pick = self.local.propose(ctx)
            if pick is not None:
                return pick
        return self.model.propose(ctx)


def ordinal_distributions(space: SearchSpace) -> dict[str, BaseDistribution]:
    """One ``IntDistribution(0, n-1)`` per parameter: the ordinal encoding every sampler sees."""
    return {name: IntDistribution(0, len(values) - 1) for name, values in space.params.items()}


def nearest_unseen(space: SearchSpace, target: np.ndarray, seen: np.ndarray,
                   rng: np.random.Generator) -> int | None:
    """Row of the unseen feasible configuration closest to ``target`` (ordinal indices) in scaled L1."""
    if seen.all():
        return None
    dist = (np.abs(space.index_matrix - target) * space.scale).sum(axis=1)
    dist[seen] = np.inf
    ties = np.flatnonzero(dist <= dist.min() + 1e-12)
    return int(rng.choice(ties))


class FeasibleSampler(BaseSampler):
    """Optuna sampler that returns, through ``sample_relative``, a policy's feasible unseen choice.

    ``n_proposals``/``n_infeasible``/``n_duplicate`` count how often the wrapped sampler's raw
    proposal had to be repaired (the proposals it would have wasted without this layer).
    """

    def __init__(self, space: SearchSpace, policy: Policy, seed: int | None = None) -> None:
        self.space = space
        self.policy = policy
        self.rng = np.random.default_rng(seed)
        self._dists = ordinal_distributions(space)
        self.n_proposals = 0
        self.n_infeasible = 0
        self.n_duplicate = 0

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return {k: d for k, d in self._dists.items() if not d.single()}

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        ctx = self.context(study, trial)
        pick = self.policy.propose(ctx)
        if pick is None:
            pick = UniformArm().propose(ctx)
        if pick is None:
            raise optuna.exceptions.OptunaError("search space exhausted")  # Strategy checks first
        self.n_proposals += 1
        self.n_infeasible += pick.repair == "infeasible"
        self.n_duplicate += pick.repair == "duplicate"
        study._storage.set_trial_system_attr(trial._trial_id, ARM_ATTR, pick.arm)
        if pick.repair:
            study._storage.set_trial_system_attr(trial._trial_id, REPAIR_ATTR, pick.repair)
        index = self.space.to_index(self.space.feasible[pick.row])
        return {k: int(i) for k, i in zip(self.space.params, index) if k in search_space}

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        # Reached only for parameters outside the space (not produced by Strategy).
        return optuna.samplers.RandomSampler().sample_independent(study, trial, param_name,
                                                                  param_distribution)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        for s in self.policy.optuna_samplers():
            s.before_trial(study, trial)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        for s in self.policy.optuna_samplers():
            s.after_trial(study, trial, state, values)

    def row_of(self, trial: FrozenTrial) -> int | None:
        """Row of a trial's configuration (from its params, or its queued fixed params)."""
        params = trial.params if trial.params else trial.system_attrs.get("fixed_params", {})
        try:
            index = [int(params[k]) if k in params else 0 for k in self.space.params]
            if any(k not in params and not d.single() for k, d in self._dists.items()):
                return None
            return self.space.row(self.space.from_index(index))
        except (IndexError, KeyError, TypeError, ValueError):
            return None

    def context(self, study: Study, trial: FrozenTrial) -> Context:
        seen = np.zeros(len(self.space), dtype=bool)
        rows: list[int] = []
        values: list[float | None] = []
        failed: list[bool] = []
        arms: list[str] = []
        for t in study.get_trials(deepcopy=False):
            if t.number == trial.number:
                continue
            row = self.row_of(t)
            if row is None:
                continue
            seen[row] = True
            if t.state.is_finished():
                rows.append(row)
                values.append(t.value if t.state == TrialState.COMPLETE else None)
                failed.append(t.state == TrialState.FAIL and not t.user_attrs.get("interrupted"))
                arms.append(str(t.system_attrs.get(ARM_ATTR, "")))
        return Context(self.space, study, trial, seen, rows, values, failed, arms, self.rng)


# --- registry --------------------------------------------------------------------------------------
PolicyFactory = Callable[[int | None], Policy]


def _tpe(seed: int | None) -> BaseSampler:
    # multivariate: the parameters interact (block x tile products bound shared memory), and
    # Optuna 5 already defaults to it for one objective; said explicitly for older Optuna.
    return optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=10)


SAMPLERS: dict[str, PolicyFactory] = {
    "random": lambda seed: UniformArm(),
    "local": lambda seed: Portfolio(UniformArm(), n_init=10, local_share=1.0),
    "tpe": lambda seed: OptunaArm("tpe", _tpe(seed)),
    "cmaes": lambda seed: OptunaArm("cmaes", optuna.samplers.CmaEsSampler(
        seed=seed, n_startup_trials=10, warn_independent_sampling=False)),
    "gp": lambda seed: OptunaArm("gp", optuna.samplers.GPSampler(seed=seed, n_startup_trials=10)),
    "qmc": lambda seed: OptunaArm("qmc", optuna.samplers.QMCSampler(
        seed=seed, scramble=True, warn_independent_sampling=False)),
    "nsga2": lambda seed: OptunaArm("nsga2", optuna.samplers.NSGAIISampler(seed=seed, population_size=20)),
    "wf-default": lambda seed: Portfolio(OptunaArm("tpe", _tpe(seed))),
}
DEFAULT_SAMPLER = "wf-default"


def make_policy(name: str, seed: int | None = None) -> Policy:
    """Instantiate a registered sampler; raises ValueError naming the choices for an unknown one."""
    try:
        factory = SAMPLERS[name]
    except KeyError:
        raise ValueError(f"unknown sampler {name!r}; choose from {', '.join(sorted(SAMPLERS))}") from None
    return factory(seed)
