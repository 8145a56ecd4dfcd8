"""Strategy: ask/tell over an Optuna study on an explicit space (the campaign engine's interface)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from warpforge.search.samplers.registry import DEFAULT_SAMPLER, SAMPLERS
from warpforge.search.samplers.space import SearchSpace
from warpforge.search.samplers.strategy import CONFIG_ATTR, Strategy, make_study

optuna.logging.set_verbosity(optuna.logging.WARNING)

# 4 x 3 x 2 = 24 in the product, 14 feasible: a shared-memory-like product bound plus a hole.
SPACE = SearchSpace.enumerate(
    {"block": [16, 32, 64, 128], "warps": [2, 4, 8], "stages": [1, 2]},
    lambda c: c["block"] * c["warps"] * c["stages"] <= 512 and (c["block"], c["warps"]) != (32, 4),
)


def _objective(p: dict) -> float:
    return abs(p["block"] - 64) / 16 + abs(p["warps"] - 4) + p["stages"]


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_every_sampler_proposes_feasible_unique_configs_until_exhausted(sampler: str) -> None:
    s = Strategy(SPACE, make_study("t", None, sampler, seed=1), sampler, seed=1)
    seen = set()
    for _ in range(len(SPACE)):
        p = s.ask()
        assert p is not None
        key = SPACE.key(p.params)
        assert key in SPACE, f"{sampler} proposed infeasible {p.params}"
        assert key not in seen, f"{sampler} repeated {p.params}"
        seen.add(key)
        s.tell(p, _objective(p.params))
    assert s.ask() is None
    assert s.n_told == len(SPACE)
    assert s.best == ({"block": 64, "warps": 4, "stages": 1}, 1.0)


def test_failures_and_unmeasured_are_recorded_and_never_reproposed() -> None:
    study = make_study("f", None, DEFAULT_SAMPLER, seed=0)
    s = Strategy(SPACE, study, seed=0)
    p1, p2, p3 = s.ask(), s.ask(), s.ask()
    assert p1 and p2 and p3
    s.tell(p1, None, failed=True, attrs={"verdict": "compile_error"})
    s.tell(p2, None)
    s.tell(p3, 2.5, attrs={"p50_ms": 2.5})
    t1, t2, t3 = study.trials
    assert t1.state == TrialState.FAIL and t1.user_attrs["verdict"] == "compile_error"
    assert t2.state == TrialState.PRUNED and t2.user_attrs["unmeasured"] is True
    assert t3.state == TrialState.COMPLETE and t3.value == 2.5
    assert t3.user_attrs[CONFIG_ATTR] == p3.params
    assert s.best == (p3.params, 2.5) and s.n_told == 3
    rest = []
    while (p := s.ask()) is not None:
        rest.append(SPACE.key(p.params))
        s.tell(p, None, failed=True)
    assert len(rest) == len(SPACE) - 3
    assert not {SPACE.key(p.params) for p in (p1, p2, p3)} & set(rest)


def test_params_in_study_are_ordinal_indices() -> None:
    study = make_study("o", None, "tpe", seed=0)
    s = Strategy(SPACE, study, "tpe", seed=0)
    p = s.ask()
    assert p is not None
    s.tell(p, 1.0)
    assert SPACE.from_index(study.trials[0].params[k] for k in SPACE.params) == SPACE.key(p.params)


def test_recover_requeues_interrupted_trials_from_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'wf.db'}"
    s = Strategy(SPACE, make_study("camp/task/v1", url, seed=3), seed=3)
    done = s.ask()
    assert done is not None
    s.tell(done, 1.0)
    lost = [s.ask(), s.ask()]  # the process dies with these two RUNNING
    lost_keys = {SPACE.key(p.params) for p in lost if p}
    del s

    study = make_study("camp/task/v1", url, seed=3)  # load_if_exists
    s2 = Strategy(SPACE, study, seed=4)
    assert s2.n_told == 1
    assert s2.recover() == 2
    first = [s2.ask(), s2.ask()]
    assert {SPACE.key(p.params) for p in first if p} == lost_keys
    interrupted = [t for t in study.trials if t.user_attrs.get("interrupted")]
    assert len(interrupted) == 2 and all(t.state == TrialState.FAIL for t in interrupted)
    for p in first:
        assert p is not None
        s2.tell(p, 2.0)
    told = {SPACE.key(done.params)} | lost_keys
    while (p := s2.ask()) is not None:  # resumes without repeating anything told before
        assert SPACE.key(p.params) not in told
        told.add(SPACE.key(p.params))
        s2.tell(p, 3.0)
    assert len(told) == len(SPACE)
    assert s2.recover() == 0


def test_requeued_last_configuration_is_still_asked(tmp_path: Path) -> None:
    """A crash with the space's last configuration in flight: the resume must evaluate it, not stop."""
    url = f"sqlite:///{tmp_path / 'wf.db'}"
    s = Strategy(SPACE, make_study("last", url, seed=6), seed=6)
    for _ in range(len(SPACE) - 1):
        p = s.ask()
        assert p is not None
        s.tell(p, _objective(p.params))
    lost = s.ask()
    assert lost is not None
    del s

    s2 = Strategy(SPACE, make_study("last", url, seed=6), seed=6)
    assert s2.recover() == 1
    again = s2.ask()
    assert again is not None and again.params == lost.params
    s2.tell(again, 1.0)
    assert s2.ask() is None and s2.n_told == len(SPACE)


def test_make_study_rejects_unknown_sampler() -> None:
    with pytest.raises(ValueError, match="unknown sampler 'nope'; choose from"):
        make_study("x", None, "nope")


def test_strategy_rejects_empty_space() -> None:
    with pytest.raises(ValueError, match="no feasible"):
        Strategy(SearchSpace({"a": [1]}, []), make_study("e", None))


def test_outstanding_asks_are_distinct_and_count_toward_exhaustion() -> None:
    s = Strategy(SPACE, make_study("inflight", None, seed=5), seed=5)
    asked = [s.ask() for _ in range(len(SPACE))]  # nothing told yet (several workers in flight)
    assert all(p is not None for p in asked)
    assert len({SPACE.key(p.params) for p in asked if p}) == len(SPACE)
    assert s.ask() is None


def test_tpe_arm_falls_back_to_public_optuna_if_internals_change(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from warpforge.search.samplers import registry as samplers

    def broken(*args: object, **kwargs: object) -> None:
        raise AttributeError("_parzen_estimator_cls")

    monkeypatch.setattr(samplers.TPEArm, "acquisition", broken)
    s = Strategy(SPACE, make_study("fallback", None, "wf-tpe-local", seed=2), "wf-tpe-local", seed=2)
    seen = set()
    while (p := s.ask()) is not None:
        assert SPACE.key(p.params) in SPACE and SPACE.key(p.params) not in seen
        seen.add(SPACE.key(p.params))
        s.tell(p, _objective(p.params))
    assert len(seen) == len(SPACE)
    assert s.sampler.policy.model.broken  # type: ignore[attr-defined]
    broke = [r for r in caplog.records if r.name == "warpforge.search.samplers.policy" and "broke" in r.getMessage()]
    assert len(broke) == 1 and broke[0].levelname == "WARNING"  # visible, once
