"""The campaign's decision for one task, as the data stored in ``wf_decisions`` (db/store.save_decision).

The campaign has already decided (search/engine/acceptance.py: adopted beyond noise during the search, then
confirmed on the re-benchmarked top-k); this module only writes that decision down, so that readers
(``warpforge best``, the dashboard, export) never re-rank raw ``objective_ms`` rows. A task with no
accepted winner still gets a decision: ``accepted`` False and a note that says why (nothing was timed,
or the best failed its fresh re-check).

Example::

    >>> fields = decision_fields(summary, best, final, backend="cuda", acceptance=inc.describe())  # doctest: +SKIP
    >>> store.save_decision(session, campaign_row, summary.task, **fields)                       # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from warpforge.search.engine.acceptance import Entry, speedup_interval
from warpforge.search.engine.summary import FinalEntry, TaskSummary


def _shape_key(shape: dict[str, int]) -> str:
    # kernels.taskdef.shape_key's format ("M=4096,N=4096"), without importing torch for it.
    return ",".join(f"{k}={v}" for k, v in sorted(shape.items()))


def decision_fields(
    summary: TaskSummary, best: Entry | None, final: list[FinalEntry], *, backend: str, acceptance: str
) -> dict[str, Any]:
    """Keyword arguments of ``store.save_decision`` for one task's outcome.

    ``best`` is the campaign's accepted best after the final re-benchmark (None: no confirmed winner);
    ``final`` the top-k report (empty when ``top_k`` was 0 or nothing was measured).
    """
    fields: dict[str, Any] = dict(
        backend=backend, evaluations=summary.evaluations, measured=summary.measured, top_k=[asdict(f) for f in final]
    )
    if best is None or not best.result.measured:
        if summary.measured:
            why = "no confirmed winner: the fastest configuration failed its fresh re-check in the final re-benchmark"
            return fields | dict(accepted=False, note=f"{why}. {summary.timing}")
        return fields | dict(accepted=False, note=summary.timing)
    result = best.result
    chosen = next((f for f in final if f.chosen), None)
    if chosen is not None:
        speedup, low, high, interval = chosen.speedup, chosen.speedup_low, chosen.speedup_high, chosen.interval
    else:  # top-k 0: the interval of the accepted result as stored
        low, speedup, high, interval = speedup_interval(result)
    note = f"{acceptance}. {summary.timing}"
    if not final:
        note += ". Top-k not re-benchmarked (top_k 0)"
    shapes = [
        dict(
            shape=dict(s.shape),
            shape_key=_shape_key(s.shape),
            dtype=s.dtype,
            p20_ms=s.p20_ms,
            p50_ms=s.p50_ms,
            p80_ms=s.p80_ms,
            ref_p50_ms=s.ref_p50_ms,
            speedup=s.speedup,
            roofline_pct=s.roofline_pct,
        )
        for s in result.shapes
    ]
    return fields | dict(
        accepted=True,
        note=note,
        timing_source=result.timing.source if result.timing else None,
        timing_gpu=result.timing.gpu if result.timing else None,
        fingerprint=result.fingerprint,
        variant_hash=result.variant_hash or None,
        variant_name=best.variant,
        params=dict(best.params),
        objective_ms=result.objective_ms,
        speedup=speedup,
        speedup_low=low,
        speedup_high=high,
        interval=interval,
        shapes=shapes,
    )
