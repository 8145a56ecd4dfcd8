"""Plotly figure specs (plain ``{"data": [...], "layout": {...}}`` dicts) built from Reader rows.

The browser draws them with the packaged ``plotly.min.js``; no Python plotly import is needed (it costs
~1 s at start-up and adds nothing to a JSON spec). Times are the stored objective (ms, lower is better);
interpreter-backend evaluations carry no time and appear only in the verdict mix.

Example::

    >>> from warpforge.db.queries import Reader                              # doctest: +SKIP
    >>> figs = campaign_figures(Reader("sqlite:///wf.db"), "softmax-demo")   # doctest: +SKIP
    >>> [f.id for f in figs][:2]                                             # doctest: +SKIP
    ['best-evals', 'best-wall']
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from warpforge.dashboard.views import CHART_ROWS

log = logging.getLogger("warpforge.dashboard")
VERDICT_COLORS = {
    "ok": "#2ca02c",
    "incorrect": "#d62728",
    "compile_error": "#9467bd",
    "runtime_error": "#8c564b",
    "timeout": "#e377c2",
    "crashed": "#7f7f7f",
    "rejected": "#bcbd22",
    "invalid_config": "#17becf",
    "unsupported": "#aec7e8",
}
MAX_PARAM_FIGURES = 12


@dataclass(frozen=True)
class Figure:
    id: str
    title: str
    spec: dict[str, Any]
    note: str = ""
    points: int = 0  # data points drawn (0: the page says there is nothing to draw)


@dataclass(frozen=True)
class CampaignCharts:
    campaign: str
    evaluations_total: int
    evaluations_read: int
    figures: tuple[Figure, ...] = field(default_factory=tuple)  # only those with something to draw
    not_drawn: tuple[str, ...] = ()  # "title: why it is empty", for each chart left out


def layout(title: str, x: str, y: str, **extra: Any) -> dict[str, Any]:
    # The page prints the title above the plot; the legend goes on top so it never covers the x-axis title.
    return {
        "meta": {"title": title},
        "xaxis": {"title": {"text": x}},
        "yaxis": {"title": {"text": y}},
        "margin": {"l": 60, "r": 20, "t": 30, "b": 60},
        "height": 380,
        "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
        **extra,
    }


def _timed(rows: list[Any]) -> list[Any]:
    return [r for r in rows if r.verdict == "ok" and r.objective_ms is not None and not r.final]


def best_so_far(rows: list[Any], campaign_start: Any | None) -> tuple[Figure, Figure]:
    by_eval: list[dict[str, Any]] = []
    by_wall: list[dict[str, Any]] = []
    series: dict[str, list[Any]] = defaultdict(list)
    for r in rows:
        if not r.final:
            series[r.task].append(r)  # a campaign times one task on one GPU; untimed failures count as evaluations
    n_points = 0
    for task, rs in sorted(series.items()):
        gpu = next((r.timing_gpu for r in rs if r.timing_gpu), None)
        label = f"{task} ({gpu})" if gpu else task
        best: float | None = None
        xs, ys, ts = [], [], []
        start = campaign_start or rs[0].created_at
        for i, r in enumerate(rs, 1):
            if r.verdict == "ok" and r.objective_ms is not None and (best is None or r.objective_ms < best):
                best = r.objective_ms
            if best is not None:
                xs.append(i)
                ys.append(best)
                ts.append(max(0.0, (r.created_at - start).total_seconds()) if r.created_at and start else None)
        if xs:
            n_points += len(xs)
            by_eval.append(
                {"type": "scatter", "mode": "lines+markers", "name": label, "x": xs, "y": ys, "line": {"shape": "hv"}}
            )
            by_wall.append(
                {"type": "scatter", "mode": "lines+markers", "name": label, "x": ts, "y": ys, "line": {"shape": "hv"}}
            )
    note = "" if n_points else "no measured time yet (interpreter campaigns check correctness only)"
    return (
        Figure(
            "best-evals",
            "Best so far vs evaluations",
            {"data": by_eval, "layout": layout("Best time so far", "evaluations", "ms (lower is better)")},
            note,
            n_points,
        ),
        Figure(
            "best-wall",
            "Best so far vs wall time",
            {"data": by_wall, "layout": layout("Best time so far", "seconds since start", "ms")},
            note,
            n_points,
        ),
    )


def param_figures(rows: list[Any]) -> list[Figure]:
    timed = _timed(rows)
    figs: list[Figure] = []
    by_task: dict[str, list[Any]] = defaultdict(list)
    for r in timed:
        by_task[r.task].append(r)
    for task, rs in sorted(by_task.items()):
        names = sorted({k for r in rs for k in dict(r.params)})
        for p in names:
            if len(figs) >= MAX_PARAM_FIGURES:
                return figs
            traces: dict[str, dict[str, list[Any]]] = defaultdict(lambda: {"x": [], "y": [], "text": []})
            for r in rs:
                if p in r.params:
                    t = traces[r.variant_name]
                    t["x"].append(r.params[p])
                    t["y"].append(r.objective_ms)
                    # hover text: the other parameters (str() of a dict is 5x cheaper than json.dumps here)
                    t["text"].append(str(r.params))
            data = [{"type": "scatter", "mode": "markers", "name": v, **t} for v, t in sorted(traces.items())]
            figs.append(
                Figure(
                    f"param-{task}-{p}",
                    f"{task}: time vs {p}",
                    {
                        "data": data,
                        "layout": layout(
                            f"{task}: time vs {p}", p, "ms", yaxis={"type": "log", "title": {"text": "ms"}}
                        ),
                    },
                    points=sum(len(t["x"]) for t in traces.values()),
                )
            )
    return figs


def verdict_mix(rows: list[Any], bins: int = 20) -> Figure:
    """Verdict counts; over time (``bins`` groups in order) only when each group holds at least 2 evaluations:
    with fewer, every bar was one evaluation tall and showed nothing a count does not."""
    if not rows:
        return Figure("verdicts", "Verdict mix", {"data": [], "layout": layout("Verdicts", "", "")}, "no evaluations")
    if len(rows) < 2 * bins:
        counts = Counter(r.verdict for r in rows)
        order = sorted(counts, key=lambda v: (-counts[v], v))
        data = [
            {
                "type": "bar",
                "x": order,
                "y": [counts[v] for v in order],
                "marker": {"color": [VERDICT_COLORS.get(v, "#333") for v in order]},
            }
        ]
        return Figure(
            "verdicts",
            "Verdict mix",
            {
                "data": data,
                "layout": layout(
                    "Verdict mix", "verdict", "evaluations", xaxis={"type": "category", "title": {"text": "verdict"}}
                ),
            },
            points=len(rows),
        )
    size = max(1, -(-len(rows) // bins))
    groups: list[Counter[str]] = [Counter(r.verdict for r in rows[i : i + size]) for i in range(0, len(rows), size)]
    xs = [f"{i * size + 1}-{min((i + 1) * size, len(rows))}" for i in range(len(groups))]
    verdicts = sorted({v for c in groups for v in c})
    data = [
        {
            "type": "bar",
            "name": v,
            "x": xs,
            "y": [c.get(v, 0) for c in groups],
            "marker": {"color": VERDICT_COLORS.get(v, "#333")},
        }
        for v in verdicts
    ]
    return Figure(
        "verdicts",
        "Verdict mix over time",
        {
            "data": data,
            "layout": layout(
                "Verdict mix over time",
                "evaluations (in order)",
                "count",
                barmode="stack",
                xaxis={"type": "category", "title": {"text": "evaluations (in order)"}},
            ),
        },
        points=len(rows),
    )


def compile_facts_figure(rows: list[Any], facts: dict[int, Any]) -> Figure:
    """Registers per thread against the occupancy they allow, per configuration verified ok (worst kernel and
    shape): on a CPU run these facts are all there is to chart."""
    traces: dict[str, dict[str, list[Any]]] = defaultdict(lambda: {"x": [], "y": [], "text": []})
    for r in rows:
        f = facts.get(r.id)
        if r.verdict != "ok" or r.final or not f or f.get("registers") is None or f.get("occupancy") is None:
            continue
        t = traces[r.variant_name]
        t["x"].append(f["registers"])
        t["y"].append(round(100 * f["occupancy"], 1))
        t["text"].append(f"{dict(r.params)} spill {f.get('spill_bytes')} B, smem {f.get('shared_bytes')} B")
    data = [{"type": "scatter", "mode": "markers", "name": v, **t} for v, t in sorted(traces.items())]
    n = sum(len(t["x"]) for t in traces.values())
    return Figure(
        "compile-facts",
        "Compile facts: registers and occupancy",
        {
            "data": data,
            "layout": layout("Compile facts", "registers per thread (worst kernel)", "occupancy % (worst kernel)"),
        },
        ""
        if n
        else "no compile facts stored (a GPU campaign's resource reports, or ahead-of-time compilation "
        "on a CPU, store them)",
        n,
    )


@lru_cache(maxsize=1)
def _gpu_table() -> list[dict[str, Any]]:
    path = Path(__file__).resolve().parent.parent / "data" / "gpus.json"
    return list(json.loads(path.read_text())["gpus"])


def gpu_ceilings(name: str) -> dict[str, Any] | None:
    """The GPU's ceilings: measured where gpus.json has them, else the data sheet (said in ``how``)."""
    for row in _gpu_table():
        if str(row["match"]).lower() in name.lower():
            measured = row.get("measured")
            src = {**row, **measured} if isinstance(measured, dict) else row
            return {
                "tensor_tflops": float(src["tensor_tflops"]),
                "fp32_tflops": float(src["fp32_tflops"]),
                "hbm_tbps": float(src["hbm_tbps"]),
                "how": str(measured.get("how", "measured")) if isinstance(measured, dict) else "data sheet",
            }
    return None


