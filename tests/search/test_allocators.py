"""The allocator registry: each rule's decisions on hand-made arm states (expected values worked out by hand)."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from warpforge.search.engine.allocators import ALLOCATORS, SuccessiveHalving, UcbBandit, get_allocator


@dataclass
class Arm:
    load: int
    best_ms: float | None
    exhausted: bool = False


def arms(*spec: tuple[int, float | None]) -> list[Arm]:
    return [Arm(load, best) for load, best in spec]


def rule_as_written(state: list[Arm], step: int) -> Arm | None:
    """The default rule from its specification, not from its code: "every live arm to 3 evaluations first
    (fewest first), then even steps go to the fewest evaluated and odd steps to the fastest measured; ties go
    to the arm listed first". Written as an explicit ranking by (key, position), where the implementation
    relies on ``min`` keeping the first of equals."""
    live = [(pos, a) for pos, a in enumerate(state) if not a.exhausted]
    if not live:
        return None
    by_load = sorted(live, key=lambda pa: (pa[1].load, pa[0]))
    timed = sorted(((a.best_ms, pos) for pos, a in live if a.best_ms is not None))
    warming_up = by_load[0][1].load < 3
    if warming_up or step % 2 == 0 or not timed:
        return by_load[0][1]
    return state[timed[0][1]]


def test_registry_has_the_three_rules_and_rejects_unknown_names() -> None:
    assert {"default", "successive-halving", "bandit"} <= set(ALLOCATORS)
    with pytest.raises(ValueError, match="available"):
        get_allocator("nope")


def test_default_follows_its_rule_on_random_states() -> None:
    rng = random.Random(0)
    pick = get_allocator("default").pick
    for _ in range(2000):
        state = [
            Arm(rng.randint(0, 6), rng.choice([None, 1.0, 2.0, rng.random()]), rng.random() < 0.2)
            for _ in range(rng.randint(1, 5))
        ]
        step = rng.randint(0, 9)
        assert pick(state, step) is rule_as_written(state, step)


def test_default_decisions() -> None:
    pick = get_allocator("default").pick
    a = arms((3, 2.0), (3, 1.0))
    assert pick(a, 0) is a[0]  # even step: fewest evaluated (ties: the first arm)
    assert pick(a, 1) is a[1]  # odd step: the best measured
    b = arms((2, 2.0), (5, 1.0))
    assert pick(b, 1) is b[0]  # an arm below 3 evaluations comes first
    assert pick([Arm(0, None, True)], 0) is None


def test_successive_halving_decisions() -> None:
    sh = SuccessiveHalving(min_evals=2, eta=2)
    a = arms((2, 4.0), (2, 1.0), (2, 3.0), (1, None))
    assert sh.pick(a, 0) is a[3]  # rung 0 unfinished: the arm below 2 evaluations
    b = arms((2, 4.0), (2, 1.0), (2, 3.0), (2, 2.0))
    survivors, target = sh.survivors(b)
    assert survivors == [b[1], b[3]] and target == 4  # the best half (1.0 and 2.0 ms) goes on to 4 each
    assert sh.pick(b, 0) is b[1]
    c = arms((2, 4.0), (4, 1.0), (2, 3.0), (4, 2.0))
    assert sh.survivors(c) == ([c[1]], 8)  # rung 1 done: only the best arm is left
    assert sh.pick(c, 0) is c[1]
    c[1].exhausted = True
    assert sh.pick(c, 0) is c[3]  # the winner used up its space: the best live arm takes the rest
    d = arms((8, 1.0), (8, 2.0), (0, None))  # an arm added mid-run gets its first rung first
    assert sh.pick(d, 0) is d[2]


def test_bandit_decisions() -> None:
    ucb = UcbBandit(c=0.5)
    a = arms((0, None), (3, 1.0))
    assert ucb.pick(a, 0) is a[0]  # an unplayed arm first
    b = arms((4, 1.0), (4, 2.0))
    assert ucb.pick(b, 0) is b[0]  # same exploration term: the faster arm (reward 1 vs 0.5)
    c = arms((20, 1.0), (1, 1.1))
    # N = 21: arm 0 scores 1 + 0.5 sqrt(2 ln 21 / 20) = 1.276, arm 1 1/1.1 + 0.5 sqrt(2 ln 21) = 2.143
    assert [round(s, 3) for s in ucb.scores(c)] == [1.276, 2.143]
    assert ucb.pick(c, 0) is c[1]
