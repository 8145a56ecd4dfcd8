"""The read layer (db/queries.py) on SQLite and PostgreSQL: every expected value comes from rows this test
inserted itself through the ORM models, never from the reader's own output."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from warpforge.db.models import Campaign, Decision, Evaluation, Measurement, Plan, VariantRecord
from warpforge.db.queries import MAX_LIMIT, Reader
from warpforge.db.session import Database, DatabaseError

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)


def _variant(name: str, h: str, **kw: Any) -> VariantRecord:
    return VariantRecord(
        source_hash=h, task="softmax", name=name, source=f"# {name}\n", space={"BLOCK": [1, 2]}, created_at=T0, **kw
    )


def _eval(
    campaign: Campaign | None,
    variant: VariantRecord,
    i: int,
    verdict: str = "ok",
    ms: float | None = None,
    gpu: str | None = H100,
    final: bool = False,
    task: str = "softmax",
) -> Evaluation:
    return Evaluation(
        campaign=campaign,
        task=task,
        variant=variant,
        variant_hash=variant.source_hash,
        params={"BLOCK": i},
        params_key=json.dumps({"BLOCK": i}),
        backend="replay",
        verdict=verdict,
        reason="" if verdict == "ok" else "boom",
        message="",
        device=gpu or "cpu",
        fingerprint=(gpu or "")[-6:],
        timing_source="recorded" if ms is not None else None,
        timing_gpu=gpu if ms is not None else None,
        objective_ms=ms,
        speedup=None if ms is None else 1.0 / ms,
        final=final,
        trial_number=i,
        torch_version="2.13.0",
        triton_version="3.9.0",
        warpforge_version="0.1.0",
        result={"verdict": verdict, "resources": [{"kernel": "k", "target": "cuda:90", "registers": 40}]},
        created_at=T0 + timedelta(minutes=i),
    )


def _decision(
    campaign: Campaign,
    task: str,
    gpu: str | None,
    ms: float | None,
    accepted: bool = True,
    shape_ms: float | None = None,
    minutes: int = 0,
) -> Decision:
    shapes = (
        []
        if shape_ms is None
        else [{"shape": {"N": 4096}, "shape_key": "N=4096", "dtype": "float16", "p50_ms": shape_ms, "speedup": 2.0}]
    )
    top = (
        [
            {
                "variant": "a",
                "params": {"BLOCK": 1},
                "verdict": "ok",
                "ms": ms,
                "speedup": 1.5,
                "speedup_low": 1.4,
                "speedup_high": 1.6,
                "interval": "p20-p80",
                "remeasured": True,
                "chosen": True,
            }
        ]
        if ms
        else []
    )
    return Decision(
        campaign=campaign,
        task=task,
        backend="replay" if gpu else "interpret",
        timing_source="recorded" if gpu else None,
        timing_gpu=gpu,
        fingerprint=(gpu or "")[-6:],
        accepted=accepted,
        variant_hash="a" * 64 if ms else None,
        variant_name="a" if ms else None,
        params={"BLOCK": 1} if ms else None,
        objective_ms=ms,
        speedup=1.5 if ms else None,
        speedup_low=1.4 if ms else None,
        speedup_high=1.6 if ms else None,
        interval="p20-p80",
        note="n",
        top_k=top,
        shapes=shapes,
        created_at=T0 + timedelta(minutes=minutes),
    )


@pytest.fixture
def seeded(db_url: str) -> dict[str, Any]:
    """Two campaigns, a three-generation lineage, 12 evaluations, decisions on two GPUs, two plans."""
    db = Database(db_url)
    db.upgrade()
    ids: dict[str, Any] = {}
    with db.session() as s:
        c1 = Campaign(
            name="c1",
            status="finished",
            spec={"tasks": ["softmax"], "backend": "replay", "proposer": "template", "sampler": "wf-default"},
            created_at=T0,
            updated_at=T0,
        )
        c2 = Campaign(
            name="c2",
            status="running",
            spec={"tasks": ["softmax", "gemm"]},
            created_at=T0 + timedelta(hours=1),
            updated_at=T0 + timedelta(hours=1),
        )
        root = _variant("root", "r" * 64, origin="template", proposer="template")
        child = _variant(
            "child",
            "c" * 64,
            origin="llm",
            proposer="llm",
            parents=["r" * 64],
            proposal_id="call-7",
            rationale="bigger tiles",
        )
        cross = _variant("cross", "x" * 64, origin="llm", proposer="llm", parents=["c" * 64, "r" * 64, "m" * 64])
        s.add_all([c1, c2, root, child, cross])
        # c1: 6 search evaluations (4 ok, 1 incorrect, 1 timeout) and 2 final re-benchmarks
        evs = [
            _eval(c1, root, 1, ms=0.50),
            _eval(c1, root, 2, ms=0.30),
            _eval(c1, child, 3, ms=0.20),
            _eval(c1, child, 4, ms=None, gpu=None),
            _eval(c1, child, 5, verdict="incorrect"),
            _eval(c1, cross, 6, verdict="timeout"),
            _eval(c1, child, 7, ms=0.21, final=True),
            _eval(c1, root, 8, ms=0.31, final=True),
        ]
        # c2: 3 evaluations on another task and one on softmax, plus one without a campaign
        evs += [
            _eval(c2, root, 9, ms=0.9, task="gemm"),
            _eval(c2, root, 10, ms=0.8, task="gemm"),
            _eval(c2, root, 11, verdict="compile_error", task="gemm"),
            _eval(c2, cross, 12, ms=0.25),
            _eval(None, root, 13, ms=0.1, gpu=A100),
        ]
        s.add_all(evs)
        s.flush()
        evs[2].measurements.extend(
            [
                Measurement(
                    shape_key="N=1024",
                    shape={"N": 1024},
                    dtype="float16",
                    p20_ms=0.1,
                    p50_ms=0.11,
                    p80_ms=0.12,
                    ref_p50_ms=0.2,
                    speedup=1.8,
                    roofline_pct=40.0,
                ),
                Measurement(
                    shape_key="N=4096",
                    shape={"N": 4096},
                    dtype="float16",
                    p20_ms=0.3,
                    p50_ms=0.36,
                    p80_ms=0.4,
                    ref_p50_ms=0.7,
                    speedup=1.9,
                    roofline_pct=70.0,
                ),
            ]
        )
        s.add_all(
            [
                _decision(c1, "softmax", H100, 0.20, shape_ms=0.40, minutes=1),
                _decision(c2, "softmax", H100, 0.25, shape_ms=0.35, minutes=2),  # slower overall, faster on N=4096
                _decision(c2, "gemm", H100, 0.80, accepted=False, minutes=3),  # not accepted: never a winner
            ]
        )
        c3 = Campaign(
            name="c3",
            status="finished",
            spec={"tasks": ["softmax"]},
            created_at=T0 + timedelta(hours=2),
            updated_at=T0 + timedelta(hours=2),
        )
        s.add_all([c3, _decision(c3, "softmax", A100, 0.05, minutes=4)])
        s.add_all(
            [
                Plan(
                    model_name="llama3-8b",
                    cluster_name="dgx-h100",
                    nodes=1,
                    plan={"tp": 2},
                    plan_key="tp2",
                    source="search",
                    fits=True,
                    step_time_s=2.0,
                    created_at=T0,
                ),
                Plan(
                    model_name="llama3-8b",
                    cluster_name="dgx-h100",
                    nodes=1,
                    plan={"tp": 8},
                    plan_key="tp8",
                    source="search",
                    fits=True,
                    step_time_s=1.0,
                    created_at=T0,
                ),
                Plan(
                    model_name="llama3-8b",
                    cluster_name="dgx-h100",
                    nodes=1,
                    plan={"tp": 1},
                    plan_key="tp1",
                    source="search",
                    fits=False,
                    step_time_s=0.5,
                    created_at=T0,
                ),
            ]
        )
        s.flush()
        ids["evals"] = [e.id for e in evs]
        ids["ms"] = {e.id: e.objective_ms for e in evs}
        ids["speedup"] = {e.id: e.speedup for e in evs}
    ids["url"] = db_url
    return ids


def test_importing_the_read_layer_imports_no_torch_triton_or_ray() -> None:
    code = (
        "import sys, warpforge.db.queries; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'triton', 'ray'}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.strip() == "[]", proc.stdout


def test_evaluation_pages_filter_sort_and_never_overlap(seeded: dict[str, Any]) -> None:
    reader = Reader(seeded["url"])
    ev = seeded["evals"]
    newest = reader.evaluations()
    assert newest.total == 13 and [r.id for r in newest.items] == sorted(ev, reverse=True)
    c1 = reader.evaluations(campaign="c1", final=False, limit=4)
    assert c1.total == 6 and len(c1.items) == 4 and c1.has_more
    rest = reader.evaluations(campaign="c1", final=False, limit=4, offset=4)
    assert [r.id for r in c1.items + rest.items] == sorted(ev[:6], reverse=True) and not rest.has_more
    assert {r.id for r in reader.evaluations(campaign="c1", final=True).items} == {ev[6], ev[7]}
    # every row, newest first, in keyset batches (4 + 2 rows here)
    assert [r.id for r in reader.iter_evaluations(campaign="c1", final=False, batch=4)] == sorted(ev[:6], reverse=True)
    assert len(list(reader.iter_evaluations(batch=5))) == 13
    fastest = reader.evaluations(task="softmax", verdict="ok", sort="objective_ms")
    # ok softmax rows: 0.50, 0.30, 0.20, None(unmeasured), 0.21f, 0.31f, 0.25, 0.1 (A100, no campaign)
    assert [r.objective_ms for r in fastest.items] == [0.1, 0.2, 0.21, 0.25, 0.3, 0.31, 0.5, None]
    slowest = reader.evaluations(task="softmax", verdict="ok", sort="-objective_ms", limit=2)
    assert [r.objective_ms for r in slowest.items] == [0.5, 0.31] and slowest.total == 8
    by_variant = reader.evaluations(variant_hash="x" * 64)
    assert {(r.id, r.campaign, r.variant_name) for r in by_variant.items} == {
        (ev[5], "c1", "cross"),
        (ev[11], "c2", "cross"),
    }
    row = next(r for r in reader.evaluations(campaign="c1").items if r.id == ev[4])
    assert (row.verdict, row.reason, row.task, row.params, row.final) == (
        "incorrect",
        "boom",
        "softmax",
        {"BLOCK": 5},
        False,
    )
    assert row.created_at == T0 + timedelta(minutes=5)
    assert reader.evaluations(campaign="nope").total == 0
    assert reader.evaluations(limit=10_000).limit == MAX_LIMIT
    with pytest.raises(ValueError, match="unknown sort"):
        reader.evaluations(sort="verdict")
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.verdict = "ok"  # type: ignore[misc]


@pytest.mark.parametrize(
    "sort", ["objective_ms", "-objective_ms", "speedup", "-speedup", "id", "-id", "created_at", "-created_at"]
)
def test_cursor_and_offset_pages_walk_the_same_order_with_unmeasured_last(seeded: dict[str, Any], sort: str) -> None:
    reader = Reader(seeded["url"])
    name, desc = sort.lstrip("-"), sort.startswith("-")
    values = {
        "objective_ms": seeded["ms"],
        "speedup": seeded["speedup"],
        "id": {i: i for i in seeded["ms"]},
        "created_at": {i: i for i in seeded["ms"]},
    }[name]  # created_at grows with id in the seed
    valued = sorted((i for i in values if values[i] is not None), key=lambda i: (values[i], i), reverse=desc)
    expected = valued + sorted((i for i in values if values[i] is None), reverse=desc)
    by_offset = [r.id for off in range(0, 13, 3) for r in reader.evaluations(sort=sort, offset=off, limit=3).items]
    by_cursor, cursor, pages = [], None, 0
    while True:
        page = reader.evaluations(sort=sort, limit=3, cursor=cursor)
        by_cursor += [r.id for r in page.items]
        pages += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert by_offset == expected and by_cursor == expected and pages == 5
    with pytest.raises(ValueError, match="belongs to sort"):
        reader.evaluations(
            sort="id" if name != "id" else "speedup", cursor=reader.evaluations(sort=sort, limit=2).next_cursor
        )


def test_one_evaluation_in_full(seeded: dict[str, Any]) -> None:
    reader = Reader(seeded["url"])
    detail = reader.evaluation(seeded["evals"][2])
    assert detail is not None and detail.row.variant_name == "child" and detail.row.objective_ms == 0.2
    assert [(s.shape_key, s.p50_ms, s.roofline_pct) for s in detail.shapes] == [
        ("N=1024", 0.11, 40.0),
        ("N=4096", 0.36, 70.0),
    ]
    assert detail.shapes[1].shape == {"N": 4096}
    assert detail.resources == {"k": {"target": "cuda:90", "registers": 40}}
    assert detail.versions == {"torch": "2.13.0", "triton": "3.9.0", "warpforge": "0.1.0"}
    assert detail.result["verdict"] == "ok"
    assert reader.evaluation(10**9) is None


def test_campaigns_with_counts_and_decisions(seeded: dict[str, Any]) -> None:
    reader = Reader(seeded["url"])
    page = reader.campaigns()
    assert [c.name for c in page.items] == ["c3", "c2", "c1"] and page.total == 3
    c1 = reader.campaign("c1")
    assert c1 is not None
    # 6 search evaluations; the two final re-benchmarks are not counted
    assert c1.evaluations == 6 and dict(c1.verdicts) == {"ok": 4, "incorrect": 1, "timeout": 1}
    assert (c1.status, c1.tasks, c1.backend, c1.proposer, c1.sampler) == (
        "finished",
        ("softmax",),
        "replay",
        "template",
        "wf-default",
    )
    assert [(d.task, d.objective_ms) for d in c1.decisions] == [("softmax", 0.2)]
    c2 = reader.campaign("c2")
    assert c2 is not None and c2.evaluations == 4 and dict(c2.verdicts) == {"ok": 3, "compile_error": 1}
    assert {d.task for d in c2.decisions} == {"softmax", "gemm"}
    assert [c.name for c in reader.campaigns(status="running").items] == ["c2"]
    assert [c.name for c in reader.campaigns(offset=1, limit=1).items] == ["c2"]
    assert reader.campaign("nope") is None


def test_variant_and_lineage_back_to_the_root(seeded: dict[str, Any]) -> None:
    reader = Reader(seeded["url"])
    child = reader.variant("c" * 64)
    assert child is not None
    assert (child.name, child.origin, child.proposer, child.parents, child.proposal_id, child.rationale) == (
        "child",
        "llm",
        "llm",
        ("r" * 64,),
        "call-7",
        "bigger tiles",
    )
    assert child.source == "# child\n" and child.space == {"BLOCK": [1, 2]}
    # cross has parents child, root and an unknown hash: the unknown one ends its branch; root appears once
    assert [v.name for v in reader.lineage("x" * 64)] == ["cross", "child", "root"]
    assert [v.name for v in reader.lineage("r" * 64)] == ["root"]
    assert reader.lineage("z" * 64) == () and reader.variant("z" * 64) is None


def test_decisions_and_winners_never_mix_gpus_and_skip_unaccepted(seeded: dict[str, Any]) -> None:
    reader = Reader(seeded["url"])
    assert [(d.campaign, d.task) for d in reader.decisions()] == [
        ("c3", "softmax"),
        ("c2", "gemm"),
        ("c2", "softmax"),
        ("c1", "softmax"),
    ]
    assert [d.campaign for d in reader.decisions(gpu="a100")] == ["c3"]
    d = reader.decisions(campaign="c1")[0]
    assert (d.accepted, d.speedup_low, d.speedup, d.speedup_high, d.gpu) == (True, 1.4, 1.5, 1.6, H100)
    assert d.top_k[0].chosen and d.top_k[0].params == {"BLOCK": 1} and d.shapes[0].shape_key == "N=4096"
    winners = reader.winners(task="softmax")
    assert [(w.gpu, w.decision.campaign, w.ms) for w in winners] == [(A100, "c3", 0.05), (H100, "c1", 0.2)]
    on_h100 = reader.winners(task="softmax", gpu="H100")
    assert [(w.decision.campaign, w.shape_key) for w in on_h100] == [("c1", None)]
    by_shape = reader.winners(task="softmax", gpu="H100", shape="N=4096")
    assert [(w.decision.campaign, w.ms, w.shape_key) for w in by_shape] == [("c2", 0.35, "N=4096")]
    assert reader.winners(task="gemm") == ()  # its only decision was not accepted
    assert reader.winners(task="softmax", shape="N=1") == ()


def test_plans_fastest_fitting_first(seeded: dict[str, Any]) -> None:
    page = Reader(seeded["url"]).plans()
    assert [(p.plan_key, p.fits) for p in page.items] == [("tp8", True), ("tp2", True), ("tp1", False)]
    assert page.total == 3 and page.items[0].plan == {"tp": 8}
    assert Reader(seeded["url"]).plans(model="other").total == 0


def test_a_database_below_the_schema_says_to_upgrade(tmp_path: Any) -> None:
    from alembic import command
    from alembic.config import Config

    from warpforge.db.session import MIGRATIONS_DIR

    db = Database(f"sqlite:///{tmp_path / 'old.db'}")
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = db.engine
    command.upgrade(cfg, "0001")
    with pytest.raises(DatabaseError, match="warpforge db upgrade"):
        Reader(db.url).evaluations()
