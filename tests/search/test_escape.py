"""The stall escape (``wf-escape``): a hand-built trap that a search looking only near its incumbent cannot leave.

The toy space is 4^4 = 256 configurations. ``TRAP`` = (0, 0, 0, 0) takes 2.0; every configuration
within 2 parameters of it is slower (2.0 + 0.1 per changed parameter), so the trap is a local
optimum of radius 2. Everything 3 or more parameters away lies in the optimum's basin,
1.0 + 0.3 per parameter away from ``OPTIMUM`` = (3, 3, 3, 3): 1.0 there. A search that only looks
near its incumbent must measure all 1 + 12 + 54 = 67 configurations within 2 of the trap before it
can see the basin.
"""

from __future__ import annotations

import numpy as np
import optuna

from warpforge.search.samplers.escape import ESCAPE_ARM, Escape, last_gain
from warpforge.search.samplers.gp_arm import GPArm
from warpforge.search.samplers.policy import Context, Pick, Policy, UniformArm
from warpforge.search.samplers.registry import ARM_ATTR
from warpforge.search.samplers.space import SearchSpace
from warpforge.search.samplers.strategy import Strategy, make_study

optuna.logging.set_verbosity(optuna.logging.WARNING)

SPACE = SearchSpace.enumerate({k: [0, 1, 2, 3] for k in "abcd"})
TRAP, OPTIMUM = (0, 0, 0, 0), (3, 3, 3, 3)


def _time(config: tuple[int, ...]) -> float:
    d_trap = sum(x != 0 for x in config)
    if d_trap <= 2:
        return 2.0 + 0.1 * d_trap
    return 1.0 + 0.3 * sum(x != 3 for x in config)


def _distance(row: int, config: tuple[int, ...]) -> int:
    return sum(x != y for x, y in zip(SPACE.feasible[row], config))


class _Nearest(Policy):
    """A search that never looks far: the unseen configuration nearest its incumbent (the trap first)."""

    name = "nearest"

    def propose(self, ctx: Context, only: np.ndarray | None = None) -> Pick | None:
        centre = SPACE.feasible[ctx.best_row] if ctx.best_row is not None else TRAP
        mat = SPACE.index_matrix
        d = (mat != np.array(SPACE.to_index(centre))).sum(axis=1).astype(float)
        d[ctx.seen if only is None else ctx.seen | ~only] = np.inf
        return None if np.isinf(d.min()) else Pick(int(np.flatnonzero(d == d.min())[0]), self.name)


def _run(policy: Policy, budget: int, seed: int = 0) -> tuple[list[int], list[str]]:
    seen = np.zeros(len(SPACE), dtype=bool)
    rows: list[int] = []
    values: list[float | None] = []
    arms: list[str] = []
    rng = np.random.default_rng(seed)
    for _ in range(budget):
        ctx = Context(
            SPACE,
            None,
            None,
            seen,
            rows,
            values,
            [False] * len(rows),  # type: ignore[arg-type]
            arms,
            rng,
        )
        pick = policy.propose(ctx)
        assert pick is not None and not seen[pick.row]
        seen[pick.row] = True
        rows.append(pick.row)
        values.append(_time(SPACE.feasible[pick.row]))
        arms.append(pick.arm)
    return rows, arms


def test_the_trap_holds_a_search_that_only_looks_near_its_incumbent() -> None:
    rows, _ = _run(_Nearest(), 67)
    assert max(_distance(r, TRAP) for r in rows) == 2  # 67 = every configuration within 2 of the trap
    assert min(_time(SPACE.feasible[r]) for r in rows) == 2.0


def test_stall_detection_counts_only_real_gains() -> None:
    assert last_gain([], 0.02) == 0
    assert last_gain([None, 3.0], 0.02) == 2
    assert last_gain([3.0, 2.9, 2.8, 2.75], 0.02) == 3  # 2.9 < 3.0 * 0.98 and 2.8 < 2.9 * 0.98; 2.75 > 2.8 * 0.98
    assert last_gain([3.0, 2.95, 2.9, 2.85], 0.02) == 1  # creeping by 1.7% a step is no gain, however long
    escape = Escape(_Nearest(), UniformArm(), patience=4)
    assert not escape.stalled([None] * 10)  # nothing measured: a start-up, not a stall
    assert escape.stalled([3.0, 2.99, 2.98, 2.97, 2.96]) and not escape.stalled([3.0, 2.99, 2.98, 2.97])


