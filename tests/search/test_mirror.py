"""The in-memory study and its copy in Optuna's tables: what RDBStorage reads back equals what was asked and told."""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import TrialState

from warpforge.search.engine.mirror import StudyWriter, open_study
from warpforge.search.samplers.space import SearchSpace
from warpforge.search.samplers.strategy import Strategy

SPACE = SearchSpace.enumerate({"block": [32, 64, 128, 256], "warps": [2, 4, 8]})


def _fields(t: optuna.trial.FrozenTrial) -> tuple:
    return (t.number, t.state, t.params, t.values, t.user_attrs, t.system_attrs)


def test_copy_reads_back_through_rdbstorage_and_resumes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'wf.db'}"
    writer = StudyWriter(optuna.storages.RDBStorage(url), interval_s=3600)  # copies only when flushed here
    study = open_study("c:t:v", writer, "random", seed=1)
    s = Strategy(SPACE, study, "random", seed=1)
    told = []
    for i in range(5):
        p = s.ask()
        assert p is not None
        told.append(p)
        if i == 0:
            writer.flush()  # the first trial reaches the database RUNNING, then is updated below
        if i == 1:
            s.tell(p, None, failed=True, attrs={"verdict": "crashed", "reason": "x"})
        elif i == 2:
            s.tell(p, None, attrs={"verdict": "ok"})
        elif i < 4:
            s.tell(p, 1.0 + i, attrs={"verdict": "ok", "reason": ""})
    writer.close()  # the fifth stays RUNNING: a crash with it in flight
    stored = optuna.load_study(study_name="c:t:v", storage=url).get_trials(deepcopy=False)
    assert [_fields(t) for t in stored] == [_fields(t) for t in study.get_trials(deepcopy=False)]
    assert [t.state for t in stored] == [
        TrialState.COMPLETE,
        TrialState.FAIL,
        TrialState.PRUNED,
        TrialState.COMPLETE,
        TrialState.RUNNING,
    ]
    assert stored[0].user_attrs["verdict"] == "ok" and stored[3].value == 4.0

    writer2 = StudyWriter(optuna.storages.RDBStorage(url), interval_s=3600)
    s2 = Strategy(SPACE, open_study("c:t:v", writer2, "random", seed=1), "random", seed=1)
    assert s2.n_told == 4 and s2.best is not None and s2.best[1] == 1.0
    assert s2.recover() == 1
    again = s2.ask()
    assert again is not None and again.params == told[4].params  # the one in flight is proposed again first
    assert s2.adopt(told[0].params, 0.5) is False  # a told configuration is never adopted again
    writer2.close()


def test_adopt_tells_a_stored_result_once(tmp_path: Path) -> None:
    writer = StudyWriter(optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'wf.db'}"), interval_s=3600)
    s = Strategy(SPACE, open_study("a", writer, "random", seed=0), "random", seed=0)
    params = SPACE.as_dict(SPACE.feasible[5])
    assert s.adopt(params, 0.7, attrs={"verdict": "ok"})
    assert not s.adopt(params, 0.7)  # never twice
    assert s.n_told == 1 and s.best == (params, 0.7)
    asked = set()
    while (p := s.ask()) is not None:
        asked.add(SPACE.key(p.params))
        s.tell(p, 1.0)
    assert SPACE.key(params) not in asked and len(asked) == len(SPACE) - 1
    writer.close()
