"""Optuna studies held in memory, copied to the campaign's database by a background writer.

Why: with Optuna's RDBStorage in the loop, each evaluation cost the orchestrator 29-53 ms (about 54 SQL
statements and 17 commits: every ``suggest_int``, user attr and state change is its own transaction, and
``ask`` re-reads the study's unfinished trials). Here the study the sampler drives is an
``InMemoryStorage``; a :class:`StudyWriter` thread copies the changed trials to the RDB study a moment
later, in one transaction per study and copy (:func:`copy_trials`), while the orchestrator waits for
the pool, so optuna-dashboard and a later resume see the same trials, numbered alike.

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

import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import optuna
from optuna.distributions import distribution_to_json
from optuna.storages import InMemoryStorage, RDBStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy import event
from sqlalchemy.engine import Engine

from warpforge.search.optuna_private import rdb_models, storage_trial_id, stored_trial, study_id, study_system_attrs
from warpforge.search.samplers.strategy import make_study

models = rdb_models()  # Optuna's own table definitions (private: search/optuna_private.py)

log = logging.getLogger("warpforge.search.engine.mirror")
_MISSING = object()


class MirroredStorage(InMemoryStorage):
    """An in-memory storage for one study whose trial writes are marked for the :class:`StudyWriter`."""

    def __init__(self, writer: StudyWriter, rdb_study_id: int) -> None:
        super().__init__()
        self.writer, self.rdb_study_id = writer, rdb_study_id
        self._dirty: set[int] = set()
        self._rdb_ids: dict[int, int] = {}  # in-memory trial id -> database trial id
        self._written: dict[int, FrozenTrial] = {}  # what the database holds, per in-memory trial id

    # --- loading (not mirrored: it comes from the database) -------------------------------------------
    def load(
        self, study_id: int, trials: list[FrozenTrial], user_attrs: dict[str, Any], system_attrs: dict[str, Any]
    ) -> None:
        for key, value in user_attrs.items():
            super().set_study_user_attr(study_id, key, value)
        for key, value in system_attrs.items():
            super().set_study_system_attr(study_id, key, value)
        for t in trials:
            trial_id = super().create_new_trial(study_id, template_trial=t)
            self._rdb_ids[trial_id], self._written[trial_id] = storage_trial_id(t), stored_trial(self, trial_id)

    # --- writes: applied here, marked for the database -----------------------------------------------------
    def _mark(self, trial_id: int) -> None:
        self._dirty.add(trial_id)

    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        with self._lock:
            trial_id = super().create_new_trial(study_id, template_trial)
            self._mark(trial_id)
        return trial_id

    def set_trial_param(
        self,
        trial_id: int,
        param_name: str,
        param_value_internal: float,
        distribution: optuna.distributions.BaseDistribution,
    ) -> None:
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
    def take(self) -> list[tuple[FrozenTrial, FrozenTrial | None, int | None]]:
        """The changed trials, in number order, each with what the database holds and its database id."""
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            trials = sorted((stored_trial(self, i) for i in dirty), key=lambda t: t.number)
        return [(t, self._written.get(storage_trial_id(t)), self._rdb_ids.get(storage_trial_id(t))) for t in trials]

    def done(self, copied: list[tuple[FrozenTrial, int]]) -> None:
        for t, rdb_id in copied:
            self._rdb_ids[storage_trial_id(t)], self._written[storage_trial_id(t)] = rdb_id, t

    def retry(self, trials: list[FrozenTrial]) -> None:
        with self._lock:
            self._dirty.update(storage_trial_id(t) for t in trials)


def _json(value: Any) -> str:
    return json.dumps(value)


def copy_trials(
    engine: Engine, study_id: int, changes: list[tuple[FrozenTrial, FrozenTrial | None, int | None]]
) -> list[tuple[FrozenTrial, int]]:
    """Write changed trials to Optuna's tables in ONE transaction; returns (trial, database id) pairs.

    Through RDBStorage's methods each param, attr and state change is its own transaction (~5 per
    evaluation). This writes rows through Optuna's own table definitions (``optuna.storages._rdb.models``,
    Optuna 5.x; tests/search/test_mirror.py reads them back through RDBStorage, which would catch a
    schema change), the same rows RDBStorage writes.
    """
    trials_t = models.TrialModel.__table__
    params: list[dict[str, Any]] = []
    values: list[dict[str, Any]] = []
    user: list[dict[str, Any]] = []
    system: list[dict[str, Any]] = []
    out: list[tuple[FrozenTrial, int]] = []
    with engine.begin() as conn:
        for t, old, rdb_id in changes:
            if old is not None and old.state.is_finished():
                continue  # a finished trial never changes (Optuna refuses updates)
            if old is None or rdb_id is None:
                key = conn.execute(
                    trials_t.insert().values(
                        number=t.number,
                        study_id=study_id,
                        state=t.state,
                        datetime_start=t.datetime_start,
                        datetime_complete=t.datetime_complete,
                    )
                ).inserted_primary_key
                assert key is not None
                rdb_id = int(key[0])
                old_params: dict[str, Any] = {}
                old_user: dict[str, Any] = {}
                old_system: dict[str, Any] = {}
            else:
                old_params, old_user, old_system = old.params, old.user_attrs, old.system_attrs
                if t.state != old.state:
                    conn.execute(
                        trials_t.update()
                        .where(trials_t.c.trial_id == rdb_id)
                        .values(state=t.state, datetime_start=t.datetime_start, datetime_complete=t.datetime_complete)
                    )
            for name, value in t.params.items():
                if name not in old_params:
                    dist = t.distributions[name]
                    params.append(
                        {
                            "trial_id": rdb_id,
                            "param_name": name,
                            "param_value": dist.to_internal_repr(value),
                            "distribution_json": distribution_to_json(dist),
                        }
                    )
            for table, rows, new, before in (
                (models.TrialUserAttributeModel.__table__, user, t.user_attrs, old_user),
                (models.TrialSystemAttributeModel.__table__, system, t.system_attrs, old_system),
            ):
                changed = [k for k, v in new.items() if before.get(k, _MISSING) != v]
                stale = [k for k in changed if k in before]
                if stale:
                    conn.execute(table.delete().where(table.c.trial_id == rdb_id, table.c.key.in_(stale)))
                rows += [{"trial_id": rdb_id, "key": k, "value_json": _json(new[k])} for k in changed]
            if t.state.is_finished() and t.values is not None:
                for objective, v in enumerate(t.values):
                    stored, kind = models.TrialValueModel.value_to_stored_repr(v)
                    values.append({"trial_id": rdb_id, "objective": objective, "value": stored, "value_type": kind})
            out.append((t, rdb_id))
        for table, rows in (
            (models.TrialParamModel.__table__, params),
            (models.TrialValueModel.__table__, values),
            (models.TrialUserAttributeModel.__table__, user),
            (models.TrialSystemAttributeModel.__table__, system),
        ):
            if rows:
                conn.execute(table.insert(), rows)
    return out


class StudyWriter:
    """One background thread copying the mirrored studies of a campaign to its database.

    It copies only while the orchestrator waits for the pool (:meth:`waiting`): then the copy neither
    competes for the interpreter lock nor holds SQLite's write lock when a result is stored (run
    alongside, every store waited on it: 65 ms instead of 3). A trial in flight is in the database as
    RUNNING after the orchestrator's next wait, when at most ``interval_s`` has passed since it was asked.
    """

    def __init__(self, rdb: RDBStorage, interval_s: float = 0.02) -> None:
        self.rdb, self.engine, self.interval_s = rdb, rdb.engine, interval_s
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
        """Copy every changed trial, one transaction per study (stops between studies when ``go_on`` clears)."""
        with self._lock:
            start = time.perf_counter()
            try:
                for storage in self._stores:
                    if go_on is not None and not go_on.is_set():
                        break
                    changes = storage.take()
                    if not changes:
                        continue
                    try:
                        copied = copy_trials(self.engine, storage.rdb_study_id, changes)
                    except Exception:
                        storage.retry([t for t, _, _ in changes])
                        raise
                    storage.done(copied)
                    self.copied += len(copied)
            finally:
                self.busy_s += time.perf_counter() - start

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self._quiet.wait(0.5):
                continue
            try:
                self.flush(self._quiet)
            except Exception as exc:  # noqa: BLE001 - retried; the campaign's results are already stored
                if self.error is None:
                    log.warning(
                        "copying Optuna trials to the database failed (%s: %s); retrying. Results are "
                        "stored; only optuna-dashboard's view lags",
                        type(exc).__name__,
                        exc,
                    )
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
    storage = MirroredStorage(writer, study_id(stored))
    study = optuna.create_study(
        study_name=name,
        storage=storage,
        direction=StudyDirection.MINIMIZE,
        sampler=optuna.samplers.RandomSampler(seed=seed),
    )
    storage.load(study_id(study), stored.get_trials(deepcopy=False), stored.user_attrs, study_system_attrs(stored))
    writer.add(storage)
    return study


def optuna_storage(url: str) -> RDBStorage:
    """Optuna's RDBStorage on the campaign's database (SQLite: without an fsync per commit, see below)."""
    storage = RDBStorage(url)
    if storage.engine.dialect.name == "sqlite":
        # Optuna commits ~15 times per evaluation; with WAL, synchronous=NORMAL skips the fsync of each (1.3 ms
        # here) and committed trials still survive a kill -9 (an OS crash may lose the last few, never corrupt).
        event.listen(storage.engine, "connect", _sqlite_no_fsync)
        storage.engine.dispose()
    return storage


def _sqlite_no_fsync(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