def test_escape_steps_leave_the_trap_and_the_search_finds_the_optimum() -> None:
    rows, arms = _run(Escape(_Nearest(), UniformArm(), patience=10), 60)
    escapes = [r for r, a in zip(rows, arms) if a == ESCAPE_ARM]
    assert escapes and arms[:10] == ["nearest"] * 10  # the first 10 evaluations gain nothing: then a stall
    assert all(_distance(r, TRAP) >= 2 for r in escapes)  # never the incumbent's Hamming-1 shell
    assert OPTIMUM in [SPACE.feasible[r] for r in rows]


def _escape_radii(escape: Escape, steps: int = 5) -> list[int]:
    """Distance from the trap of each escape step while every configuration is as slow as the trap (the stall
    never ends). The escape's model is ``_Nearest``: it takes the allowed row closest to the incumbent, so each
    step lands exactly on the region's radius (a uniform pick would land 3-4 away whatever the radius)."""
    seen = np.zeros(len(SPACE), dtype=bool)
    rows = [SPACE.row(TRAP), SPACE.row((0, 0, 0, 1))]
    values: list[float | None] = [2.0, 2.1]
    arms = ["nearest", "nearest"]
    radii = []
    seen[rows] = True
    for _ in range(steps):
        ctx = Context(
            SPACE,
            None,
            None,
            seen,
            rows,
            values,
            [False] * len(rows),
            arms,  # type: ignore[arg-type]
            np.random.default_rng(1),
        )
        pick = escape.propose(ctx)
        assert pick is not None and pick.arm == ESCAPE_ARM
        radii.append(_distance(pick.row, TRAP))
        seen[pick.row] = True
        rows.append(pick.row)
        values.append(2.0)
        arms.append(pick.arm)
    return radii


def test_escape_radius_grows_while_the_stall_lasts() -> None:
    """grow=2: the radius starts at 2 and grows by one every 2 escape steps: 2, 2, 3, 3, 4."""
    assert _escape_radii(Escape(_Nearest(), _Nearest(), patience=1, every=1, grow=2)) == [2, 2, 3, 3, 4]


def test_the_radius_test_fails_a_radius_that_never_grows() -> None:
    class Stuck(Escape):
        def region(self, ctx: Context, distance: np.ndarray, done: int) -> np.ndarray:
            return super().region(ctx, distance, 0)  # as if no escape step had been taken yet

    assert _escape_radii(Stuck(_Nearest(), _Nearest(), patience=1, every=1, grow=2)) == [2, 2, 2, 2, 2]


def test_escape_with_the_gp_leaves_a_stall_the_gp_itself_sits_in() -> None:
    """The GP's expected improvement, asked only outside radius 2, proposes outside radius 2."""
    near = [r for r in range(len(SPACE)) if _distance(r, TRAP) <= 1]  # the trap and its 12 neighbours
    seen = np.zeros(len(SPACE), dtype=bool)
    seen[near] = True
    rows = [SPACE.row(TRAP)] + [r for r in near if r != SPACE.row(TRAP)]
    values: list[float | None] = [_time(SPACE.feasible[r]) for r in rows]
    ctx = Context(
        SPACE,
        None,
        None,
        seen,
        rows,
        values,
        [False] * len(rows),
        ["nearest"] * len(rows),  # type: ignore[arg-type]
        np.random.default_rng(0),
    )
    pick = Escape(_Nearest(), GPArm(), patience=10).propose(ctx)
    assert pick is not None and pick.arm == ESCAPE_ARM and _distance(pick.row, TRAP) >= 2


def _escape_run(seed: int, budget: int = 40) -> tuple[list[tuple[int, ...]], list[str]]:
    s = Strategy(SPACE, make_study(f"esc-{seed}", None, "wf-escape", seed=seed), "wf-escape", seed=seed)
    configs = []
    for _ in range(budget):
        p = s.ask()
        assert p is not None
        config = SPACE.key(p.params)
        configs.append(config)
        s.tell(p, _time(config))
    return configs, [t.system_attrs[ARM_ATTR] for t in s.study.trials]


