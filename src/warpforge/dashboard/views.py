"""View models: what each page shows, built from Reader calls only; the JSON API returns the same objects.

Every function takes a :class:`warpforge.db.queries.Reader` (read-only) and returns frozen dataclasses.
Numbers on the leaderboard come from the campaigns' stored decisions (``Reader.decisions``/``winners``),
never from re-ranking raw evaluation times.

Example::

    >>> from warpforge.db.queries import Reader             # doctest: +SKIP
    >>> board = leaderboard(Reader("sqlite:///wf.db"))      # doctest: +SKIP
    >>> [(c.task, c.gpu, c.speedup) for c in board.cells]   # doctest: +SKIP
    [('softmax', 'NVIDIA H200', 1.8)]
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

# Chart series read one read-layer page: at 100,000 stored evaluations a 1,000-row campaign page took
# 110-140 ms to read and ~30 ms to chart on SQLite (benchmarks/dashboard_routes.py profile; 2,000 rows took
# 280-300 ms on the shared 2-core machine, at the 300 ms budget). Longer campaigns chart their first 1,000
# evaluations and the page says so; the tables page through all of them.
CHART_ROWS = 1000
PAGE = 50


@dataclass(frozen=True)
class Cell:
    """One leaderboard cell: the stored decision of (task, GPU), or why there is none."""

    task: str
    gpu: str
    campaign: str
    variant_hash: str | None
    variant_name: str | None
    params: Any
    speedup: float | None  # vs eager PyTorch (the task's reference), from the decision
    speedup_low: float | None
    speedup_high: float | None
    speedup_compile: float | None  # vs torch.compile: None while the evaluator does not time it
    sol_pct: float | None  # %-of-speed-of-light (roofline) of the chosen shape, or the best over shapes
    objective_ms: float | None
    accepted: bool
    failure: str | None  # the decision's note when nothing was accepted
    static: Any | None = None  # compile_facts.Ranked: best --static's first, where nothing was timed


@dataclass(frozen=True)
class Leaderboard:
    shapes: tuple[str, ...]
    shape: str | None
    tasks: tuple[str, ...]
    gpus: tuple[str, ...]
    cells: tuple[Cell, ...]
    sort: str

    def cell(self, task: str, gpu: str) -> Cell | None:
        return next((c for c in self.cells if c.task == task and c.gpu == gpu), None)


NOT_TIMED = "not timed"  # the GPU column of decisions whose campaign measured no time (interpret backend)


def _shape_of(decision: Any, shape: str | None) -> Any | None:
    return next((s for s in decision.shapes if s.shape_key == shape), None) if shape else None


def _cell(d: Any, shape: str | None) -> Cell:
    s = _shape_of(d, shape)
    sols = [x.roofline_pct for x in d.shapes if x.roofline_pct is not None]
    if s is not None:
        speed, low, high, sol, t = s.speedup, None, None, s.roofline_pct, s.p50_ms
    else:
        speed, low, high, sol, t = d.speedup, d.speedup_low, d.speedup_high, max(sols) if sols else None, d.objective_ms
    failure = None if d.accepted else (d.note or "no accepted result")
    return Cell(
        d.task,
        d.gpu or NOT_TIMED,
        d.campaign,
        d.variant_hash,
        d.variant_name,
        d.params,
        speed,
        low,
        high,
        None,
        sol,
        t,
        bool(d.accepted),
        failure,
    )


def leaderboard(
    reader: Any, *, shape: str | None = None, task: str | None = None, gpu: str | None = None, sort: str = "task"
) -> Leaderboard:
    """Task x GPU matrix of stored decisions; with ``shape``, the winners ranked on that shape."""
    decisions = reader.decisions(task=task or None, gpu=gpu or None)
    shapes = sorted({s.shape_key for d in decisions for s in d.shapes})
    best: dict[tuple[str, str], Cell] = {}
    # Newest decision first per (task, GPU) unless an accepted one exists: a later failed campaign does not
    # hide an earlier accepted winner.
    for d in sorted(decisions, key=lambda d: (bool(d.accepted), d.created_at or 0)):
        best[(d.task, d.gpu or NOT_TIMED)] = _cell(d, shape)
    if shape:
        for w in reader.winners(task=task or None, gpu=gpu or None, shape=shape):
            best[(w.task, w.gpu or NOT_TIMED)] = _cell(w.decision, shape)
    cells = [_with_static(reader, c) for c in best.values()]
    if sort == "speedup":
        cells.sort(key=lambda c: -(c.speedup or 0.0))
    elif sort == "sol":
        cells.sort(key=lambda c: -(c.sol_pct or 0.0))
    else:
        cells.sort(key=lambda c: (c.task, c.gpu))
    tasks = tuple(dict.fromkeys(c.task for c in cells))
    gpus = tuple(sorted({c.gpu for c in cells}, key=lambda g: (g == NOT_TIMED, g)))
    return Leaderboard(tuple(shapes), shape, tasks, gpus, tuple(cells), sort)


def _with_static(reader: Any, cell: Cell) -> Cell:
    """A cell without an accepted time carries the task's static ranking's first (what ``best --static``
    prints): on a CPU-only database it is the only ranking there is."""
    if cell.accepted:
        return cell
    from dataclasses import replace

    from warpforge.db.dashboard_reads import static_first

    return replace(cell, static=static_first(reader, cell.task))


@dataclass(frozen=True)
class StaticTask:
    """One task's static ranking in a campaign whose decision timed nothing."""

    task: str
    target: str
    rows: tuple[Any, ...]  # compile_facts.Ranked, best first
    total: int


