"""The single writer's result store: one long-lived connection, completed evaluations written in batches.

The campaign (the only writer, docs/design.md §3.5) queues each completed evaluation with :meth:`ResultWriter.add`,
which runs no SQL, and makes everything queued durable with :meth:`ResultWriter.flush`: ONE transaction
on a connection held for the writer's life, through Core inserts. The rows are exactly those
:func:`warpforge.db.store.save_evaluation` writes (both build them with ``store.evaluation_values``).

Why (measured on the 2-core development machine, benchmarks/results/store_path.txt): storing one result
through a fresh ORM session cost 2.8 ms wall and 2.0 ms CPU even alone (cProfile: a pool checkout with its
pre-ping, three primary-key look-ups for campaign, variant and hardware, the task look-up, the unit of work,
then the commit); through this writer it costs 0.7 / 0.3 ms at one result per transaction and 0.1 / 0.1 ms
in batches of 16. The campaign, variant and task are ids the writer already knows, a task or GPU
fingerprint is looked up once per writer, and a batch is two executemany inserts and one commit.

Durability contract: a queued evaluation is durable when ``flush`` returns and not before; a kill -9 in
between loses it. The caller must therefore treat nothing as done (tell its trial, report it, count it)
before ``flush`` has returned; the campaign flushes each batch of completions before it tells any of them
(search/engine/taskrun.py, ``TaskRun._complete``).

Example::

    >>> writer = ResultWriter(db, campaign_id=1)                                        # doctest: +SKIP
    >>> writer.add(result, task=task, variant_id=3, variant_hash=h, study_name="c:t:v:h", trial_number=0)
    >>> writer.flush()          # one transaction; how many became durable             # doctest: +SKIP
    1
    >>> writer.close()          # flushes what is left, gives the connection back     # doctest: +SKIP
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection, Table, insert, select
from sqlalchemy.exc import DatabaseError as SQLDatabaseError
from sqlalchemy.exc import IntegrityError

from warpforge.db import store
from warpforge.db.models import Evaluation, Hardware, Measurement, TaskRecord
from warpforge.db.session import Database
from warpforge.evaluator.result import EvalResult
from warpforge.kernels.taskdef import Task

log = logging.getLogger("warpforge.db")

_EVALUATIONS = cast(Table, Evaluation.__table__)
# Built once: SQLAlchemy then finds their compiled form in its cache without rebuilding the statement per batch.
# executemany with RETURNING (SQLAlchemy's insertmanyvalues): the new ids in the batch's order.
_INSERT_EVALUATIONS = insert(_EVALUATIONS).returning(_EVALUATIONS.c.id, sort_by_parameter_order=True)
_INSERT_MEASUREMENTS = insert(cast(Table, Measurement.__table__))


@dataclass(frozen=True)
class _Queued:
    evaluation: dict[str, Any]  # the wf_evaluations row
    measurements: list[dict[str, Any]]  # its wf_measurements rows, less evaluation_id
    task: tuple[str, str, str]  # name, source hash, description: the wf_tasks row it needs
    hardware: dict[str, Any] | None  # the wf_hardware row it needs


class ResultWriter:
    """Queue completed evaluations, write them in one transaction per :meth:`flush` on one held connection.

    Not thread-safe: the orchestrator's thread is its only user. ``flushes``, ``written`` and ``busy_s``
    count what it did (benchmarks/pipeline.py reports them).
    """

    def __init__(self, db: Database, campaign_id: int | None = None) -> None:
        self.db, self.campaign_id = db, campaign_id
        self._conn: Connection | None = None
        self._queue: list[_Queued] = []
        self._tasks: set[tuple[str, str]] = set()  # (name, hash) known to be stored
        self._hardware: set[str] = set()  # fingerprints known to be stored
        self.flushes = self.written = 0
        self.busy_s = 0.0

    @property
    def pending(self) -> int:
        """Evaluations queued and not yet durable."""
        return len(self._queue)

    def add(
        self,
        result: EvalResult,
        *,
        task: Task,
        variant_id: int,
        variant_hash: str,
        study_name: str | None = None,
        trial_number: int | None = None,
        final: bool = False,
    ) -> None:
        """Queue one completed evaluation (no SQL here; durable after the next :meth:`flush`)."""
        row = store.evaluation_values(
            result, task=task, variant_hash=variant_hash, study_name=study_name, trial_number=trial_number, final=final
        )
        row |= {"campaign_id": self.campaign_id, "variant_id": variant_id}
        self._queue.append(
            _Queued(
                row,
                store.measurement_values(result),
                (task.name, task.source_hash, task.description),
                store.hardware_values(result),
            )
        )

    def flush(self) -> int:
        """Write everything queued in ONE transaction; returns how many evaluations became durable.

        On failure nothing is half-written (the transaction rolls back), the queue is kept for a later
        flush, and the error is raised as a :class:`~warpforge.db.session.DatabaseError` that says what to do
        (an IntegrityError as it is, as ``Database.session`` does).
        """
        if not self._queue:
            return 0
        start = time.perf_counter()
        batch = list(self._queue)
        try:
            try:
                self._write(batch)
            except SQLDatabaseError as exc:
                if not (exc.connection_invalidated or _deadlock(exc)):
                    raise
                # The server went away (a PostgreSQL restart), or chose this batch as a deadlock's victim (two
                # campaigns storing the same configurations at once: the static summary's trigger upserts the
                # same wf_static_configs rows in each batch's order) and rolled it back: once more, on a new
                # connection.
                self._release()
                self._write(batch)
        except IntegrityError:
            self._release()
            raise
        except SQLDatabaseError as exc:
            self._release()
            raise self.db.explain(exc, "storing results") from exc
        finally:
            self.busy_s += time.perf_counter() - start
        del self._queue[: len(batch)]
        for q in batch:
            self._tasks.add(q.task[:2])
            if q.hardware is not None:
                self._hardware.add(q.hardware["fingerprint"])
        self.flushes += 1
        self.written += len(batch)
        return len(batch)

    def close(self, *, quiet: bool = False) -> None:
        """Flush what is queued, then give the connection back. ``quiet``: a failing flush is logged, not
        raised (the caller is already failing: its error is the one to show)."""
        try:
            self.flush()
        except Exception as exc:
            if not quiet:
                raise
            log.warning(
                "%d completed evaluation(s) could not be stored (%s): they will be evaluated again on --resume",
                len(self._queue),
                exc,
            )
        finally:
            self._release()

    # --- internals ----------------------------------------------------------------------------------
    def _write(self, batch: list[_Queued]) -> None:
        if self._conn is None:
            self._conn = self.db.engine.connect()
        conn = self._conn
        with conn.begin():
            self._ensure_known(conn, batch)
            ids = conn.execute(_INSERT_EVALUATIONS, [q.evaluation for q in batch]).scalars().all()
            rows = [m | {"evaluation_id": i} for q, i in zip(batch, ids) for m in q.measurements]
            if rows:
                conn.execute(_INSERT_MEASUREMENTS, rows)

    def _ensure_known(self, conn: Connection, batch: list[_Queued]) -> None:
        """The task and hardware rows the batch refers to, looked up once per writer (store.ensure_task's rule)."""
        tasks = {q.task[:2]: q.task[2] for q in batch if q.task[:2] not in self._tasks}
        for (name, source_hash), description in tasks.items():
            found = conn.scalar(
                select(TaskRecord.id).where(TaskRecord.name == name, TaskRecord.source_hash == source_hash)
            )
            if found is None:
                conn.execute(insert(TaskRecord).values(name=name, source_hash=source_hash, description=description))
        hardware = {
            q.hardware["fingerprint"]: q.hardware
            for q in batch
            if q.hardware is not None and q.hardware["fingerprint"] not in self._hardware
        }
        for fingerprint, values in hardware.items():
            if conn.scalar(select(Hardware.fingerprint).where(Hardware.fingerprint == fingerprint)) is None:
                conn.execute(insert(Hardware).values(**values))

    def _release(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - a dead connection: nothing left to give back
                pass
            self._conn = None


def _deadlock(exc: SQLDatabaseError) -> bool:
    """PostgreSQL aborted the transaction as a deadlock's victim (SQLSTATE 40P01; psycopg 3 or psycopg2)."""
    orig = exc.orig
    return (getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)) == "40P01"
