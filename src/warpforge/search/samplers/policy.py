"""What a search policy is: it sees the history over a :class:`SearchSpace` and picks an unseen feasible row.

The registry of named policies (``wf-default``, ``tpe``, ...) lives in :mod:`warpforge.search.samplers.registry`;
the model-based arms in :mod:`warpforge.search.samplers.registry` (TPE) and
:mod:`warpforge.search.samplers.gp_arm` (GP).
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from optuna.samplers import BaseSampler
from optuna.study import Study
from optuna.trial import FrozenTrial

from warpforge.search.samplers.space import SearchSpace

log = logging.getLogger("warpforge.search.samplers.policy")


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


class Policy(ABC):
    """Chooses the next feasible, unseen row; ``None`` lets the caller fall back to uniform sampling.

    ``only`` (a bool mask over the feasible rows) restricts the choice, e.g. to the incumbent's
    neighbours; a policy that cannot honour it returns None.
    """

    name = "policy"

    @abstractmethod
    def propose(self, ctx: Context, only: np.ndarray | None = None) -> Pick | None: ...

    def optuna_samplers(self) -> list[BaseSampler]:
        return []


class UniformArm(Policy):
    """Uniform over the unseen feasible configurations: random sampling without replacement."""

    name = "random"

    def propose(self, ctx: Context, only: np.ndarray | None = None) -> Pick | None:
        free = unseen_rows(ctx, only)
        return Pick(int(ctx.rng.choice(free)), self.name) if free.size else None


class RoundRobin(Policy):
    """Model arms take turns, by the number of finished trials (so a resumed study continues the cycle).

    A turn whose arm has nothing to say (still in its start-up, or broken) goes to the next arm.
    """

    name = "round-robin"

    def __init__(self, arms: list[Policy]) -> None:
        if not arms:
            raise ValueError("RoundRobin needs at least one arm")
        self.arms = arms

    def optuna_samplers(self) -> list[BaseSampler]:
        return [s for arm in self.arms for s in arm.optuna_samplers()]

    def propose(self, ctx: Context, only: np.ndarray | None = None) -> Pick | None:
        first = len(ctx.rows) % len(self.arms)
        for k in range(len(self.arms)):
            pick = self.arms[(first + k) % len(self.arms)].propose(ctx, only)
            if pick is not None:
                return pick
        return None


class ScoringArm(Policy):
    """A model arm that scores unseen feasible rows with :meth:`acquisition` and proposes among the best.

    Optuna's samplers optimise their acquisition in the box; on a restricted tuning space that
    point is usually infeasible and snapping it discards what the model chose, so the model arms
    score the feasible rows themselves: at most ``max_candidates`` random unseen ones per step,
    the next point drawn among the ``top_k`` best (argmax when 1). Nothing is proposed before
    ``n_startup`` measured values. Model arms lean on Optuna internals: if :meth:`acquisition`
    raises the errors an API change produces, the arm marks itself ``broken`` for good and
    :meth:`when_broken` answers from then on.
    """

    def __init__(self, max_candidates: int = 2000, n_startup: int = 5, top_k: int = 1) -> None:
        self.max_candidates, self.n_startup, self.top_k = max_candidates, n_startup, top_k
        self.broken = False

    @abstractmethod
    def acquisition(self, ctx: Context, rows: np.ndarray) -> np.ndarray:
        """Higher is better, one score per row of ``rows``."""

    def when_broken(self, ctx: Context, only: np.ndarray | None) -> Pick | None:
        return None

    def propose(self, ctx: Context, only: np.ndarray | None = None) -> Pick | None:
        if sum(v is not None for v in ctx.values) < self.n_startup:
            return None
        if self.broken:
            return self.when_broken(ctx, only)
        free = unseen_rows(ctx, only, self.max_candidates)
        if free.size == 0:
            return None
        try:
            acq = self.acquisition(ctx, free)
        except (AttributeError, ImportError, TypeError, ValueError, RuntimeError) as exc:
            self.broken = True
            log.warning(
                "sampler arm %s broke (%s: %s); it falls back for the rest of this study",
                self.name,
                type(exc).__name__,
                exc,
            )
            return self.when_broken(ctx, only)
        order = np.argsort(-acq, kind="stable")[: self.top_k]
        best = order[0] if self.top_k == 1 else ctx.rng.choice(order)
        return Pick(int(free[best]), self.name)


def unseen_rows(ctx: Context, only: np.ndarray | None = None, limit: int | None = None) -> np.ndarray:
    """Unseen feasible rows (within ``only``), at most ``limit`` of them drawn at random."""
    free = np.flatnonzero(~ctx.seen if only is None else only & ~ctx.seen)
    if limit is not None and free.size > limit:
        free = ctx.rng.choice(free, limit, replace=False)
    return free


def last_improvement(values: list[float | None]) -> int:
    """Index (1-based count of evaluations) at which the incumbent last improved; 0 if never."""
    best, last = math.inf, 0
    for i, v in enumerate(values, start=1):
        if v is not None and v < best:
            best, last = v, i
    return last
