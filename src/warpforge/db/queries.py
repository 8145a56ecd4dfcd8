"""The read layer: every reader of stored results (CLI, dashboard, export, the agent) goes through here.

Contract (docs/seams.md "Read layer", docs/design.md §3.5):
- everything returned is a frozen dataclass (plain ``dict``/``tuple`` inside), never an ORM row;
- lists are pages (``Page``: items, total, offset, limit; ``limit`` at most ``MAX_LIMIT``);
- the campaign's decision (accepted winner, speedup interval, re-benchmarked top-k) is read as stored in
  ``wf_decisions``; nothing here re-ranks raw ``objective_ms`` rows;
- importing this module imports neither torch, Triton nor Ray (a dashboard process does not need them):
  it touches only ``db/models.py`` and ``db/session.py`` (SQLAlchemy);
- it never writes: a database below the current schema is an error that says to run ``warpforge db upgrade``.

Example::

    >>> from warpforge.db.queries import Reader
    >>> reader = Reader("sqlite:///wf.db")                                   # doctest: +SKIP
    >>> page = reader.evaluations(task="softmax", verdict="ok", sort="objective_ms", limit=10)  # doctest: +SKIP
    >>> page.total, page.items[0].params                                     # doctest: +SKIP
    (412, {'BLOCK': 1024, 'num_warps': 4})
    >>> [w.decision.speedup for w in reader.winners(task="softmax", gpu="H100")]  # doctest: +SKIP
    [1.42]
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import PurePath
from typing import Any

from sqlalchemy import Select, func, select, true, tuple_, union
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.orm import Session

from warpforge.db import agent_reads, optimize_reads
from warpforge.db.counts import CountCache
from warpforge.db.models import (
    Campaign,
    Evaluation,
    Measurement,
    Plan,
    StaticConfig,
    StaticCount,
    TaskRecord,
    VariantRecord,
)
from warpforge.db.models import Decision as DecisionRecord
from warpforge.db.paging import SORTS, page_ids, parse_sort
from warpforge.db.rows import (
    AgentPlanRow,
    AgentRunRow,
    CampaignRow,
    Decision,
    EvaluationDetail,
    EvaluationRow,
    LLMCallRow,
    LLMTranscript,
    LLMUsage,
    OptimizeRunDetail,
    OptimizeRunRow,
    Page,
    PlanRow,
    ShapeRow,
    TopKEntry,
    VariantRow,
    Winner,
    utc,
)
from warpforge.db.session import MIGRATIONS_DIR, Database, DatabaseError

__all__ = [
    "MAX_LIMIT",
    "SORTS",
    "Reader",
    "AgentPlanRow",
    "AgentRunRow",
    "CampaignRow",
    "Decision",
    "EvaluationDetail",
    "EvaluationRow",
    "LLMCallRow",
    "LLMTranscript",
    "LLMUsage",
    "OptimizeRunDetail",
    "OptimizeRunRow",
    "Page",
    "PlanRow",
    "ShapeRow",
    "TopKEntry",
    "VariantRow",
    "Winner",
]

MAX_LIMIT = 1000  # rows in one page: bounds what one call can cost, whatever a client asks for


def _shape_row(m: Mapping[str, Any]) -> ShapeRow:
    shape = dict(m.get("shape") or {})
    key = m.get("shape_key") or ",".join(f"{k}={v}" for k, v in sorted(shape.items()))
    return ShapeRow(
        shape,
        key,
        str(m.get("dtype", "")),
        m.get("p20_ms"),
        m.get("p50_ms"),
        m.get("p80_ms"),
        m.get("ref_p50_ms"),
        m.get("speedup"),
        m.get("roofline_pct"),
    )


def _decision(d: DecisionRecord, campaign: str) -> Decision:
    top_k = tuple(
        TopKEntry(
            str(e.get("variant", "")),
            dict(e.get("params") or {}),
            str(e.get("verdict", "")),
            e.get("ms"),
            e.get("speedup"),
            e.get("speedup_low"),
            e.get("speedup_high"),
            str(e.get("interval", "")),
            bool(e.get("remeasured")),
            bool(e.get("chosen")),
        )
        for e in d.top_k or []
    )
    return Decision(
        campaign,
        d.task,
        d.backend,
        d.timing_source,
        d.timing_gpu,
        d.fingerprint,
        d.variant_hash,
        d.variant_name,
        dict(d.params) if d.params is not None else None,
        d.objective_ms,
        d.speedup,
        d.speedup_low,
        d.speedup_high,
        bool(d.accepted),
        d.note,
        top_k,
        tuple(_shape_row(s) for s in d.shapes or []),
        utc(d.created_at),
        d.interval,
        d.evaluation_id,
        d.evaluations,
        d.measured,
    )


def _variant(v: VariantRecord) -> VariantRow:
    return VariantRow(
        v.source_hash,
        v.task,
        v.name,
        v.origin,
        v.proposer,
        tuple(v.parents or ()),
        v.proposal_id,
        v.rationale,
        v.source,
        dict(v.space or {}),
        utc(v.created_at),
    )


_EVAL_COLUMNS = (
    Evaluation.id,
    Campaign.name,
    Evaluation.task,
    Evaluation.variant_hash,
    VariantRecord.name,
    Evaluation.params,
    Evaluation.backend,
    Evaluation.verdict,
    Evaluation.reason,
    Evaluation.message,
    Evaluation.device,
    Evaluation.fingerprint,
    Evaluation.timing_source,
    Evaluation.timing_gpu,
    Evaluation.objective_ms,
    Evaluation.speedup,
    Evaluation.compile_s,
    Evaluation.wall_s,
    Evaluation.final,
    Evaluation.trial_number,
    Evaluation.created_at,
)


def _evaluation_row(r: Sequence[Any]) -> EvaluationRow:
    values = list(r)
    values[5] = dict(values[5] or {})
    values[18] = bool(values[18])
    values[20] = utc(values[20])
    return EvaluationRow(*values)


class Reader:
    """Read-only access to one results database (``url``: ``--db``, else ``WARPFORGE_DB``, else the default file).

    A ``Reader`` holds an engine; share one per process (it is safe across threads: each call opens its own
    short session). Pass ``database=`` to reuse an open :class:`Database` (the campaign does).
    """

    def __init__(self, url: str | None = None, *, database: Database | None = None) -> None:
        self.db = database if database is not None else Database(url, create=False)
        self._checked = False
        self._counts = CountCache()  # settled counts: the overview and unfiltered totals do not recount 100,000 rows

    def _check_schema(self) -> None:
        """Once per reader: the database exists and is at the schema this code reads (never migrated here)."""
        self.db.check()
        from alembic.script import ScriptDirectory

        heads = set(ScriptDirectory(str(MIGRATIONS_DIR)).get_heads())
        current = self.db.current_revision()
        if current not in heads:
            raise DatabaseError(
                f"{self.db.safe_url} is at schema revision {current or 'none'}, this warpforge reads "
                f"{', '.join(sorted(heads))}: run `warpforge db upgrade --db URL`"
            )
        self._checked = True

    @contextmanager
    def _session(self) -> Iterator[Session]:
        if not self._checked:
            self._check_schema()
        session = Session(self.db.engine)
        try:
            yield session
        except (OperationalError, ProgrammingError) as exc:
            msg = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else str(exc)
            raise DatabaseError(
                f"cannot read {self.db.safe_url}: {msg}; if the schema is older than this "
                f"warpforge, run `warpforge db upgrade --db URL`"
            ) from exc
        finally:
            session.rollback()  # never writes: end the read transaction whatever happened
            session.close()

    # --- campaigns ---------------------------------------------------------------------------------
    def campaigns(self, *, status: str | None = None, offset: int = 0, limit: int = 50) -> Page[CampaignRow]:
        """Campaigns, newest first, each with its counts and stored decisions."""
        offset, limit = _page(offset, limit)
        where = [] if status is None else [Campaign.status == status]
        with self._session() as s:
            total = int(s.scalar(select(func.count(Campaign.id)).where(*where)) or 0)
            rows = list(
                s.scalars(select(Campaign).where(*where).order_by(Campaign.id.desc()).offset(offset).limit(limit))
            )
            items = self._campaign_rows(s, rows)
        return Page(tuple(items), total, offset, limit)

    def campaign(self, name: str) -> CampaignRow | None:
        with self._session() as s:
            row = s.scalar(select(Campaign).where(Campaign.name == name))
            return None if row is None else self._campaign_rows(s, [row])[0]

    def _campaign_rows(self, s: Session, rows: list[Campaign]) -> list[CampaignRow]:
        ids = [c.id for c in rows]
        # Rows counted before are not read again (db/counts.py): 32 ms per overview at 100,000 on PostgreSQL.
        verdicts = self._counts.verdicts(s, ids) if ids else {}
        decisions: dict[int, list[Decision]] = {i: [] for i in ids}
        names = {c.id: c.name for c in rows}
        if ids:
            for d in s.scalars(
                select(DecisionRecord).where(DecisionRecord.campaign_id.in_(ids)).order_by(DecisionRecord.id)
            ):
                decisions[d.campaign_id].append(_decision(d, names[d.campaign_id]))
        out = []
        for c in rows:
            spec = dict(c.spec or {})
            out.append(
                CampaignRow(
                    c.name,
                    c.status,
                    utc(c.created_at),
                    utc(c.updated_at),
                    tuple(spec.get("tasks") or ()),
                    str(spec.get("backend", "")),
                    str(spec.get("proposer", "")),
                    str(spec.get("sampler", "")),
                    sum(verdicts[c.id].values()),
                    verdicts[c.id],
                    tuple(decisions[c.id]),
                    spec,
                )
            )
        return out

    # --- evaluations -------------------------------------------------------------------------------
    def evaluations(
        self,
        *,
        campaign: str | None = None,
        task: str | None = None,
        verdict: str | None = None,
        variant_hash: str | None = None,
        final: bool | None = None,
        sort: str = "-id",
        offset: int = 0,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[EvaluationRow]:
        """A page of evaluations. ``sort``: one of ``SORTS`` (``-`` prefix: descending; unmeasured rows last
        whichever the direction); ``final``: only (True) or without (False) the final re-benchmark.
        ``cursor``: the previous page's ``next_cursor`` (same filters and sort; ``offset`` is then ignored):
        as fast on the last page as on the first, where a deep ``offset`` walks all the rows before it."""
        offset, limit = _page(offset, limit)
        parse_sort(sort)
        filters = _filters(campaign=campaign, task=task, verdict=verdict, variant_hash=variant_hash, final=final)
        # The page's ids first (index walks, no joins), then the joined columns of those rows only.
        with self._session() as s:
            if campaign is None and task is None and variant_hash is None:  # the whole table (or most of it)
                total = self._counts.total(s, ("evaluations", verdict, final), filters)
                walk = filters
            else:
                # The count's scan also gives the id bounds that keep the page walk in range: PostgreSQL (no
                # (campaign_id, id) index) walked the primary key through 90,000 rows for the oldest campaign's
                # page (52 ms, EXPLAIN ANALYZE; 0.04 ms bounded). "+ 0": min/max in that scan, no pkey walks.
                n, lo, hi = s.execute(
                    select(func.count(Evaluation.id), func.min(Evaluation.id + 0), func.max(Evaluation.id + 0)).where(
                        *filters
                    )
                ).one()
                total = int(n or 0)
                walk = filters + ([Evaluation.id.between(lo, hi)] if total else [])
            ids, next_cursor = (
                ([], None) if not total else page_ids(s, walk, sort, offset=offset, limit=limit, cursor=cursor)
            )
            rows = {r[0]: _evaluation_row(r) for r in s.execute(_joined().where(Evaluation.id.in_(ids)))} if ids else {}
        return Page(tuple(rows[i] for i in ids), total, 0 if cursor else offset, limit, next_cursor)

    def iter_evaluations(
        self, *, campaign: str | None = None, task: str | None = None, final: bool | None = None, batch: int = MAX_LIMIT
    ) -> Iterator[EvaluationRow]:
        """Every matching evaluation, newest first, fetched ``batch`` rows at a time by id (keyset: each
        batch costs the same however deep, unlike a growing offset)."""
        filters = _filters(campaign=campaign, task=task, final=final)
        below: int | None = None
        while True:
            stmt = _joined().where(*filters)
            if below is not None:
                stmt = stmt.where(Evaluation.id < below)
            with self._session() as s:
                rows = [_evaluation_row(r) for r in s.execute(stmt.order_by(Evaluation.id.desc()).limit(batch))]
            yield from rows
            if len(rows) < batch:
                return
            below = rows[-1].id

    def evaluation(self, id: int) -> EvaluationDetail | None:
        """One evaluation with its per-shape times, resources, versions and the full stored result."""
        with self._session() as s:
            r = s.execute(_joined().where(Evaluation.id == id)).first()
            if r is None:
                return None
            ev = s.get(Evaluation, id)
            assert ev is not None
            shapes = tuple(
                ShapeRow(
                    dict(m.shape or {}),
                    m.shape_key,
                    m.dtype,
                    m.p20_ms,
                    m.p50_ms,
                    m.p80_ms,
                    m.ref_p50_ms,
                    m.speedup,
                    m.roofline_pct,
                )
                for m in s.scalars(select(Measurement).where(Measurement.evaluation_id == id).order_by(Measurement.id))
            )
            result = dict(ev.result or {})
            resources = {
                str(k.get("kernel", i)): {n: v for n, v in k.items() if n != "kernel"}
                for i, k in enumerate(result.get("resources") or [])
            } or None
            versions = {"torch": ev.torch_version, "triton": ev.triton_version, "warpforge": ev.warpforge_version}
            return EvaluationDetail(_evaluation_row(r), shapes, resources, versions, result)

    # --- variants ----------------------------------------------------------------------------------
    def variant(self, source_hash: str) -> VariantRow | None:
        with self._session() as s:
            v = s.scalar(select(VariantRecord).where(VariantRecord.source_hash == source_hash))
            return None if v is None else _variant(v)

    def lineage(self, source_hash: str) -> tuple[VariantRow, ...]:
        """The variant and its ancestors, generation by generation (the variant first, its roots last);
        each ancestor once; a parent hash not stored ends that branch.

        Three queries whatever the depth (the task's hash -> parents map, walked here, then the rows): one
        query per generation cost a round trip each, ~10 ms apiece on the loaded PostgreSQL benchmark.
        """
        with self._session() as s:
            task = s.scalar(select(VariantRecord.task).where(VariantRecord.source_hash == source_hash))
            if task is None:
                return ()
            parents = {
                h: tuple(p or ())
                for h, p in s.execute(
                    select(VariantRecord.source_hash, VariantRecord.parents).where(VariantRecord.task == task)
                )
            }
            order: list[str] = []
            frontier = [source_hash]
            while frontier:
                nxt: list[str] = []
                for h in frontier:  # keep the parents' declared order within a generation
                    if h in parents and h not in order:
                        order.append(h)
                        nxt.extend(p for p in parents[h] if p not in order and p not in nxt)
                frontier = nxt
            rows = {
                v.source_hash: _variant(v)
                for v in s.scalars(select(VariantRecord).where(VariantRecord.source_hash.in_(order)))
            }
        return tuple(rows[h] for h in order)

    # --- decisions and winners ---------------------------------------------------------------------
    def decisions(
        self, *, campaign: str | None = None, task: str | None = None, gpu: str | None = None
    ) -> tuple[Decision, ...]:
        """Stored decisions, newest first. ``gpu``: a case-insensitive part of the GPU name ("H100")."""
        stmt = select(DecisionRecord, Campaign.name).join(Campaign, Campaign.id == DecisionRecord.campaign_id)
        if campaign is not None:
            stmt = stmt.where(Campaign.name == campaign)
        if task is not None:
            stmt = stmt.where(DecisionRecord.task == task)
        if gpu is not None:
            stmt = stmt.where(DecisionRecord.timing_gpu.ilike(f"%{gpu}%"))
        with self._session() as s:
            return tuple(_decision(d, name) for d, name in s.execute(stmt.order_by(DecisionRecord.id.desc())))

    def winners(
        self, *, task: str | None = None, gpu: str | None = None, shape: str | None = None
    ) -> tuple[Winner, ...]:
        """The accepted winner per task x GPU (x shape): among the accepted decisions for that task on that
        GPU, the one whose own stored winner is fastest (newest on a tie). ``shape`` ("M=4096,N=4096") keeps
        decisions whose winner was timed on that shape and compares that shape's p50. Times of different
        GPUs are never compared with each other. Ordered by task, then GPU."""
        best: dict[tuple[str, str], Winner] = {}
        for d in self.decisions(task=task, gpu=gpu):
            if not d.accepted:
                continue
            ms, speedup = d.objective_ms, d.speedup
            if shape is not None:
                row = next((r for r in d.shapes if r.shape_key == shape), None)
                if row is None:
                    continue
                ms, speedup = row.p50_ms, row.speedup
            if ms is None:
                continue
            key = (d.task, d.fingerprint or d.gpu or "")
            held = best.get(key)
            if held is None or (held.ms is not None and ms < held.ms):  # newest first: a tie keeps the newer
                best[key] = Winner(d.task, d.gpu, d.fingerprint, shape, d, ms, speedup)
        return tuple(sorted(best.values(), key=lambda w: (w.task, w.gpu or "")))

    # --- the agent's LLM calls (db/agent_reads.py) ----------------------------------------------------
    def llm_calls(
        self,
        *,
        campaign: str | None = None,
        task: str | None = None,
        model: str | None = None,
        outcome: str | None = None,
        variant_hash: str | None = None,
        offset: int = 0,
        limit: int = 50,
    ) -> Page[LLMCallRow]:
        """A page of stored LLM calls, newest first, without their text (``llm_call(id)`` has it)."""
        offset, limit = _page(offset, limit)
        with self._session() as s:
            return agent_reads.llm_calls(
                s,
                campaign=campaign,
                task=task,
                model=model,
                outcome=outcome,
                variant_hash=variant_hash,
                offset=offset,
                limit=limit,
            )

    def llm_call(self, id: int) -> LLMTranscript | None:
        """One LLM call with its messages, answer and reasoning (stored redacted: never a key)."""
        with self._session() as s:
            return agent_reads.llm_call(s, id)

    def llm_call_for_variant(self, source_hash: str) -> LLMTranscript | None:
        """The LLM call whose answer became this variant, or None (a template or user variant)."""
        with self._session() as s:
            return agent_reads.llm_call_for_variant(s, source_hash)

    def llm_usage(self, *, campaign: str | None = None, by: str = "campaign x model") -> tuple[LLMUsage, ...]:
        """Calls, tokens, cost and outcome mix per ``by``: "campaign x model" (default), "campaign", "model"
        or "all" (one row, zeros when no call is stored)."""
        with self._session() as s:
            rows = agent_reads.llm_usage(s, campaign=campaign)
        return rows if by == "campaign x model" else agent_reads.rollup(rows, by)

    def agent_runs(self, *, campaign: str | None = None, offset: int = 0, limit: int = 50) -> Page[AgentRunRow]:
        """The agent's totals per (campaign, task) and what stopped it, most recently updated first."""
        offset, limit = _page(offset, limit)
        with self._session() as s:
            return agent_reads.agent_runs(s, campaign=campaign, offset=offset, limit=limit)

    # --- stored results by id, and the tasks held (compile facts, unknown-task messages) ---------------
    @staticmethod
    def _static_where(task: str, campaign: str | None, variant_hash: str | None = None) -> list[Any]:
        """The summary rows (``wf_static_configs``) of the task's ranking in a scope: every campaign, or one."""
        c = StaticConfig
        return [
            c.task == task,
            c.scope == _scope(campaign),
            *([c.variant_hash == variant_hash] if variant_hash else []),
        ]

    @staticmethod
    def _static_parts(target: str | None) -> list[Any]:
        """A target's ranking as conditions each walked apart in key order: its own rows, then those stored
        without facts (they rank last in every target); None: every row."""
        c = StaticConfig
        return [c.target == target, c.target.is_(None)] if target is not None else [true()]

    # The static ranking's order (compile_facts.worst_key), as the summary stores it: fewest spills, highest
    # occupancy, fewest registers, least shared memory, an unknown after every known value; ties by the earlier
    # id. Comparable as one row value (``rank_of``); ix_wf_static_rank walks it in this order.
    _STATIC_KEY = (
        StaticConfig.key_spill,
        StaticConfig.key_occupancy,
        StaticConfig.key_registers,
        StaticConfig.key_shared,
        StaticConfig.evaluation_id,
    )

    def static_counts(self, task: str, campaign: str | None = None) -> dict[str | None, int]:
        """Target (None: stored without facts) -> how many configurations the static ranking holds for it."""
        c = StaticCount  # kept by the database with the rows it counts: read, not counted
        with self._session() as s:
            return {
                t or None: int(n)
                for t, n in s.execute(
                    select(c.target, c.configs).where(c.task == task, c.scope == _scope(campaign), c.configs > 0)
                )
            }

    def static_top(
        self,
        task: str,
        target: str | None,
        campaign: str | None = None,
        limit: int | None = 10,
        variant_hash: str | None = None,
    ) -> list[tuple[int, tuple[Any, ...]]]:
        """(evaluation id, sort key) of the first ``limit`` (None: all) rows of the task's static ranking for
        ``target`` (its facts or none; None: every row), best first; ``variant_hash``: only that variant's rows
        (their rank among all: ``rank_of``). Read from the summary the database keeps (``wf_static_configs``):
        the target's rows and those without facts each by an index walk in key order, merged here."""
        rows: list[tuple[int, tuple[Any, ...]]] = []
        with self._session() as s:
            for part in self._static_parts(target):
                stmt = (
                    select(*self._STATIC_KEY)
                    .where(*self._static_where(task, campaign, variant_hash), part)
                    .order_by(*self._STATIC_KEY)
                )
                rows += [(int(r[-1]), tuple(r)) for r in s.execute(stmt if limit is None else stmt.limit(limit))]
        rows.sort(key=lambda r: r[1])
        return rows if limit is None else rows[:limit]

    def rank_of(self, task: str, target: str | None, key: tuple[Any, ...], campaign: str | None = None) -> int:
        """The rank in ``target``'s static ranking of the row whose sort key is ``key`` (``static_top``'s): a
        count of the rows before it (an index range of the summary), so a variant page places its row without
        reading the others (placing every row in Python took 0.5-0.7 s at 100,000 CPU evaluations)."""
        with self._session() as s:
            return 1 + sum(
                _count(
                    s,
                    select(StaticConfig.evaluation_id).where(
                        *self._static_where(task, campaign), part, tuple_(*self._STATIC_KEY) < tuple_(*key)
                    ),
                )
                for part in self._static_parts(target)
            )

    def ok_campaigns(self, task: str) -> list[str]:
        """Names of the campaigns holding a search evaluation of the task verified ``ok``, by name."""
        with self._session() as s:
            return sorted(
                s.scalars(
                    select(Campaign.name).where(
                        Campaign.id.in_(
                            select(StaticCount.scope).where(
                                StaticCount.task == task, StaticCount.scope != 0, StaticCount.configs > 0
                            )
                        )
                    )
                )
            )

    def evaluation_rows(self, ids: Sequence[int]) -> dict[int, EvaluationRow]:
        """Evaluation id -> its row (as pages list them), for the given ids only."""
        if not ids:
            return {}
        with self._session() as s:
            return {
                r.id: r for r in (_evaluation_row(x) for x in s.execute(_joined().where(Evaluation.id.in_(list(ids)))))
            }

    def stored_results(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """Evaluation id -> its stored result document (compile facts live in its ``resources``)."""
        with self._session() as s:
            return {
                int(i): dict(r or {})
                for i, r in s.execute(select(Evaluation.id, Evaluation.result).where(Evaluation.id.in_(list(ids))))
            }

    def task_files(self, name: str) -> tuple[str, ...]:
        """The task files (by-path tasks) that campaigns named ``name`` by, as their specs hold them, newest
        campaign first: the store keys a by-path task by its file's stem (``23_Softmax``), a hint needs the path."""
        found: list[str] = []
        with self._session() as s:
            for spec in s.scalars(select(Campaign.spec).order_by(Campaign.id.desc())):
                for entry in [*((spec or {}).get("task_files") or ()), *((spec or {}).get("tasks") or ())]:
                    text = str(entry)
                    if (text.endswith(".py") or "/" in text) and PurePath(text).stem == name and text not in found:
                        found.append(text)
        return tuple(found)

    def holds_task(self, name: str) -> bool:
        """Whether the database holds anything for the task ``name`` (``stored_task_names`` has it): an index
        look-up per table, where listing every name reads every evaluation's (0.15 s of ``best`` at 100,000)."""
        with self._session() as s:
            return any(
                s.scalar(select(column).where(column == name).limit(1)) is not None
                for column in (TaskRecord.name, Evaluation.task, DecisionRecord.task)
            )

    def stored_task_names(self) -> tuple[str, ...]:
        """Names of the tasks the database holds anything for (evaluations or decisions), sorted."""
        with self._session() as s:
            names = s.scalars(union(select(TaskRecord.name), select(Evaluation.task), select(DecisionRecord.task)))
            return tuple(sorted(set(names)))

    def llm_transcripts(self, campaign: str, task: str | None = None) -> tuple[LLMTranscript, ...]:
        """A campaign's calls in call order with their whole text (``agent transcripts``, replay)."""
        with self._session() as s:
            return agent_reads.transcripts(s, campaign, task)

    def agent_run_totals(self, campaign: str) -> tuple[AgentRunRow, ...]:
        """A campaign's agent totals per task, in the order the runs started, with their settings."""
        with self._session() as s:
            return agent_reads.run_totals(s, campaign)

    def agent_plans(self, campaign: str) -> tuple[AgentPlanRow, ...]:
        """The plans the LLM plan agent proposed in a campaign, in order."""
        with self._session() as s:
            return agent_reads.agent_plans(s, campaign)

    # --- plans -------------------------------------------------------------------------------------
    def plans(
        self,
        *,
        model: str | None = None,
        cluster: str | None = None,
        campaign: str | None = None,
        offset: int = 0,
        limit: int = 50,
    ) -> Page[PlanRow]:
        """Stored parallelism plans, fastest predicted step first (plans that do not fit last)."""
        offset, limit = _page(offset, limit)
        stmt = select(Plan, Campaign.name).outerjoin(Campaign, Campaign.id == Plan.campaign_id)
        if model is not None:
            stmt = stmt.where(Plan.model_name == model)
        if cluster is not None:
            stmt = stmt.where(Plan.cluster_name == cluster)
        if campaign is not None:
            stmt = stmt.where(Campaign.name == campaign)
        order = (Plan.fits.desc(), Plan.step_time_s.asc().nulls_last(), Plan.id.asc())
        with self._session() as s:
            total = _count(s, stmt)
            items = tuple(
                PlanRow(
                    p.id,
                    name,
                    p.model_name,
                    p.cluster_name,
                    p.nodes,
                    dict(p.plan or {}),
                    p.plan_key,
                    p.source,
                    bool(p.fits),
                    p.step_time_s,
                    p.mfu,
                    p.peak_mem_gb,
                    dict(p.model_spec or {}),
                    dict(p.cluster_spec or {}),
                    dict(p.prediction or {}),
                    p.warpforge_version,
                    utc(p.created_at),
                )
                for p, name in s.execute(stmt.order_by(*order).offset(offset).limit(limit))
            )
        return Page(items, total, offset, limit)

    # --- optimize runs -----------------------------------------------------------------------------
    def optimize_runs(self, *, target: str | None = None, offset: int = 0, limit: int = 50) -> Page[OptimizeRunRow]:
        """Stored ``warpforge optimize`` runs, newest first, without their reports."""
        offset, limit = _page(offset, limit)
        with self._session() as s:
            return optimize_reads.optimize_runs(s, target=target, offset=offset, limit=limit)

    def optimize_run(self, id: int) -> OptimizeRunDetail | None:
        """One stored run with its whole report document; None when no run has that id."""
        with self._session() as s:
            return optimize_reads.optimize_run(s, id)


def _filters(
    *,
    campaign: str | None = None,
    task: str | None = None,
    verdict: str | None = None,
    variant_hash: str | None = None,
    final: bool | None = None,
) -> list[Any]:
    filters: list[Any] = []
    if campaign is not None:  # a subquery, not a join: the page query stays on wf_evaluations' indexes
        filters.append(Evaluation.campaign_id == select(Campaign.id).where(Campaign.name == campaign).scalar_subquery())
    if task is not None:
        filters.append(Evaluation.task == task)
    if verdict is not None:
        filters.append(Evaluation.verdict == verdict)
    if variant_hash is not None:
        filters.append(Evaluation.variant_hash == variant_hash)
    if final is not None:
        filters.append(Evaluation.final.is_(final))
    return filters


def _scope(campaign: str | None) -> Any:
    """The static summaries' scope of a campaign name: 0 for every campaign, else the campaign's id."""
    return 0 if campaign is None else select(Campaign.id).where(Campaign.name == campaign).scalar_subquery()


def _joined() -> Select[Any]:
    return (
        select(*_EVAL_COLUMNS)
        .join(VariantRecord, VariantRecord.id == Evaluation.variant_id)
        .outerjoin(Campaign, Campaign.id == Evaluation.campaign_id)
    )


def _count(s: Session, stmt: Select[Any] | Any) -> int:
    return int(s.scalar(select(func.count()).select_from(stmt.order_by(None).subquery())) or 0)


def _page(offset: int, limit: int) -> tuple[int, int]:
    if offset < 0 or limit < 1:
        raise ValueError(f"offset must be >= 0 and limit >= 1 (got offset={offset}, limit={limit})")
    return offset, min(limit, MAX_LIMIT)
