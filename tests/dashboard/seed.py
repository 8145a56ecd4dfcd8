"""A small database written through warpforge's own store API, with numbers chosen here (the expected
values of the API tests come from this file, never from the dashboard's output).

Contents: campaign ``seeded`` (finished, replay, softmax) with a template parent and an LLM child whose
name/source/rationale carry script payloads; 5 evaluations (4 ok with times, 1 incorrect); a stored
decision choosing the CHILD at 1.8x [1.6-2.0] even though the parent has a faster raw evaluation (2.5x, not
accepted) - so a leaderboard that re-ranked raw times would show 2.5 and fail; campaign ``live-one``
(running, no decision); three stored plans, one proposed by an LLM whose rationale carries a payload.

LLM calls are written through the agent's own transcript writer (agent/transcripts.store_call/store_run,
which redacts registered keys): in ``seeded``, the call whose answer became the child (model ``coder-a``,
1000/200 tokens, $0.0036; its prompt and answer echo ``SECRET``, a registered key, and carry a script
payload), a rejected call (``coder-a``, 800/100, $0.0024) and a no_code call (``coder-b``, 500/50, $0.0010);
in ``live-one`` one accepted call of ``coder-b`` (300/30, $0.0009) that became no stored variant.
"""

from __future__ import annotations

from typing import Any

GPU = "Synthetic H100 (test fixture)"
PAYLOAD_NAME = "<img src=x onerror=alert(1)>"
PAYLOAD_LINE = '# </pre><script>alert("xss")</script>'
SHAPE_A = {"M": 4096, "N": 4096}
SHAPE_B = {"M": 8192, "N": 8192}
SECRET = "sk-seed-5e3f0a9b7c1d2e4f"  # registered with agent/secrets before the calls are stored
PLAN_RATIONALE = 'proposed by the LLM (call 1, r1.s0.a0): TP 8 fits <img src=x onerror="alert(2)">'
CALL_PAYLOAD = '<script>document.body.dataset.pwned = "call"</script>'
# (campaign, model, outcome, prompt tokens, completion tokens, USD): the expected values of the agent tests.
CALLS = [
    ("seeded", "coder-a", "accepted", 1000, 200, 0.0036),
    ("seeded", "coder-a", "rejected", 800, 100, 0.0024),
    ("seeded", "coder-b", "no_code", 500, 50, 0.0010),
    ("live-one", "coder-b", "accepted", 300, 30, 0.0009),
]

PARENT_SRC = """TASK = "softmax"
SPACE = {"BLOCK": [256, 512], "num_warps": [4, 8]}


def launch(x, **params):
    return x.softmax(-1)
"""
CHILD_SRC = PARENT_SRC.replace('"num_warps": [4, 8]', '"num_warps": [4, 8, 16]') + PAYLOAD_LINE + "\n"


def _result(variant: Any, params: dict[str, Any], verdict: str, ms: float | None, speedup: float | None) -> Any:
    from warpforge.evaluator.result import EvalResult, Resources, ShapeResult, Timing, Verdict

    shapes = []
    if ms is not None and speedup is not None:
        for shape, scale in ((SHAPE_A, 1.0), (SHAPE_B, 3.0)):
            p50 = ms * scale
            shapes.append(
                ShapeResult(
                    shape=shape,
                    dtype="float16",
                    p20_ms=p50 * 0.97,
                    p50_ms=p50,
                    p80_ms=p50 * 1.04,
                    ref_p50_ms=p50 * speedup,
                    speedup=speedup,
                    roofline_pct=42.0 * scale / 2,
                )
            )
    return EvalResult(
        verdict=Verdict(verdict),
        reason="" if verdict == "ok" else "output_mismatch",
        message="" if verdict == "ok" else "max abs error 3.1 at [0, 7]",
        task="softmax",
        variant_hash=variant.source_hash,
        params=params,
        backend="replay",
        device=GPU,
        fingerprint="fp-synthetic",
        versions={"torch": "2.x", "triton": "3.x", "warpforge": "0.1.0"},
        shapes=shapes,
        timing=Timing(source="recorded", gpu=GPU) if ms is not None else None,
        speedup=speedup,
        objective_ms=ms,
        compile_s=0.5,
        resources=[
            Resources(kernel="softmax_kernel", target="cuda:90", registers=40, spill_bytes=0, shared_bytes=2048)
        ],
    )