def _work(task: str, shape: dict[str, int], dtype: str) -> tuple[float, float] | None:
    return _work_cached(task, tuple(sorted(shape.items())), dtype)


@lru_cache(maxsize=4096)
def _work_cached(task: str, shape_items: tuple[tuple[str, int], ...], dtype: str) -> tuple[float, float] | None:
    shape = dict(shape_items)
    try:
        from warpforge.kernels.task import get_task
        from warpforge.kernels.taskdef import parse_dtype

        t = get_task(task)
        d = parse_dtype(dtype)
        return float(t.flops(shape, d)), float(t.bytes_moved(shape, d))
    except Exception as exc:  # noqa: BLE001 - a task defined in a file this process cannot load
        log.info("no roofline work model for %s: %s", task, exc)
        return None


def roofline(decisions: tuple[Any, ...]) -> Figure:
    data: list[dict[str, Any]] = []
    ceilings_drawn: set[str] = set()
    points = 0
    xs_all: list[float] = []
    for d in decisions:
        if not d.gpu:
            continue
        for s in d.shapes:
            if s.p50_ms is None:
                continue
            work = _work(d.task, dict(s.shape), s.dtype)
            if work is None or work[1] <= 0:
                continue
            flops, nbytes = work
            ai = flops / nbytes
            xs_all.append(ai)
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": f"{d.task} {s.shape_key} {s.dtype}",
                    "x": [ai],
                    "y": [flops / (s.p50_ms * 1e-3) / 1e12],
                    "marker": {"size": 10},
                    "text": [f"{d.variant_name}: {s.p50_ms:.4g} ms on {d.gpu}"],
                }
            )
            points += 1
        c = gpu_ceilings(d.gpu)
        if c is not None and d.gpu not in ceilings_drawn:
            ceilings_drawn.add(d.gpu)
            for kind in ("tensor_tflops", "fp32_tflops"):
                peak = c[kind]
                knee = peak / c["hbm_tbps"]  # FLOP/byte where memory and compute bounds meet
                xs = [0.01, knee, 10000.0]
                data.append(
                    {
                        "type": "scatter",
                        "mode": "lines",
                        "name": f"{d.gpu} {kind[:-7]} ceiling ({c['how']})",
                        "x": xs,
                        "y": [min(peak, x * c["hbm_tbps"]) for x in xs],
                        "line": {"dash": "dot"},
                    }
                )
    note = "" if points else "no measured shapes with a known work model"
    return Figure(
        "roofline",
        "Roofline",
        {
            "data": data,
            "layout": layout(
                "Roofline (achieved vs arithmetic intensity)",
                "FLOP / byte",
                "TFLOP/s",
                xaxis={"type": "log", "title": {"text": "arithmetic intensity (FLOP/byte)"}},
                yaxis={"type": "log", "title": {"text": "achieved TFLOP/s"}},
            ),
        },
        note,
        points,
    )


