"""A results database written row by row (ORM), so CLI output over it is known in advance.

``cpu-demo`` copies a real CPU campaign (``warpforge run rmsnorm --trials 6 --backend interpret``, 2026-11-30):
its six configurations with the compile facts ahead-of-time compilation for sm_90 reported, and its stored
decision (nothing measured). ``h100-rec`` is a campaign on recorded H100 times of the ``double`` test task with
an accepted decision, so ``best`` has a timed winner to show beside the static ranking.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from warpforge.db.models import Campaign, Decision, Evaluation, VariantRecord
from warpforge.db.session import Database

T0 = datetime(2026, 11, 30, 17, 0, tzinfo=timezone.utc)
H100 = "NVIDIA H100 80GB HBM3"
NOTE = (
    "0 of 6 evaluations measured: no GPU here and no recorded GPU times for these variants; configurations were "
    "checked for correctness (Triton interpreter) and compiled for sm_90, but not ranked by time. Run on a CUDA "
    "machine or record with benchmarks/record_spaces.py"
)


def kernel(
    name: str, regs: int, smem: int, warps: int, shape: str = "4096", dtype: str = "float16", spill: int = 0
) -> dict[str, Any]:
    m, n = (int(x) for x in (shape, shape))
    return {
        "kernel": name,
        "target": "sm_90",
        "registers": regs,
        "spill_bytes": spill,
        "shared_bytes": smem,
        "compile_s": 0.5,
        "shape": {"M": m, "N": n},
        "dtype": dtype,
        "num_warps": warps,
    }


# (variant, params, per-kernel facts) in the order the real campaign evaluated them (ids 1-6).
CPU_DEMO: list[tuple[str, dict[str, int], list[dict[str, Any]]]] = [
    (
        "looped",
        {"BLOCK_N": 8192, "num_warps": 16, "num_stages": 2},
        [
            kernel("_rmsnorm_looped_kernel", 32, 64, 16),
            kernel("_rmsnorm_looped_kernel", 32, 64, 16, dtype="bfloat16"),
            kernel("_rmsnorm_looped_kernel", 40, 64, 16, dtype="float32"),
        ],
    ),
    (
        "multi_row",
        {"TILE": 16384, "num_warps": 8, "num_stages": 1},
        [
            kernel("_rmsnorm_2d_kernel", 97, 128, 8),
            kernel("_rmsnorm_2d_kernel", 99, 64, 8, shape="8192"),
            kernel("_rmsnorm_2d_kernel", 106, 128, 8, dtype="bfloat16"),
            kernel("_rmsnorm_2d_kernel", 114, 128, 8, dtype="float32"),
        ],
    ),
    (
        "single_pass",
        {"ROWS_PER_PROGRAM": 2, "num_warps": 4, "num_stages": 1},
        [
            kernel("_rmsnorm_rows_kernel", 94, 16, 4),
            kernel("_rmsnorm_rows_kernel", 163, 16, 4, shape="8192"),
            kernel("_rmsnorm_rows_kernel", 95, 16, 4, dtype="bfloat16"),
            kernel("_rmsnorm_rows_kernel", 94, 16, 4, dtype="float32"),
        ],
    ),
    (
        "looped",
        {"BLOCK_N": 1024, "num_warps": 16, "num_stages": 4},
        [
            kernel("_rmsnorm_looped_kernel", 30, 64, 16),
            kernel("_rmsnorm_looped_kernel", 30, 64, 16, dtype="bfloat16"),
            kernel("_rmsnorm_looped_kernel", 32, 64, 16, dtype="float32"),
        ],
    ),
    (
        "multi_row",
        {"TILE": 1024, "num_warps": 32, "num_stages": 1},
        [
            kernel("_rmsnorm_2d_kernel", 19, 128, 32),
            kernel("_rmsnorm_2d_kernel", 24, 128, 32, shape="8192"),
            kernel("_rmsnorm_2d_kernel", 19, 128, 32, dtype="bfloat16"),
            kernel("_rmsnorm_2d_kernel", 21, 128, 32, dtype="float32"),
        ],
    ),
    (
        "single_pass",
        {"ROWS_PER_PROGRAM": 8, "num_warps": 8, "num_stages": 1},
        [
            kernel("_rmsnorm_rows_kernel", 47, 32, 8),
            kernel("_rmsnorm_rows_kernel", 100, 32, 8, shape="8192"),
            kernel("_rmsnorm_rows_kernel", 48, 32, 8, dtype="bfloat16"),
            kernel("_rmsnorm_rows_kernel", 60, 32, 8, dtype="float32"),
        ],
    ),
]


def evaluation(
    campaign: Campaign,
    task: str,
    variant: VariantRecord,
    params: dict[str, Any],
    minutes: int,
    facts: list[dict[str, Any]] | None,
    **fields: Any,
) -> Evaluation:
    values: dict[str, Any] = {"backend": "interpret", "verdict": "ok", "device": "cpu (triton interpreter)"} | fields
    return Evaluation(
        campaign=campaign,
        task=task,
        variant=variant,
        variant_hash=variant.source_hash,
        params=params,
        params_key=json.dumps(params, sort_keys=True),
        result={"resources": facts} if facts is not None else {},
        created_at=T0 + timedelta(minutes=minutes),
        **values,
    )


@pytest.fixture(scope="session")
def stored_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_stored_db(tmp_path_factory.mktemp("stored") / "wf.db")


def build_stored_db(path: Path) -> Path:
    """The known rows (module docstring) in a new SQLite file; the dashboard's CPU-page tests read it too."""
    db = Database(f"sqlite:///{path}")
    db.upgrade()
    with db.session() as s:
        demo = Campaign(
            name="cpu-demo",
            status="finished",
            spec={"tasks": ["rmsnorm"], "backend": "interpret"},
            created_at=T0,
            updated_at=T0,
        )
        variants = {
            name: VariantRecord(source_hash=(name[0] * 64), task="rmsnorm", name=name, source="#", space={})
            for name in ("looped", "multi_row", "single_pass")
        }
        s.add_all([demo, *variants.values()])
        for i, (name, params, facts) in enumerate(CPU_DEMO):
            s.add(evaluation(demo, "rmsnorm", variants[name], params, i, facts))
        s.add(
            Decision(
                campaign=demo,
                task="rmsnorm",
                backend="interpret",
                timing_source=None,
                timing_gpu=None,
                fingerprint="",
                accepted=False,
                note=NOTE,
                top_k=[],
                shapes=[],
                evaluations=6,
                measured=0,
                created_at=T0 + timedelta(minutes=7),
            )
        )
        rec = Campaign(
            name="h100-rec",
            status="finished",
            spec={"tasks": ["double"], "backend": "replay"},
            created_at=T0,
            updated_at=T0,
        )
        good = VariantRecord(source_hash="g" * 64, task="double", name="good", source="#", space={})
        s.add_all([rec, good])
        timed = [
            evaluation(
                rec,
                "double",
                good,
                {"BLOCK": b, "num_warps": 4},
                10 + j,
                [kernel("_double_kernel", 16 + 8 * j, 0, 4)],
                backend="replay",
                timing_source="recorded",
                timing_gpu=H100,
                objective_ms=ms,
                speedup=0.05 / ms,
            )
            for j, (b, ms) in enumerate([(256, 0.0211), (1024, 0.0187)])
        ]
        s.add_all(timed)
        s.flush()
        s.add(
            Decision(
                campaign=rec,
                task="double",
                backend="replay",
                timing_source="recorded",
                timing_gpu=H100,
                fingerprint="h100",
                accepted=True,
                variant_hash=good.source_hash,
                variant_name="good",
                params={"BLOCK": 1024, "num_warps": 4},
                objective_ms=0.0187,
                speedup=0.05 / 0.0187,
                speedup_low=2.51,
                speedup_high=2.83,
                interval="bootstrap 95%",
                note="",
                top_k=[],
                shapes=[],
                evaluation_id=timed[1].id,
                evaluations=2,
                measured=2,
                created_at=T0 + timedelta(minutes=20),
            )
        )
    add_llm_campaign(db)
    return path


