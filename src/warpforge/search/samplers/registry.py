"""Sampler registry and the feasibility layer that puts Optuna's samplers on explicit tuning spaces.

Every registered sampler is a :class:`Policy`: given the study's history over a :class:`SearchSpace`,
it picks the next configuration *among the feasible ones never told*. Optuna's own samplers become
policies through :class:`OptunaArm`: the sampler proposes ordinal indices (``IntDistribution(0, n-1)``
per parameter, so TPE/CMA-ES/GP see "block 64 lies between 32 and 128"), and the proposal is snapped
to the nearest unseen feasible configuration. Snapping happens inside ``sample_relative`` of
:class:`~warpforge.search.samplers.strategy.FeasibleSampler`, so the trial stores the configuration actually
measured and every sampler learns from real evaluations only (no phantom infeasible trials).

``wf-portfolio`` is a portfolio: 5 uniform starts, then three arms take turns, each maximising its
acquisition over the unseen feasible set: a GP's log expected improvement
(:class:`~warpforge.search.samplers.gp_arm.GPArm`), TPE's density ratio (:class:`TPEArm`) and the same GP's
upper confidence bound. ``wf-default`` (:data:`DEFAULT_SAMPLER`) is that portfolio with a
stall escape (:class:`~warpforge.search.samplers.escape.Escape`): when the incumbent stalls at a probed local
optimum, every other proposal is the GP's choice among the configurations that change a parameter
value the 10 fastest measurements all share. ``wf-escape`` escapes by distance alone (at least 2
parameters from the incumbent) and was kept out of the default.
docs/search.md has the measured comparison that selected it (held-out seeds, 7 recorded spaces).

Example:
    >>> sorted(SAMPLERS)[:3], DEFAULT_SAMPLER
    (['cmaes', 'gp', 'local'], 'wf-default')
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.samplers import BaseSampler

from warpforge.errors import UsageError
from warpforge.search.optuna_private import parzen_estimator
from warpforge.search.samplers.escape import Escape
from warpforge.search.samplers.gp_arm import GPArm
from warpforge.search.samplers.policy import (
    Context,
    Pick,
    Policy,
    RoundRobin,
    ScoringArm,
    UniformArm,
    last_improvement,
)
from warpforge.search.samplers.space import SearchSpace

__all__ = [
    "ARM_ATTR",
    "DEFAULT_SAMPLER",
    "REPAIR_ATTR",
    "SAMPLERS",
    "Context",
    "Pick",
    "Policy",
    "UniformArm",
    "make_policy",
    "newer_policy_note",
    "ordinal_distributions",
    "resolve_sampler",
]

ARM_ATTR = "wf:arm"  # system attr: which policy arm proposed the trial
REPAIR_ATTR = "wf:repair"  # system attr: "infeasible" / "duplicate" when the raw proposal was snapped


class OptunaArm(Policy):
    """An Optuna sampler proposes ordinal indices; the proposal is snapped to the nearest unseen row."""

    def __init__(self, name: str, sampler: BaseSampler) -> None:
        self.name = name
        self.sampler = sampler

    def optuna_samplers(self) -> list[BaseSampler]:
        return [self.sampler]

    def propose(self, ctx: Context, only: np.ndarray | None = None) -> Pick | None:
        if only is not None:  # Optuna's samplers cannot be restricted to a subset
            return None
        dists = ordinal_distributions(ctx.space)
        rel_space = self.sampler.infer_relative_search_space(ctx.study, ctx.trial)
        raw: dict[str, Any] = {}
        if rel_space:
            raw.update(self.sampler.sample_relative(ctx.study, ctx.trial, rel_space))
        for name, dist in dists.items():
            if name not in raw:
                raw[name] = (
                    dist.low if dist.single() else self.sampler.sample_independent(ctx.study, ctx.trial, name, dist)
                )
        target = np.array([int(raw[n]) for n in ctx.space.params])
        row = ctx.space.row(ctx.space.from_index(target))
        if row is not None and not ctx.seen[row]:
            return Pick(row, self.name)
        snapped = nearest_unseen(ctx.space, target, ctx.seen, ctx.rng)
        if snapped is None:
            return None
        return Pick(snapped, self.name, "infeasible" if row is None else "duplicate")


class TPEArm(ScoringArm):
    """TPE's acquisition l(x)/g(x), maximised over the explicit unseen feasible set instead of sampled.

    Optuna's TPESampler draws 24 candidates from l(x) in the box and keeps the best; on restricted
    spaces most draws are infeasible (gemm keeps 22% of its product) and snapping them to the
    nearest feasible point discards what TPE chose. Scoring the feasible candidates themselves
    keeps Optuna's Parzen estimators (built by TPESampler's own class and parameters) and drops
    the repair. Choices made by measurement (docs/search.md, 7 recorded spaces):

    - categorical kernels on the ordinal indices: a mismatch costs the same on every axis, which
      behaves like Hamming similarity; ordinal int kernels exploited too narrowly (MI250X 0.47
      vs 0.95 at 100 evaluations, 10 repeats);
    - failures join the "above" (bad) group: failed configurations are information, and TPE's
      density ratio then steers away from their neighbourhood;
    - the next point is drawn among the ``top_k`` = 3 best scores, not the argmax: deterministic
      argmax re-proposes near-twins of the incumbent (A100 0.80 vs 0.83-0.87);
    - at most ``max_candidates`` = 2,000 random unseen rows are scored per step, so an 18k-row
      gemm space costs ~10 ms per proposal.

    Uses Optuna's private ``_parzen_estimator_cls``/``_parzen_estimator_parameters`` (stable since
    Optuna 3.x); if they change, the arm falls back to plain TPESampler plus snapping.
    """

    name = "tpe"

    def __init__(
        self,
        seed: int | None,
        gamma: float = 0.1,
        gamma_max: int = 25,
        top_k: int = 3,
        max_candidates: int = 2000,
        n_startup: int = 5,
        independent: bool = False,
    ) -> None:
        super().__init__(max_candidates, n_startup, top_k)
        self.independent = independent
        self.tpe = optuna.samplers.TPESampler(seed=seed, multivariate=True)
        self.fallback = OptunaArm("tpe", self.tpe)
        self.gamma, self.gamma_max = gamma, gamma_max

    def optuna_samplers(self) -> list[BaseSampler]:
        return [self.tpe]

    def when_broken(self, ctx: Context, only: np.ndarray | None) -> Pick | None:
        return self.fallback.propose(ctx, only)  # plain TPESampler plus snapping

    def acquisition(self, ctx: Context, rows: np.ndarray) -> np.ndarray:
        """log l(x) - log g(x) for the given feasible rows."""
        scored = [i for i, v in enumerate(ctx.values) if v is not None]
        by_value = sorted(scored, key=lambda i: ctx.values[i])  # type: ignore[arg-type, return-value]
        n_below = min(math.ceil(self.gamma * len(scored)), self.gamma_max)
        below = sorted(by_value[:n_below])  # trial order: TPE's weights favour recent trials
        above = sorted(by_value[n_below:] + [i for i, f in enumerate(ctx.failed) if f])
        space = ctx.space
        cols = [j for j, v in enumerate(space.params.values()) if len(v) > 1]
        names = [space.names[j] for j in cols]
        dists: dict[str, BaseDistribution] = {
            n: CategoricalDistribution(list(range(len(space.params[n])))) for n in names
        }
        mat = space.index_matrix

        def observations(idx: list[int]) -> dict[str, np.ndarray]:
            trial_rows = np.array([ctx.rows[i] for i in idx], dtype=int)
            return {n: mat[trial_rows, j].astype(float) for n, j in zip(names, cols)}

        cls, params = parzen_estimator(self.tpe)
        samples = {n: mat[rows, j].astype(float) for n, j in zip(names, cols)}
        groups = [[n] for n in names] if self.independent else [names]
        acq = np.zeros(len(rows))
        lo, hi = observations(below), observations(above)
        for g in groups:
            sub = {n: dists[n] for n in g}
            acq += cls({n: lo[n] for n in g}, sub, params).log_pdf({n: samples[n] for n in g}) - cls(
                {n: hi[n] for n in g}, sub, params
            ).log_pdf({n: samples[n] for n in g})
        return acq


class LocalArm(Policy):
    """Local refinement: the incumbent's unseen feasible Hamming-1 neighbours (one parameter changed).

    Ranked by the model arm's acquisition when one is given (random otherwise). Returns None at a
    local optimum. MI250X shows why: TPE's good group can be all ``block_size_y=2`` while the
    optimum is the same configuration with ``block_size_y=1`` (0.93 -> 0.98 at 100 evaluations).
    """

    name = "local"

    def __init__(self, model: Policy | None = None) -> None:
        self.model = model

    def propose(self, ctx: Context, only: np.ndarray | None = None) -> Pick | None:
        best = ctx.best_row
        if best is None:
            return None
        mat = ctx.space.index_matrix
        near = ((mat != mat[best]).sum(axis=1) == 1) & ~ctx.seen
        if not near.any():
            return None
        pick = self.model.propose(ctx, only=near) if self.model is not None else None
        if pick is None:
            return Pick(int(ctx.rng.choice(np.flatnonzero(near))), self.name)
        return Pick(pick.row, self.name)


class Portfolio(Policy):
    """Uniform start, then the model arm; every ``local_every``-th proposal is a local step while the
    incumbent improved at most ``local_window`` evaluations ago.

    Local steps pay off right after the model lands in a new basin (MI250X: the model finds
    ``block_size_y=2``, the neighbour ``=1`` is the optimum); in a basin that stopped improving they
    spend the evaluations the model needs to escape it (A100: 38% of runs sat on one 0.64 point).
    Measured at 100 evaluations (docs/search.md): local always on every 3rd step, A100 0.816
    (150 repeats); only up to 14 evaluations after an improvement, 0.849 (80 repeats), with MI250X
    and A4000 unchanged within noise. The schedule is a function of the finished trials, so a
    study resumed from storage continues it.
    """

    name = "portfolio"

    def __init__(
        self,
        model: Policy,
        local: Policy | None = None,
        n_init: int = 5,
        local_every: int = 3,
        local_window: int | None = 14,
    ) -> None:
        self.model, self.local, self.uniform = model, local, UniformArm()
        self.n_init, self.local_every, self.local_window = n_init, local_every, local_window

    def optuna_samplers(self) -> list[BaseSampler]:
        return self.model.optuna_samplers()

    def propose(self, ctx: Context, only: np.ndarray | None = None) -> Pick | None:
        n = len(ctx.rows)
        if only is not None:
            return self.model.propose(ctx, only)
        if n < self.n_init:
            return self.uniform.propose(ctx)
        if (
            self.local is not None
            and self.local_every
            and n % self.local_every == 0
            and (self.local_window is None or n - last_improvement(ctx.values) <= self.local_window)
        ):
            pick = self.local.propose(ctx)
            if pick is not None:
                return pick
        return self.model.propose(ctx)


def ordinal_distributions(space: SearchSpace) -> dict[str, IntDistribution]:
    """One ``IntDistribution(0, n-1)`` per parameter: the ordinal encoding every sampler sees."""
    return {name: IntDistribution(0, len(values) - 1) for name, values in space.params.items()}


def nearest_unseen(space: SearchSpace, target: np.ndarray, seen: np.ndarray, rng: np.random.Generator) -> int | None:
    """Row of the unseen feasible configuration closest to ``target`` (ordinal indices) in scaled L1."""
    if seen.all():
        return None
    dist = (np.abs(space.index_matrix - target) * space.scale).sum(axis=1)
    dist[seen] = np.inf
    ties = np.flatnonzero(dist <= dist.min() + 1e-12)
    return int(rng.choice(ties))


# --- registry --------------------------------------------------------------------------------------
PolicyFactory = Callable[[int | None], Policy]
# wf-default's GP-UCB arm. With UCB as the GP's only acquisition beside TPE (no EI arm), A100 read
# 0.835 at beta 2 and 0.865 at beta 3 (60 repeats, seeds 13000-13059); 3 was kept for the third arm.
UCB_BETA = 3.0
# wf-escape's stall and gate (the screen on seeds 20000-20009, 10 repeats, fraction at 50 / 100):
# - stall = no 2% gain within 6 evaluations: patience 10 reached 0.781 / 0.907 on A100, 6 0.852 / 0.922;
#   escaping on every stalled step instead of every other one, 0.750 / 0.789;
# - but MI250X fell from 0.924 / 0.982 to 0.728 / 0.895 and convolution/RTX_3090 at 50 from 0.979 to
#   0.944: there the incumbent was still being refined one parameter at a time. Escaping only from an
#   incumbent with at least 3 measured one-parameter neighbours (a local optimum the portfolio has
#   looked around): MI250X 0.905 / 0.993, RTX_3090 0.979 / 0.996, A100 0.815 / 0.968. Waiting for 20
#   evaluations instead: MI250X 0.804 / 0.959; any gain (not 2%) resetting the stall: 0.829 / 0.998.
ESCAPE_PATIENCE, ESCAPE_MIN_GAIN, ESCAPE_MIN_PROBED = 6, 0.02, 3
# wf-default's escape target: what the 10 fastest measurements all agree on (top 5 and top 10 screened).
CONSENSUS_TOP = 10


def _tpe(seed: int | None) -> BaseSampler:
    # Plain Optuna TPE (the baseline): multivariate is Optuna 5's default for one objective.
    return optuna.samplers.TPESampler(seed=seed, multivariate=True)


def _qmc(seed: int | None) -> BaseSampler:
    with warnings.catch_warnings():  # QMCSampler is "experimental" since Optuna 3.0
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.QMCSampler(seed=seed, scramble=True, warn_independent_sampling=False)


def _tpe_local(seed: int | None) -> Policy:
    model = TPEArm(seed)
    return Portfolio(model, LocalArm(model), n_init=5, local_every=3, local_window=14)


def _portfolio(seed: int | None) -> Policy:
    # The default of sessions 5-7. A third arm, the same GP with UCB (beta 3), explores where EI
    # exploits: session 5's screens (docs/search.md) measured +0.005 on the 7-space mean at 100
    # evaluations (13000-13039; A100 +0.014, MI250X +0.038, A4000 -0.012) and +0.016 on the 4 hard
    # spaces (14000-14049); held out (3000-3099, 100 repeats) it is level with the two-arm portfolio.
    return Portfolio(RoundRobin([GPArm(seed), TPEArm(seed), GPArm(seed, ucb_beta=UCB_BETA)]), n_init=5)


def _escaping(seed: int | None, consensus_top: int | None) -> Policy:
    ei = GPArm(seed)
    portfolio = Portfolio(RoundRobin([ei, TPEArm(seed), GPArm(seed, ucb_beta=UCB_BETA)]), n_init=5)
    return Escape(
        portfolio,
        ei,
        patience=ESCAPE_PATIENCE,
        min_gain=ESCAPE_MIN_GAIN,
        min_probed=ESCAPE_MIN_PROBED,
        consensus_top=consensus_top,
    )


def _default(seed: int | None) -> Policy:
    # wf-portfolio plus the stall escape (search/samplers/escape.py) aimed at the consensus of the 10 fastest
    # measurements: after 6 evaluations without a 2% gain, from an incumbent with >= 3 measured
    # one-parameter neighbours, every other proposal is the GP's expected-improvement choice among
    # the unseen configurations that change a parameter value all 10 fastest share (radius >= 2 when
    # they share none). Screen on seeds 21000-21019 (20 repeats), 7-space mean at 50 / 100:
    # wf-portfolio 0.869 / 0.959, this 0.877 / 0.967 (A100 0.683 / 0.862 -> 0.747 / 0.891; no space
    # lower by more than one standard error); consensus of the top 5: 0.879 / 0.961 (MI250X -0.025).
    return _escaping(seed, CONSENSUS_TOP)


def _escape(seed: int | None) -> Policy:
    # The radius-only escape (docs/history/search.md): better at 50 evaluations, worse on A4000 at 100
    # on two seed ranges (-0.047, -0.051), so it was not made the default (docs/search.md).
    return _escaping(seed, None)


def _gp_tpe(seed: int | None) -> Policy:
    # The default of sessions 2-4: GP expected improvement and TPE taking turns.
    return Portfolio(RoundRobin([GPArm(seed), TPEArm(seed)]), n_init=5)


def _gp(seed: int | None) -> Policy:
    return Portfolio(GPArm(seed), n_init=5)


SAMPLERS: dict[str, PolicyFactory] = {
    "random": lambda seed: UniformArm(),
    "tpe": lambda seed: OptunaArm("tpe", _tpe(seed)),
    "cmaes": lambda seed: OptunaArm(
        "cmaes", optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=5, warn_independent_sampling=False)
    ),
    "gp": lambda seed: OptunaArm("gp", optuna.samplers.GPSampler(seed=seed, n_startup_trials=5)),
    "qmc": lambda seed: OptunaArm("qmc", _qmc(seed)),
    "nsga2": lambda seed: OptunaArm("nsga2", optuna.samplers.NSGAIISampler(seed=seed, population_size=20)),
    "local": lambda seed: Portfolio(UniformArm(), LocalArm(), n_init=5, local_every=1, local_window=None),
    "wf-tpe": lambda seed: Portfolio(TPEArm(seed), n_init=5),
    "wf-tpe-local": _tpe_local,
    "wf-gp": _gp,
    "wf-gp-tpe": _gp_tpe,
    "wf-portfolio": _portfolio,
    "wf-default": _default,
    "wf-escape": _escape,
}
DEFAULT_SAMPLER = "wf-default"

# What each version of a name that moves meant, oldest first; the last is what the name means today. A study is
# created under the versioned name (``wf-default`` -> ``wf-default@4``) and keeps it, so a resumed study goes on
# with the policy it started with. The versions, with their measurements: docs/history/search.md.
POLICY_VERSIONS: dict[str, tuple[str, ...]] = {
    "wf-default": ("wf-tpe-local", "wf-gp-tpe", "wf-portfolio", "wf-consensus"),
}
SAMPLERS["wf-consensus"] = _default  # wf-default@4: the portfolio plus the consensus escape


def _split(name: str) -> tuple[str, int | None]:
    base, at, version = name.partition("@")
    if not at:
        return base, None
    versions = POLICY_VERSIONS.get(base)
    if versions is None or not version.isdigit() or not 1 <= int(version) <= len(versions):
        known = ", ".join(f"{b}@1..{len(v)}" for b, v in sorted(POLICY_VERSIONS.items()))
        raise UsageError(f"unknown sampler version {name!r}; versioned names: {known}")
    return base, int(version)


def resolve_sampler(name: str) -> str:
    """The name a new study records: a moving name gets its current version (``wf-default`` ->
    ``wf-default@4``); a versioned or fixed name is itself. Unknown names are a usage error.

    Example:
        >>> resolve_sampler("wf-default"), resolve_sampler("wf-default@2"), resolve_sampler("tpe")
        ('wf-default@4', 'wf-default@2', 'tpe')
    """
    base, version = _split(name)
    if version is None and base not in SAMPLERS:
        raise UsageError(f"unknown sampler {name!r}; choose from {', '.join(sorted(SAMPLERS))}")
    if version is None and base in POLICY_VERSIONS:
        return f"{base}@{len(POLICY_VERSIONS[base])}"
    return name


def newer_policy_note(stored: str) -> str | None:
    """A note when a study keeps a policy version older than what its name means today (None otherwise)."""
    base, version = _split(stored)
    versions = POLICY_VERSIONS.get(base)
    if versions is None or version is None or version == len(versions):
        return None
    return (
        f"this study keeps its sampler {stored} ({versions[version - 1]}); {base} is now {base}@{len(versions)} "
        f"({versions[-1]}): a new campaign gets it"
    )


def make_policy(name: str, seed: int | None = None) -> Policy:
    """Instantiate a registered sampler (``name`` or ``name@version``); an unknown one is a usage error."""
    base, version = _split(name)
    if version is not None:
        return SAMPLERS[POLICY_VERSIONS[base][version - 1]](seed)
    try:
        factory = SAMPLERS[base]
    except KeyError:
        raise UsageError(f"unknown sampler {name!r}; choose from {', '.join(sorted(SAMPLERS))}") from None
    return factory(seed)