def campaign_figures(reader: Any, campaign: Any) -> CampaignCharts:
    rows: list[Any] = []
    total = 0
    while len(rows) < CHART_ROWS:  # the read layer pages at most 1,000 rows at a time
        page = reader.evaluations(campaign=campaign.name, sort="id", offset=len(rows), limit=CHART_ROWS - len(rows))
        rows.extend(page.items)
        total = page.total
        if not page.items or not page.has_more:
            break
    from warpforge.db.dashboard_reads import worst_facts_by_id

    first, wall = best_so_far(rows, campaign.created_at)
    params = param_figures(rows) or [Figure("params", "Time against each parameter", {}, "no measured time")]
    facts = worst_facts_by_id(reader, [r.id for r in rows if r.verdict == "ok"])
    figs = [
        first,
        wall,
        *params,
        roofline(tuple(campaign.decisions)),
        compile_facts_figure(rows, dict(facts)),
        verdict_mix(rows),
    ]
    return CampaignCharts(
        campaign.name,
        total,
        len(rows),
        tuple(f for f in figs if f.points),
        tuple(f"{f.title}: {f.note or 'nothing to draw'}" for f in figs if not f.points),
    )


# Plan labels are long ("#12 tp2pp4dp8 mb2 z1"): room below the axis for Plotly's rotated tick labels.
_ROTATED: dict[str, Any] = {"margin": {"l": 60, "r": 20, "t": 30, "b": 110}, "height": 420}


