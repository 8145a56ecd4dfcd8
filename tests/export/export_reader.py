"""A stand-in for ``warpforge.db.queries.Reader`` (CONTRACTS section 3) while the read layer is not on main.

It returns objects with the contract's field names, read from the real tables through ``db/store.py``.
Decisions are given by the test (the ``wf_decisions`` table comes with migration 0002): each test states
which stored evaluation its campaign accepted. Once ``warpforge.db.queries`` lands, :func:`make_reader`
returns the real Reader when the database has decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from warpforge.db import store
from warpforge.db.session import Database


@dataclass(frozen=True)
class Page:
    items: tuple[Any, ...]
    total: int
    offset: int
    limit: int


@dataclass(frozen=True)
class ShapeRow:
    shape: dict[str, int]
    shape_key: str
    dtype: str
    p20_ms: float | None
    p50_ms: float | None
    p80_ms: float | None
    ref_p50_ms: float | None
    speedup: float | None
    roofline_pct: float | None


@dataclass(frozen=True)
class EvaluationRow:
    id: int
    campaign: str | None
    task: str
    variant_hash: str
    variant_name: str
    params: dict[str, Any]
    backend: str
    verdict: str
    reason: str
    message: str
    device: str
    fingerprint: str
    timing_source: str | None
    timing_gpu: str | None
    objective_ms: float | None
    speedup: float | None
    compile_s: float | None
    wall_s: float | None
    final: bool
    trial_number: int | None
    created_at: datetime


@dataclass(frozen=True)
class EvaluationDetail:
    row: EvaluationRow
    shapes: tuple[ShapeRow, ...]
    resources: Any
    versions: dict[str, str]
    result: dict[str, Any]


@dataclass(frozen=True)
class VariantRow:
    source_hash: str
    task: str
    name: str
    origin: str
    source: str


@dataclass(frozen=True)
class Decision:
    campaign: str
    task: str
    backend: str
    timing_source: str | None
    gpu: str | None
    fingerprint: str
    variant_hash: str
    variant_name: str
    params: dict[str, Any]
    objective_ms: float | None
    speedup: float | None
    speedup_low: float | None
    speedup_high: float | None
    accepted: bool
    note: str = ""
    top_k: tuple[Any, ...] = ()
    shapes: tuple[ShapeRow, ...] = ()
    created_at: datetime = field(default_factory=lambda: datetime(2026, 11, 30, tzinfo=timezone.utc))


class StandInReader:
    def __init__(self, url: str, decisions: list[Decision] | None = None) -> None:
        self.db = Database(url)
        self._decisions = list(decisions or [])
        self.rows, self.details, self.variants = self._load()

    def _load(self) -> tuple[list[EvaluationRow], dict[int, EvaluationDetail], dict[str, VariantRow]]:
        rows, details, variants = [], {}, {}
        with self.db.session() as s:
            for ev in sorted(store.results(s, limit=100000), key=lambda e: e.id):
                row = EvaluationRow(
                    ev.id, ev.campaign.name if ev.campaign else None, ev.task, ev.variant_hash, ev.variant.name,
                    dict(ev.params), ev.backend, ev.verdict, ev.reason, ev.message, ev.device, ev.fingerprint,
                    ev.timing_source, ev.timing_gpu, ev.objective_ms, ev.speedup, ev.compile_s, ev.wall_s,
                    bool(ev.study_name and ev.study_name.endswith(":final")), ev.trial_number, ev.created_at)
                shapes = tuple(ShapeRow(m.shape, m.shape_key, m.dtype, m.p20_ms, m.p50_ms, m.p80_ms, m.ref_p50_ms,
                                        m.speedup, m.roofline_pct) for m in ev.measurements)
                rows.append(row)
                details[ev.id] = EvaluationDetail(row, shapes, ev.result.get("resources"),
                                                  {"torch": ev.torch_version, "triton": ev.triton_version,
                                                   "warpforge": ev.warpforge_version}, dict(ev.result))
                variants[ev.variant_hash] = VariantRow(ev.variant_hash, ev.task, ev.variant.name, ev.variant.origin,
                                                       ev.variant.source)
        return rows, details, variants

    def add_decision(self, d: Decision) -> None:
        self._decisions.append(d)

    def decisions(self, *, campaign: str | None = None, task: str | None = None,
                  gpu: str | None = None) -> tuple[Decision, ...]:
        return tuple(d for d in self._decisions if (task is None or d.task == task)
                     and (campaign is None or d.campaign == campaign) and (gpu is None or d.gpu == gpu))

    def evaluations(self, *, campaign: str | None = None, task: str | None = None, verdict: str | None = None,
                    variant_hash: str | None = None, sort: str = "-id", offset: int = 0, limit: int = 50) -> Page:
        rows = [r for r in self.rows
                if (campaign is None or r.campaign == campaign) and (task is None or r.task == task)
                and (verdict is None or r.verdict == verdict)
                and (variant_hash is None or r.variant_hash == variant_hash)]
        rows.sort(key=lambda r: r.id, reverse=sort.startswith("-"))
        return Page(tuple(rows[offset:offset + limit]), len(rows), offset, limit)

    def evaluation(self, id: int) -> EvaluationDetail | None:
        return self.details.get(id)

    def variant(self, source_hash: str) -> VariantRow | None:
        return self.variants.get(source_hash)


def decision_from(reader: StandInReader, evaluation_id: int, *, low: float | None = None,
                  high: float | None = None) -> Decision:
    """The accepted decision a campaign would store for one of its evaluations (the test names which)."""
    d = reader.details[evaluation_id]
    r = d.row
    return Decision(r.campaign or "", r.task, r.backend, r.timing_source, r.timing_gpu, r.fingerprint, r.variant_hash,
                    r.variant_name, dict(r.params), r.objective_ms, r.speedup,
                    low if low is not None else r.speedup, high if high is not None else r.speedup,
                    accepted=True, shapes=d.shapes)