def test_wf_escape_is_repeatable_for_a_seed_and_uses_the_escape() -> None:
    """Through Strategy and an Optuna study, as a campaign runs it: the same seed, the same trials."""
    first, arms = _escape_run(7)
    again, arms_again = _escape_run(7)
    other, _ = _escape_run(8)
    assert first == again and arms == arms_again
    assert first != other
    assert OPTIMUM in first
    assert ESCAPE_ARM in arms  # once the optimum is found the incumbent stalls, and the escape takes turns


def test_no_escape_while_the_incumbent_is_still_refined_one_parameter_at_a_time() -> None:
    """A stall counts only at a probed local optimum: at least ``min_probed`` one-parameter neighbours
    of the incumbent measured (MI250X's last steps are one-parameter changes; escaping there cost 0.2)."""
    far = [r for r in range(len(SPACE)) if _distance(r, TRAP) == 4][:8]  # stall history away from the trap
    near = [r for r in range(len(SPACE)) if _distance(r, TRAP) == 1]
    escape = Escape(_Nearest(), UniformArm(), patience=4, every=1, min_probed=3)
    for n_near, want in [(2, "nearest"), (3, ESCAPE_ARM)]:
        rows = [SPACE.row(TRAP)] + far + near[:n_near]
        seen = np.zeros(len(SPACE), dtype=bool)
        seen[rows] = True
        values: list[float | None] = [2.0] + [2.2] * (len(rows) - 1)
        ctx = Context(
            SPACE,
            None,
            None,
            seen,
            rows,
            values,
            [False] * len(rows),  # type: ignore[arg-type]
            [""] * len(rows),
            np.random.default_rng(0),
        )
        assert escape.stalled(values)
        pick = escape.propose(ctx)
        assert pick is not None and pick.arm == want


def test_consensus_breakers_by_hand() -> None:
    from warpforge.search.samplers.escape import consensus_breakers

    mat = np.array([[0, 0, 5], [0, 1, 5], [1, 0, 5], [1, 1, 5], [2, 1, 5]])
    # the two fastest (rows 1 and 0) agree on column 0 (=0) and column 2 (=5, but every row has 5: no choice)
    assert consensus_breakers(mat, [0, 1, 3], [2.0, 1.0, 3.0], top=2).tolist() == [False, False, True, True, True]
    # the three fastest disagree everywhere that can vary: nothing breaks a consensus
    assert not consensus_breakers(mat, [0, 1, 3], [2.0, 1.0, 3.0], top=3).any()
    # fewer measurements than ``top`` (failures have no value): no consensus yet
    assert not consensus_breakers(mat, [0, 1], [None, 1.0], top=2).any()


def test_consensus_escape_breaks_what_the_best_measurements_agree_on() -> None:
    """The trap's measured neighbours all keep a=0. The 5 fastest (the trap, then the ties at 2.1 in row
    order: (0,0,0,1), (0,0,0,2), (0,0,0,3), (0,0,1,0)) agree on a=0 and b=0: an escape step changes a or b."""
    rows = [SPACE.row(TRAP)] + [
        r for r in range(len(SPACE)) if _distance(r, TRAP) == 1 and SPACE.feasible[r][0] == 0
    ]  # 9 neighbours
    seen = np.zeros(len(SPACE), dtype=bool)
    seen[rows] = True
    values: list[float | None] = [_time(SPACE.feasible[r]) for r in rows]
    escape = Escape(_Nearest(), UniformArm(), patience=4, every=1, min_probed=3, consensus_top=5)
    for seed in range(20):
        ctx = Context(
            SPACE,
            None,
            None,
            seen,
            rows,
            values,
            [False] * len(rows),  # type: ignore[arg-type]
            [""] * len(rows),
            np.random.default_rng(seed),
        )
        pick = escape.propose(ctx)
        assert pick is not None and pick.arm == ESCAPE_ARM and SPACE.feasible[pick.row][:2] != (0, 0)
    found, _ = _run(Escape(_Nearest(), UniformArm(), patience=10, consensus_top=5), 60)
    assert OPTIMUM in [SPACE.feasible[r] for r in found]