def add_llm_campaign(db: Database) -> None:
    """``plan-llm``: a plan search whose LLM made two calls (the second answered from a stored transcript) and
    proposed two plans, one ranked with a long rationale and one refused, as ``agent transcripts`` reads them."""
    from warpforge.agent.client import LLMResponse
    from warpforge.agent.transcripts import CallRecord, store_call
    from warpforge.db.rows import AgentPlanRow
    from warpforge.parallel.plan_agent.store import create_plan_campaign, store_agent_plan

    cid = create_plan_campaign(db, "plan-llm", {"kind": "plan", "proposer": "llm"})
    task = "plan:llama3-70b@dgx-h100x8"
    response = LLMResponse("gpt-5-mini", "", "", "stop", 1380, 270, 4.2, 0.0012, {})
    ids = [
        store_call(
            db,
            "plan-llm",
            CallRecord(task=task, call_key=key, messages=(), response=response, outcome="accepted", replayed=replayed),
        )
        for key, replayed in (("r1.s0.a0", False), ("r2.s0.a0", True))
    ]
    plans = [
        (
            {"tp": 8, "pp": 4, "dp": 2, "micro_batch": 1, "recompute": "selective"},
            "ranked",
            "",
            "TP8 keeps each layer's all-reduce inside one node's NVLink; PP4 splits the 80 layers into stages "
            "of 20 so the activations fit, and DP2 uses the remaining nodes.",
            1,
            2150.0,
            61.3,
        ),
        ({"tp": 16, "pp": 1, "dp": 4}, "invalid", "tp=16 exceeds the 8 GPUs of one node", "", None, None, None),
    ]
    for slot, (plan, outcome, message, rationale, rank, tps, gib) in enumerate(plans):
        store_agent_plan(
            db,
            cid,
            AgentPlanRow(
                task=task,
                call_id=ids[0],
                call_key="r1.s0.a0",
                slot=slot,
                plan=plan,
                plan_key=None,
                outcome=outcome,
                message=message,
                rationale=rationale,
                rank=rank,
                tokens_per_s=tps,
                peak_mem_gb=gib,
            ),
        )