def seed(url: str) -> dict[str, Any]:
    from warpforge.db import store
    from warpforge.db.session import Database
    from warpforge.kernels.task import get_task
    from warpforge.kernels.variant import parse_variant

    task = get_task("softmax")
    parent = parse_variant(PARENT_SRC, name="parent_tpl")
    child = parse_variant(CHILD_SRC, name=PAYLOAD_NAME)
    db = Database(url)
    db.upgrade()
    spec = {"tasks": ["softmax"], "backend": "replay", "proposer": "llm", "sampler": "wf-default"}
    with db.session() as s:
        store.create_campaign(s, "seeded", spec)
        store.create_campaign(s, "live-one", spec)
    call_ids = _store_calls(db, parent.source_hash, child.source_hash)
    with db.session() as s:
        camp = store.get_campaign(s, "seeded")
        prow = store.ensure_variant(s, parent)
        crow = store.ensure_variant(
            s,
            child,
            "llm",
            proposer="llm",
            parents=(parent.source_hash,),
            proposal_id=str(call_ids[0]),
            rationale='<script>alert("r")</script> fewer warps',
        )
        rows = [
            (prow, {"BLOCK": 256, "num_warps": 4}, "ok", 0.40, 2.5),  # fastest raw time, NOT the decision
            (prow, {"BLOCK": 512, "num_warps": 8}, "ok", 0.70, 1.4),
            (crow, {"BLOCK": 256, "num_warps": 8}, "ok", 0.55, 1.8),
            (crow, {"BLOCK": 512, "num_warps": 16}, "incorrect", None, None),
            (crow, {"BLOCK": 512, "num_warps": 4}, "ok", 0.90, 1.1),
        ]
        for i, (vrow, params, verdict, ms, sp) in enumerate(rows):
            v = parent if vrow is prow else child
            store.save_evaluation(
                s,
                _result(v, params, verdict, ms, sp),
                task=task,
                variant=vrow,
                campaign=camp,
                study_name=f"seeded:softmax:{v.name}:{v.source_hash[:12]}",
                trial_number=i,
            )
        _decide(s, camp, parent, child)
        camp.status = "finished"
    db.engine.dispose()

    from warpforge.parallel import PlanConfig, load_cluster, load_model, predict
    from warpforge.parallel.store import store_predictions

    model, cluster = load_model("llama3-8b"), load_cluster("dgx-h100")
    preds = [predict(model, cluster, PlanConfig(tp=2, dp=4)), predict(model, cluster, PlanConfig(tp=1, dp=8))]
    store_predictions(url, model, cluster, [(p, "predict", []) for p in preds])
    llm_plan = predict(model, cluster, PlanConfig(tp=8, recompute="full"))
    store_predictions(url, model, cluster, [(llm_plan, "llm", [PLAN_RATIONALE, "step 1.0 s"])])
    return {"parent": parent.source_hash, "child": child.source_hash, "calls": call_ids}


def _store_calls(db: Any, parent_hash: str, child_hash: str) -> list[int]:
    from warpforge.agent.client import LLMResponse
    from warpforge.agent.secrets import register_secret
    from warpforge.agent.transcripts import CallRecord, store_call, store_run

    register_secret(SECRET)
    ids = []
    for i, (campaign, model, outcome, pt, ct, usd) in enumerate(CALLS):
        messages = (
            {"role": "system", "content": "You write Triton kernels."},
            {"role": "user", "content": f"Improve {parent_hash[:12]}. (key {SECRET}) {CALL_PAYLOAD}"},
        )
        answer = f"Here is the variant {CALL_PAYLOAD}\n```python\n{CHILD_SRC}```\nsent with {SECRET}"
        response = LLMResponse(model, answer, f"fewer warps; {SECRET}", "stop", pt, ct, 1.5, usd, {"temperature": 0.7})
        rec = CallRecord(
            task="softmax",
            call_key=f"r{i}.s0.a0",
            messages=messages,
            response=response,
            outcome=outcome,
            message="" if outcome == "accepted" else f"{outcome}: see the answer",
            parents=(parent_hash,),
            variant_hash=child_hash if i == 0 else None,
        )
        ids.append(store_call(db, campaign, rec))
    store_run(
        db,
        "seeded",
        "softmax",
        {
            "stop_reason": "calls",
            "calls": 3,
            "prompt_tokens": 2300,
            "completion_tokens": 350,
            "cost_usd": 0.007,
            "wall_s": 12.0,
            "outcomes": {"accepted": 1, "rejected": 1, "no_code": 1},
        },
    )
    return ids


def _decide(s: Any, camp: Any, parent: Any, child: Any) -> None:
    from warpforge.db import store

    store.save_decision(
        s,
        camp,
        "softmax",
        backend="replay",
        accepted=True,
        note="accepted beyond noise (synthetic)",
        timing_source="recorded",
        timing_gpu=GPU,
        fingerprint="fp-synthetic",
        variant_hash=child.source_hash,
        variant_name=child.name,
        params={"BLOCK": 256, "num_warps": 8},
        objective_ms=0.55,
        speedup=1.8,
        speedup_low=1.6,
        speedup_high=2.0,
        interval="bootstrap 95%",
        evaluations=5,
        measured=4,
        top_k=[
            {
                "variant": child.name,
                "params": {"BLOCK": 256, "num_warps": 8},
                "verdict": "ok",
                "ms": 0.55,
                "speedup": 1.8,
                "speedup_low": 1.6,
                "speedup_high": 2.0,
                "interval": "bootstrap 95%",
                "remeasured": False,
                "chosen": True,
            }
        ],
        shapes=[
            {
                "shape": SHAPE_A,
                "shape_key": "M=4096,N=4096",
                "dtype": "float16",
                "p50_ms": 0.55,
                "speedup": 1.7,
                "roofline_pct": 21.0,
            },
            {
                "shape": SHAPE_B,
                "shape_key": "M=8192,N=8192",
                "dtype": "float16",
                "p50_ms": 1.65,
                "speedup": 1.9,
                "roofline_pct": 63.0,
            },
        ],
    )
