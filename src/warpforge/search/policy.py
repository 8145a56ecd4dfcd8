"""What a search policy is: it sees the history over a :class:`SearchSpace` and picks an unseen feasible row.

The registry of named policies (``wf-default``, ``tpe``, ...) lives in :mod:`warpforge.search.samplers`;
the model-based arms in :mod:`warpforge.search.samplers` (TPE) and :mod:`warpforge.search.gp_arm` (GP).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from optuna.samplers import BaseSampler
from optuna.study import Study
from optuna.trial import FrozenTrial

from warpforge.search.space import SearchSpace


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
    """Chooses the next feasible, unseen row; ``None`` lets the caller fall back to uniform sampling.

    ``only`` (a bool mask over the feasible rows) restricts the choice, e.g. to the incumbent's
    neighbours; a policy that cannot honour it returns None.
    """

    name = "policy"

    def propose(self, ctx: Context, only: np.ndarray | None = None) -> Pick | None:
        raise NotImplementedError

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