def campaign_static(reader: Any, campaign: Any, top: int = 5) -> tuple[StaticTask, ...]:
    """Per task of the campaign without an accepted timed decision: its ok configurations ranked by compile
    facts, as ``best TASK --static`` ranks them within this campaign."""
    from warpforge.db.dashboard_reads import static_ranking

    accepted = {d.task for d in campaign.decisions if d.accepted}
    out = []
    for task in campaign.tasks:
        if task in accepted:
            continue
        for target, ranked in static_ranking(reader, task, campaign.name, limit=top).items():
            out.append(StaticTask(task, target, ranked.rows, ranked.total))
    return tuple(out)


def evaluation_facts(reader: Any, rows: Any) -> dict[int, Any]:
    """Evaluation id -> worst compile facts, for the rows of one evaluations table."""
    from warpforge.db.dashboard_reads import worst_facts_by_id

    return dict(worst_facts_by_id(reader, [r.id for r in rows]))


@dataclass(frozen=True)
class PlanSummary:
    """What a finished plan search decided: its fastest stored plan and how many plans it stored."""

    fastest: Any | None  # PlanRow
    plans: int


def plan_summaries(reader: Any, campaigns: Any) -> dict[str, PlanSummary]:
    """Campaign name -> summary, for the plan searches among ``campaigns`` (spec kind "plan"): they store
    plans, not decisions or evaluations, and showed "no decision yet" and 0 evaluations when finished."""
    out = {}
    for c in campaigns:
        if (c.spec or {}).get("kind") == "plan":
            page = reader.plans(campaign=c.name, limit=1)
            out[c.name] = PlanSummary(page.items[0] if page.items else None, page.total)
    return out


def plan_label(plan: Any) -> str:
    """``tp=8 · pp=4 · dp=2``: a plan as people write it, not its JSON."""
    return " · ".join(f"{k}={v}" for k, v in dict(plan or {}).items()) or "(defaults)"


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add" | "del" | "hunk" | "ctx"
    text: str


@dataclass(frozen=True)
class VariantView:
    variant: Any  # VariantRow
    lineage: tuple[Any, ...]  # VariantRow, root first, this variant last
    parent: Any | None
    diff: tuple[DiffLine, ...]
    best: Any | None  # EvaluationDetail of the best measured (else the latest) evaluation
    decisions: tuple[Any, ...]
    evaluations: Any  # Page[EvaluationRow]
    transcript: Any | None = None  # LLMTranscript of the call whose answer became this variant (origin llm)
    static: Any | None = None  # compile_facts.Ranked of ``best`` when nothing of this variant was timed
    facts: Any = None  # evaluation id -> worst compile facts, for the evaluations table


def source_diff(old: str, new: str, old_name: str, new_name: str) -> tuple[DiffLine, ...]:
    lines = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, lineterm="", n=3):
        kind = (
            "hunk"
            if line.startswith("@@")
            else "add"
            if line.startswith("+")
            else "del"
            if line.startswith("-")
            else "ctx"
        )
        lines.append(DiffLine(kind, line))
    return tuple(lines)


def variant_view(reader: Any, source_hash: str, *, offset: int = 0, limit: int = PAGE) -> VariantView | None:
    """The variant page; ``source_hash`` is the full hash or the 12-digit prefix the pages show."""
    from warpforge.db.dashboard_reads import resolve_variant_hash

    full = resolve_variant_hash(reader, source_hash)
    v = reader.variant(full) if full is not None else None
    if v is None:
        return None
    # Reader.lineage: the variant first, its roots last; the page draws it root first, ending at this variant.
    lineage = tuple(reversed(reader.lineage(v.source_hash))) or (v,)
    parent = reader.variant(v.parents[0]) if v.parents else None
    diff = source_diff(parent.source, v.source, parent.name, v.name) if parent is not None else ()
    evaluations = reader.evaluations(variant_hash=v.source_hash, offset=offset, limit=limit)
    fastest = reader.evaluations(variant_hash=v.source_hash, verdict="ok", sort="objective_ms", limit=1).items
    static = None
    if fastest and fastest[0].objective_ms is not None:
        pick_id: int | None = fastest[0].id
    else:  # nothing timed: best --static's first among this variant's configurations
        from warpforge.db.dashboard_reads import static_first

        static = static_first(reader, v.task, variant_hash=v.source_hash)
        pick_id = (
            static.evaluation_id if static is not None else (evaluations.items[0].id if evaluations.items else None)
        )
    best = reader.evaluation(pick_id) if pick_id is not None else None
    decisions = tuple(d for d in reader.decisions(task=v.task) if d.variant_hash == v.source_hash)
    transcript = None
    if v.origin == "llm" or v.proposal_id:
        from warpforge.dashboard.redact import scrub_transcript

        transcript = scrub_transcript(reader.llm_call_for_variant(v.source_hash))
    return VariantView(
        v,
        lineage,
        parent,
        diff,
        best,
        decisions,
        evaluations,
        transcript,
        static,
        evaluation_facts(reader, evaluations.items),
    )


def highlight(source: str) -> str | None:
    """Pygments HTML (it escapes the code) or None when Pygments is absent (the page shows escaped <pre>)."""
    try:
        from pygments import highlight as pyg
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer
    except ImportError:
        return None
    return str(pyg(source, PythonLexer(), HtmlFormatter(cssclass="hl", linenos="table")))


def pygments_css() -> str:
    try:
        from pygments.formatters import HtmlFormatter
    except ImportError:
        return ""
    return str(HtmlFormatter(cssclass="hl").get_style_defs(".hl"))
