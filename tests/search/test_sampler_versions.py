"""Sampler names that move are versioned, and a study keeps the version it was created with.

``wf-default`` has meant four policies (docs/history/search.md); a study created today records
``wf-default@4``, and one created under an older version resumes under that version, with a note that a newer
one exists, instead of silently changing policy halfway through a search.
"""

from __future__ import annotations

import logging

import optuna
import pytest

from warpforge.errors import UsageError
from warpforge.search.samplers.registry import POLICY_VERSIONS, make_policy, newer_policy_note, resolve_sampler
from warpforge.search.samplers.space import SearchSpace
from warpforge.search.samplers.strategy import SAMPLER_ATTR, Strategy, make_study

optuna.logging.set_verbosity(optuna.logging.WARNING)
SPACE = SearchSpace.enumerate({k: [0, 1, 2, 3] for k in "abc"})


def _time(config: tuple[int, ...]) -> float:
    return 1.0 + sum((x - 2) ** 2 for x in config) + 0.01 * config[0]


def _configs(sampler: str, seed: int = 3, budget: int = 12) -> list[tuple[int, ...]]:
    s = Strategy(SPACE, make_study(f"v-{sampler}-{seed}", None, sampler, seed), sampler, seed)
    out = []
    for _ in range(budget):
        p = s.ask()
        assert p is not None
        out.append(SPACE.key(p.params))
        s.tell(p, _time(SPACE.key(p.params)))
    return out


def test_names_resolve_to_their_current_version() -> None:
    assert len(POLICY_VERSIONS["wf-default"]) == 4  # tpe-local, gp-tpe, portfolio, consensus escape
    assert resolve_sampler("wf-default") == "wf-default@4"
    assert resolve_sampler("wf-default@2") == "wf-default@2"
    assert resolve_sampler("tpe") == "tpe"
    for bad in ("wf-default@9", "wf-default@0", "tpe@1", "nope"):
        with pytest.raises(UsageError):
            resolve_sampler(bad)


def test_a_version_is_the_policy_it_names() -> None:
    # Same seed, same trials: wf-default@3 is the former default (wf-portfolio), @4 today's.
    assert _configs("wf-default@3") == _configs("wf-portfolio")
    assert _configs("wf-default@4") == _configs("wf-default")
    assert _configs("wf-default@1") == _configs("wf-tpe-local")
    assert type(make_policy("wf-default@2")) is type(make_policy("wf-gp-tpe"))


def test_a_new_study_records_the_versioned_name() -> None:
    assert make_study("new", None, "wf-default").user_attrs[SAMPLER_ATTR] == "wf-default@4"


def test_a_resumed_study_keeps_its_version_and_says_a_newer_one_exists(caplog: pytest.LogCaptureFixture) -> None:
    storage = optuna.storages.InMemoryStorage()
    make_study("old", storage, "wf-default@3")  # created when wf-default meant wf-portfolio
    with caplog.at_level(logging.WARNING, logger="warpforge.search"):
        s = Strategy(SPACE, make_study("old", storage, "wf-default"), "wf-default")
    assert s.sampler_name == "wf-default@3"
    assert any("wf-default@3" in r.getMessage() and "wf-default@4" in r.getMessage() for r in caplog.records)
    assert newer_policy_note("wf-default@4") is None and newer_policy_note("tpe") is None