def plan_figures(plans: tuple[Any, ...]) -> tuple[Figure, ...]:
    labels = [_plan_label(p) for p in plans]
    time_parts = [
        "compute",
        "memory_bound",
        "recompute",
        "host_overhead",
        "tp_comm",
        "cp_comm",
        "ep_comm",
        "pp_p2p",
        "bubble",
        "dp_comm",
        "optimizer",
    ]
    mem_parts = ["weights", "grads", "optimizer", "activations", "logits", "overhead"]
    t_data, m_data = [], []
    for part in time_parts:
        ys = [float(dict(dict(p.prediction).get("time") or {}).get(part, 0.0)) for p in plans]
        if any(ys):
            t_data.append({"type": "bar", "name": part, "x": labels, "y": ys})
    for part in mem_parts:
        ys = [float(dict(dict(p.prediction).get("memory") or {}).get(part, 0.0)) for p in plans]
        if any(ys):
            m_data.append({"type": "bar", "name": part, "x": labels, "y": ys})
    return (
        Figure(
            "plan-time",
            "Simulated step time",
            {
                "data": t_data,
                "layout": layout(
                    "Simulated step time breakdown", "plan", "seconds per step", barmode="stack", **_ROTATED
                ),
            },
            points=len(plans),
        ),
        Figure(
            "plan-memory",
            "Memory per GPU",
            {"data": m_data, "layout": layout("Peak memory per GPU", "plan", "GiB", barmode="stack", **_ROTATED)},
            points=len(plans),
        ),
    )


def _plan_label(p: Any) -> str:
    plan = dict(p.plan)
    dims = "".join(f"{k}{plan[k]}" for k in ("tp", "pp", "dp", "cp", "ep") if plan.get(k, 1) not in (None, 1))
    extra = "".join(f" {short}{plan[k]}" for k, short in (("micro_batch", "mb"), ("zero", "z")) if k in plan)
    return f"#{p.id} {dims or 'dp1'}{extra}"
