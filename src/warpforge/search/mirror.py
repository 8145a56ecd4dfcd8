"""Optuna studies held in memory, copied to the campaign's database by a background writer.

Why: with Optuna's RDBStorage in the loop, each evaluation cost the orchestrator 29-53 ms (about 54 SQL
statements and 17 commits: every ``suggest_int``, user attr and state change is its own transaction, and
``ask`` re-reads the study's unfinished trials). Here the study the sampler drives is an
``InMemoryStorage``; a :class:`StudyWriter` thread copies each changed trial to the RDB study a moment
later (one ``create_new_trial`` transaction for a trial that is already finished when it is first
copied; new params/attrs and the state otherwise), so optuna-dashboard and a later resume see the same
trials, numbered alike.

The kill -9 guarantee does not rest on this copy: warpforge's own result row is written (synchronously,
in its own transaction) before a trial is told, and a resume adopts every stored result that the copy
had not reached yet (``Strategy.adopt``), so nothing completed is lost and nothing is evaluated twice.
Trials that were in flight reach the database as RUNNING within ``interval_s`` and are re-proposed.

Example::

    >>> writer = StudyWriter(optuna.storages.RDBStorage("sqlite:///wf.db"))     # doctest: +SKIP
    >>> study = open_study("c:t:v", writer, "random", seed=0)                   # doctest: +SKIP
    >>> ...; writer.close()   # flushes every trial, then stops the thread      # doctest: +SKIP
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import optuna
from optuna.storages import BaseStorage, InMemoryStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from warpforge.search.strategy import make_study

log = logging.getLogger("warpforge.search.mirror")
_MISSING = object()


class MirroredStorage(InMemoryStorage):
    """An in-memory storage for one study whose trial writes are marked for the :class:`StudyWriter`."""

    def __init__(self, writer: StudyWriter, rdb_study_id: int) -> None:
        super().__init__()
        self.writer, self.rdb_study_id = writer, rdb_study_id
        self._dirty: set[int] = set()
        self._rdb_ids: dict[int, int] = {}  # in-memory trial id -> database trial id
        self._written: dict[int, FrozenTrial] = {}  # what the database holds, per in-memory trial id
        self._warned = False

    # --- loading (not mirrored: it comes from the database) -------------------------------------------
    def load(self, study_id: int, trials: list[FrozenTrial], user_attrs: dict[str, Any],
             system_attrs: dict[str, Any]) -> None:
        for key, value in user_attrs.items():
            super().set_study_user_attr(study_id, key, value)
        for key, value in system_attrs.items():
            super().set_study_system_attr(study_id, key, value)
        for t in trials:
            trial_id = super().create_new_trial(study_id, template_trial=t)
            self._rdb_ids[trial_id], self._written[trial_id] = t._trial_id, self._get_trial(trial_id)

    # --- writes: applied here, marked for the database -----------------------------------------------------
    def _mark(self, trial_id: int) -> None:
        self._dirty.add(trial_id)

    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        with self._lock:
            trial_id = super().create_new_trial(study_id, template_trial)
            self._mark(trial_id)
        return trial_id

    def set_trial_param(self, trial_id: int, param_name: str, param_value_internal: float,
                        distribution: optuna.distributions.BaseDistribution) -> None:
        with self._lock:
            super().set_trial_param(trial_id, param_name, param_value_internal, distribution)
            self._mark(trial_id)

    def set_trial_state_values(self, trial_id: int, state: TrialState, values: Any = None) -> bool:
        with self._lock:
            changed = super().set_trial_state_values(trial_id, state, values)
            self._mark(trial_id)
        return changed

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        with self._lock:
            super().set_trial_user_attr(trial_id, key, value)
            self._mark(trial_id)

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        with self._lock:
            super().set_trial_system_attr(trial_id, key, value)
            self._mark(trial_id)

    def set_study_user_attr(self, study_id: int, key: str, value: Any) -> None:
        super().set_study_user_attr(study_id, key, value)
        self.writer.rdb.set_study_user_attr(self.rdb_study_id, key, value)  # rare: once per study

    # --- the copy ----------------------------------------------------------------------------------------
    def flush(self, rdb: BaseStorage, go_on: threading.Event | None = None) -> int:
        """Copy changed trials to the database, in trial-number order, while ``go_on`` is set (all when None);
        returns how many were copied."""
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            trials = sorted((self._get_trial(i) for i in dirty), key=lambda t: t.number)
        done = 0
        try:
            for t in trials:
                if go_on is not None and not go_on.is_set():
                    break
                self._copy(rdb, t)
                done += 1
        finally:
            if done < len(trials):
                with self._lock:
                    self._dirty.update(t._trial_id for t in trials[done:])  # copied at the next flush
        return done

    def _copy(self, rdb: BaseStorage, t: FrozenTrial) -> None:
        old = self._written.get(t._trial_id)
        if old is None:
            rdb_id = rdb.create_new_trial(self.rdb_study_id, template_trial=t)
            self._rdb_ids[t._trial_id] = rdb_id
            number = rdb.get_trial_number_from_id(rdb_id)
            if number != t.number and not self._warned:
                self._warned = True
                log.warning("study copy: trial %d is number %d in the database (another process writes to this "
                            "study?); optuna-dashboard will number trials differently", t.number, number)
        else:
            rdb_id = self._rdb_ids[t._trial_id]
            if old.state.is_finished():
                return  # a finished trial never changes (Optuna refuses updates)
            for name, value in t.params.items():
                if name not in old.params:
                    dist = t.distributions[name]
                    rdb.set_trial_param(rdb_id, name, dist.to_internal_repr(value), dist)
            for key, value in t.user_attrs.items():
                if old.user_attrs.get(key, _MISSING) != value:
                    rdb.set_trial_user_attr(rdb_id, key, value)
            for key, value in t.system_attrs.items():
                if old.system_attrs.get(key, _MISSING) != value:
                    rdb.set_trial_system_attr(rdb_id, key, value)
            if t.state != old.state:
                rdb.set_trial_state_values(rdb_id, t.state, t.values)
        self._written[t._trial_id] = t


class StudyWriter:
    """One background thread copying the mirrored studies of a campaign to its database.

    It copies only while the orchestrator waits for the pool (:meth:`waiting`): then the copy neither
    competes for the interpreter lock nor holds SQLite's write lock when a result is stored (run
    alongside, every store waited on it: 65 ms instead of 3). A trial in flight is in the database as
    RUNNING after the orchestrator's next wait, when at most ``interval_s`` has passed since it was asked.
    """

    def __init__(self, rdb: BaseStorage, interval_s: float = 0.02) -> None:
        self.rdb, self.interval_s = rdb, interval_s
        self._stores: list[MirroredStorage] = []
        self._lock = threading.Lock()  # one flush at a time (thread and close)
        self._stop = threading.Event()
        self._quiet = threading.Event()  # set while the orchestrator waits on the pool
        self.copied = 0
        self.busy_s = 0.0  # time spent copying (reported by benchmarks/pipeline.py)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="wf-study-writer", daemon=True)
        self._thread.start()

    def add(self, storage: MirroredStorage) -> None:
        with self._lock:
            self._stores.append(storage)

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Wrap the orchestrator's blocking wait: the copy runs meanwhile."""
        self._quiet.set()
        try:
            yield
        finally:
            self._quiet.clear()

    def flush(self, go_on: threading.Event | None = None) -> None:
        with self._lock:
            start = time.perf_counter()
            for storage in self._stores:
                self.copied += storage.flush(self.rdb, go_on)
            self.busy_s += time.perf_counter() - start

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self._quiet.wait(0.5):
                continue
            try:
                self.flush(self._quiet)
            except Exception as exc:  # noqa: BLE001 - retried; the campaign's results are already stored
                if self.error is None:
                    log.warning("copying Optuna trials to the database failed (%s: %s); retrying. Results are "
                                "stored; only optuna-dashboard's view lags", type(exc).__name__, exc)
                self.error = exc
            self._stop.wait(self.interval_s)

    def close(self) -> None:
        """Stop the thread and copy what is left (every told trial is in the database after this)."""
        self._stop.set()
        self._quiet.set()
        self._thread.join(timeout=30)
        self.flush()


def open_study(name: str, writer: StudyWriter, sampler: str, seed: int | None) -> optuna.Study:
    """Create or load the study ``name`` in the writer's database and return its in-memory mirror."""
    stored = make_study(name, writer.rdb, sampler, seed)
    storage = MirroredStorage(writer, stored._study_id)
    study = optuna.create_study(study_name=name, storage=storage, direction=StudyDirection.MINIMIZE,
                                sampler=optuna.samplers.RandomSampler(seed=seed))
    storage.load(study._study_id, stored.get_trials(deepcopy=False), stored.user_attrs,
                 stored._storage.get_study_system_attrs(stored._study_id))
    writer.add(storage)
    return study
