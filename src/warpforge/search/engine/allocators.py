"""Allocators: how a task's trial budget is split between its variants (arms), one registry.

The campaign calls ``allocator.pick(arms, step)`` before every proposal; it returns the arm that gets
the next evaluation, or None when every arm is exhausted. An arm is seen through :class:`ArmState`:
its load (evaluations told plus in flight), its best measured time, and whether its space is used up.
Arms may be added mid-run (an iterating proposer): every rule here gives a new arm its first
evaluations before comparing it.

- ``default``: round-robin until each arm has 3 evaluations, then every other trial to the arm with
  the best measured time, the rest round-robin (the rule bench-search and the campaign always had);
- ``successive-halving``: rungs of ``min_evals * eta**k`` evaluations; after each rung only the best
  ``1/eta`` of the arms (by best time; unmeasured last) go on;
- ``bandit``: UCB1 on the normalised best time (the best arm scores 1, an arm twice as slow 0.5, an
  unmeasured one 0), plus ``c * sqrt(2 ln N / n)``.

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class A:
    ...     load: int
    ...     best_ms: float | None
    ...     exhausted: bool = False
    >>> arms = [A(3, 2.0), A(3, 1.0)]
    >>> get_allocator("default").pick(arms, step=1).best_ms   # odd step: the best arm
    1.0
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

from warpforge.errors import UsageError


class ArmState(Protocol):
    @property
    def load(self) -> int: ...  # evaluations told + in flight
    @property
    def best_ms(self) -> float | None: ...  # best measured objective; None before any measurement
    @property
    def exhausted(self) -> bool: ...  # no configuration left to ask


A = TypeVar("A", bound=ArmState)


class Allocator(ABC):
    """Chooses the arm for the next evaluation; keyword options come from ``CampaignSpec.allocator_config``."""

    name: ClassVar[str] = ""

    @abstractmethod
    def pick(self, arms: Sequence[A], step: int) -> A | None: ...


def _fewest(live: Sequence[A]) -> A:
    return min(live, key=lambda a: a.load)  # min keeps the first on ties: arms' order breaks them


class DefaultAllocator(Allocator):
    """Round-robin to 3 evaluations each, then alternate: best measured arm / fewest evaluated."""

    name = "default"

    def __init__(self, warmup: int = 3) -> None:
        self.warmup = warmup

    def pick(self, arms: Sequence[A], step: int) -> A | None:
        live = [a for a in arms if not a.exhausted]
        if not live:
            return None
        fewest = _fewest(live)
        measured = [a for a in live if a.best_ms is not None]
        if fewest.load < self.warmup or not measured or step % 2 == 0:
            return fewest
        return min(measured, key=lambda a: a.best_ms)  # type: ignore[arg-type,return-value]


def _rank_key(a: ArmState) -> float:
    return a.best_ms if a.best_ms is not None else math.inf


class SuccessiveHalving(Allocator):
    """Rung k: the surviving arms each get ``min_evals * eta**k`` evaluations; then the best 1/eta survive."""

    name = "successive-halving"

    def __init__(self, min_evals: int = 3, eta: int = 2) -> None:
        if min_evals < 1 or eta < 2:
            raise UsageError("successive-halving needs min_evals >= 1 and eta >= 2")
        self.min_evals, self.eta = min_evals, eta

    def survivors(self, arms: Sequence[A]) -> tuple[list[A], int]:
        """The arms still in the race and their rung's per-arm target."""
        survivors, target = list(arms), self.min_evals
        while len(survivors) > 1 and all(a.exhausted or a.load >= target for a in survivors):
            keep = math.ceil(len(survivors) / self.eta)
            survivors = sorted(survivors, key=_rank_key)[:keep]  # sorted is stable: ties keep arm order
            target *= self.eta
        return survivors, target

    def pick(self, arms: Sequence[A], step: int) -> A | None:
        live = [a for a in arms if not a.exhausted]
        if not live:
            return None
        survivors, target = self.survivors(arms)
        behind = [a for a in survivors if not a.exhausted and a.load < target]
        if behind:
            return _fewest(behind)
        # The last survivor (or all survivors) used up: the best live arm takes the rest.
        return min(live, key=_rank_key)


class UcbBandit(Allocator):
    """UCB1 on normalised best time: ``min_best / best + c * sqrt(2 ln N / n)``; unplayed arms first."""

    name = "bandit"

    def __init__(self, c: float = 0.5, min_evals: int = 1) -> None:
        self.c, self.min_evals = c, min_evals

    def scores(self, arms: Sequence[ArmState]) -> list[float]:
        measured = [a.best_ms for a in arms if a.best_ms is not None]
        best = min(measured) if measured else None
        total = max(sum(a.load for a in arms), 1)
        out = []
        for a in arms:
            reward = best / a.best_ms if best is not None and a.best_ms is not None else 0.0
            out.append(reward + self.c * math.sqrt(2 * math.log(total) / max(a.load, 1)))
        return out

    def pick(self, arms: Sequence[A], step: int) -> A | None:
        live = [a for a in arms if not a.exhausted]
        if not live:
            return None
        fewest = _fewest(live)
        if fewest.load < self.min_evals:
            return fewest
        scores = self.scores(live)
        return live[max(range(len(live)), key=lambda i: scores[i])]


ALLOCATORS: dict[str, type[Allocator]] = {c.name: c for c in (DefaultAllocator, SuccessiveHalving, UcbBandit)}


def register_allocator(cls: type[Allocator]) -> type[Allocator]:
    ALLOCATORS[cls.name] = cls
    return cls


def get_allocator(name: str = "default", config: Mapping[str, Any] | None = None) -> Allocator:
    """The registered allocator ``name`` with its keyword options."""
    if name not in ALLOCATORS:
        raise UsageError(f"unknown allocator {name!r}: available: {', '.join(sorted(ALLOCATORS))}")
    return ALLOCATORS[name](**dict(config or {}))
