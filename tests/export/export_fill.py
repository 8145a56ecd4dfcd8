"""Insert hand-made results into a database through db/store.py (the writer the campaign uses)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from warpforge.db import store
from warpforge.db.session import Database
from warpforge.evaluator.result import EvalResult, Resources, ShapeResult, Timing, Verdict, aggregate
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import builtin_variants, load_variant

GPU = "SYNTHETIC-TEST-GPU (recorded-labelled test data, not a measurement)"
VERSIONS = {"torch": "2.13.0+cpu", "triton": "3.9.0", "warpforge": "0.1.0"}


def variant(task: str, name: str) -> Any:
    return next(v for v in builtin_variants(task) if v.name == name)


def save(
    url: str,
    task_name: str,
    variant_name: str,
    params: dict[str, Any],
    *,
    verdict: str = "ok",
    times: dict[str, tuple[float, float, float]] | None = None,
    ref_ms: float = 1.0,
    resources: list[tuple[int, int, int]] | None = None,
    campaign: str = "c1",
    gpu: str = GPU,
    source: Path | None = None,
) -> int:
    """One evaluation; ``times`` maps a shape key ("M=4096,N=4096") to (p20, p50, p80) in ms (recorded);
    ``source``: a variant file of the test's own instead of the built-in template ``variant_name``."""
    task = get_task(task_name)
    v = load_variant(source) if source is not None else variant(task_name, variant_name)
    shapes = []
    for key, (p20, p50, p80) in (times or {}).items():
        shape = {k: int(x) for k, x in (kv.split("=") for kv in key.split(","))}
        shapes.append(
            ShapeResult(
                shape=shape,
                dtype="float16",
                p20_ms=p20,
                p50_ms=p50,
                p80_ms=p80,
                ref_p50_ms=ref_ms,
                speedup=ref_ms / p50,
            )
        )
    result = EvalResult(
        verdict=Verdict(verdict),
        task=task.name,
        variant_hash=v.source_hash,
        params=params,
        backend="replay" if times else "interpret",
        device=gpu if times else "cpu (triton interpreter)",
        fingerprint="fp-test",
        versions=VERSIONS,
        shapes=shapes,
        timing=Timing(source="recorded", gpu=gpu) if times else None,
        checked=["M=13,N=67 float16 1"],
        resources=[
            Resources(kernel="k", target="sm_90", registers=r, spill_bytes=s, shared_bytes=sh)
            for r, s, sh in (resources or [])
        ],
    )
    if times:
        aggregate(result)
    db = Database(url)
    db.upgrade()
    with db.session() as s:
        camp = store.get_campaign(s, campaign) or store.create_campaign(s, campaign, {})
        row = store.save_evaluation(s, result, task=task, variant=store.ensure_variant(s, v), campaign=camp)
        return int(row.id)


def decide(
    url: str,
    evaluation_id: int,
    *,
    low: float | None = None,
    high: float | None = None,
    accepted: bool = True,
    note: str = "",
) -> None:
    """Store the campaign decision that accepts one stored evaluation (the test states which, as a campaign
    would after its acceptance test), through store.save_decision."""
    from sqlalchemy import select

    from warpforge.db.models import Evaluation

    db = Database(url)
    with db.session() as s:
        ev = s.scalar(select(Evaluation).where(Evaluation.id == evaluation_id))
        assert ev is not None and ev.campaign is not None
        shapes = [
            {
                "shape": m.shape,
                "shape_key": m.shape_key,
                "dtype": m.dtype,
                "p20_ms": m.p20_ms,
                "p50_ms": m.p50_ms,
                "p80_ms": m.p80_ms,
                "ref_p50_ms": m.ref_p50_ms,
                "speedup": m.speedup,
                "roofline_pct": m.roofline_pct,
            }
            for m in ev.measurements
        ]
        store.save_decision(
            s,
            ev.campaign,
            ev.task,
            backend=ev.backend,
            accepted=accepted,
            note=note,
            timing_source=ev.timing_source,
            timing_gpu=ev.timing_gpu,
            fingerprint=ev.fingerprint,
            variant_hash=ev.variant_hash,
            variant_name=ev.variant.name,
            params=dict(ev.params),
            objective_ms=ev.objective_ms,
            speedup=ev.speedup,
            speedup_low=low if low is not None else ev.speedup,
            speedup_high=high if high is not None else ev.speedup,
            shapes=shapes,
        )
