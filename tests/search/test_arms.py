"""The model arms behind wf-default: GP expected improvement over the feasible set, and the round robin."""

from __future__ import annotations

import numpy as np
import optuna
import pytest

from warpforge.search.samplers.gp_arm import GPArm, copula_target
from warpforge.search.samplers.policy import Context, Pick, Policy, RoundRobin
from warpforge.search.samplers.registry import ARM_ATTR, DEFAULT_SAMPLER
from warpforge.search.samplers.space import SearchSpace
from warpforge.search.samplers.strategy import Strategy, make_study

optuna.logging.set_verbosity(optuna.logging.WARNING)

# 6 x 6 x 3 = 108 configurations, 90 feasible; the fast ones all have a == 3.
SPACE = SearchSpace.enumerate(
    {"a": list(range(6)), "b": list(range(6)), "c": [1, 2, 4]}, lambda p: not (p["b"] == 5 and p["c"] == 4)
)


def _time(p: dict) -> float:
    return (1.0 if p["a"] == 3 else 10.0) * (1 + 0.05 * p["b"]) * (1 + 0.01 * p["c"])


def _context(rows: list[int], seed: int = 0) -> Context:
    seen = np.zeros(len(SPACE), dtype=bool)
    seen[rows] = True
    values: list[float | None] = [_time(SPACE.as_dict(SPACE.feasible[r])) for r in rows]
    return Context(
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


def test_gp_arm_proposes_where_the_model_predicts_fast_times() -> None:
    rng = np.random.default_rng(3)
    a = SPACE.index_matrix[:, 0]
    fast = list(rng.choice(np.flatnonzero(a == 3), 2, replace=False))
    slow = list(rng.choice(np.flatnonzero(a != 3), 10, replace=False))
    ctx = _context([int(r) for r in fast + slow])
    pick = GPArm(n_startup=5).propose(ctx)
    assert pick is not None and pick.arm == "gp"
    assert not ctx.seen[pick.row]
    assert SPACE.feasible[pick.row][0] == 3, SPACE.as_dict(SPACE.feasible[pick.row])


def test_gp_arm_counts_failures_as_slow_and_honours_only() -> None:
    ctx = _context([0, 7, 20, 33, 41, 50])
    ctx.values[0], ctx.failed[0] = None, True
    only = np.zeros(len(SPACE), dtype=bool)
    only[[60, 61]] = True
    pick = GPArm().propose(ctx, only)
    assert pick is not None and pick.row in (60, 61)
    assert GPArm(n_startup=10).propose(ctx) is None  # 5 measured < 10: still starting up


def test_gp_ucb_arm_trades_prediction_for_uncertainty_by_beta() -> None:
    """UCB's beta trades the predicted time against the model's uncertainty: at 0 it proposes a
    near-twin of the fast measurements, at wf-default's 3 a level the model has never seen."""
    # every a == 3 row with b <= 1 measured (fast), and all a in {0, 1, 2} with c == 1 (slow):
    # a == 4 and 5 are unmeasured, so their posterior variance is the prior's.
    a, b, c = (SPACE.index_matrix[:, j] for j in range(3))
    rows = np.flatnonzero(((a == 3) & (b <= 1)) | ((a <= 2) & (c == 0))).tolist()
    ctx = _context(rows)
    mean, ucb = GPArm(ucb_beta=0.0).propose(ctx), GPArm(ucb_beta=3.0).propose(ctx)
    assert mean is not None and ucb is not None and ucb.arm == "gp-ucb"
    assert SPACE.feasible[mean.row][0] == 3, SPACE.as_dict(SPACE.feasible[mean.row])
    assert SPACE.feasible[ucb.row][0] in (4, 5), SPACE.as_dict(SPACE.feasible[ucb.row])


def test_copula_target_ranks_fastest_highest_ties_failures_with_the_slowest_and_ignores_scale() -> None:
    times = np.array([3.0, 1.0, np.nan, 30.0, 2.0, np.nan])
    y = copula_target(times)
    assert np.argmax(y) == 1 and y[4] > y[0] > y[3]  # order of the times, fastest highest
    assert y[2] == y[5] == y[3] == y.min()  # failures tie with the slowest measured time
    assert abs(y.mean()) < 1e-12 and abs(y.std() - 1) < 1e-12  # standardised, as Optuna's GP priors expect
    # ranks only: a 10x slower tail (MI250X's times span 152x) does not change the target
    np.testing.assert_allclose(copula_target(np.where(times > 2.5, times * 10, times)), y)


def test_gp_arm_works_with_installed_optuna() -> None:
    """The private ``optuna._gp`` API the arm uses must be there: a silent fallback would be a regression."""
    s = Strategy(SPACE, make_study("gp-live", None, DEFAULT_SAMPLER, seed=4), DEFAULT_SAMPLER, seed=4)
    for _ in range(20):
        p = s.ask()
        assert p is not None
        s.tell(p, _time(p.params))
    arms = [t.system_attrs[ARM_ATTR] for t in s.study.trials]
    assert arms.count("gp") >= 3 and arms.count("gp-ucb") >= 3, arms  # 15 model turns, shared with TPE
    assert not any(arm.broken for arm in s.sampler.policy.inner.model.arms)  # type: ignore[attr-defined]


def test_gp_arm_falls_back_if_optuna_internals_change(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise AttributeError("optuna._gp.gp has no fit_kernel_params")

    monkeypatch.setattr(GPArm, "acquisition", broken)
    s = Strategy(SPACE, make_study("gp-fallback", None, DEFAULT_SAMPLER, seed=5), DEFAULT_SAMPLER, seed=5)
    seen = set()
    while (p := s.ask()) is not None:
        assert SPACE.key(p.params) not in seen
        seen.add(SPACE.key(p.params))
        s.tell(p, _time(p.params))
    assert len(seen) == len(SPACE)
    arms = {t.system_attrs[ARM_ATTR] for t in s.study.trials}
    assert not arms & {"gp", "gp-ucb"} and "tpe" in arms
    assert s.sampler.policy.inner.model.arms[0].broken and s.sampler.policy.inner.model.arms[2].broken  # type: ignore[attr-defined]


class _Fixed(Policy):
    def __init__(self, name: str, row: int | None) -> None:
        self.name, self.row = name, row

    def propose(self, ctx: Context, only: np.ndarray | None = None) -> Pick | None:
        return None if self.row is None else Pick(self.row, self.name)


def test_round_robin_takes_turns_by_history_length_and_skips_silent_arms() -> None:
    rr = RoundRobin([_Fixed("x", 1), _Fixed("y", 2), _Fixed("quiet", None)])
    turns = [rr.propose(_context(list(range(10, 10 + n)))) for n in range(6)]
    assert [p.arm for p in turns if p] == ["x", "y", "x", "x", "y", "x"]
    with pytest.raises(ValueError):
        RoundRobin([])
