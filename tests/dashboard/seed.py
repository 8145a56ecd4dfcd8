"""A small database written through warpforge's own store API, with numbers chosen here (the expected
values of the API tests come from this file, never from the dashboard's output).

Contents: campaign ``seeded`` (finished, replay, softmax) with a template parent and an LLM child whose
name/source/rationale carry script payloads; 5 evaluations (4 ok with times, 1 incorrect); a stored
decision choosing the CHILD at 1.8x [1.6-2.0] even though the parent has a faster raw evaluation (2.5x, not
accepted) - so a leaderboard that re-ranked raw times would show 2.5 and fail; campaign ``live-one``
(running, no decision); two stored plans.
"""

from __future__ import annotations

from typing import Any

GPU = "Synthetic H100 (test fixture)"
PAYLOAD_NAME = "<img src=x onerror=alert(1)>"
PAYLOAD_LINE = '# </pre><script>alert("xss")</script>'
SHAPE_A = {"M": 4096, "N": 4096}
SHAPE_B = {"M": 8192, "N": 8192}

PARENT_SRC = '''TASK = "softmax"
SPACE = {"BLOCK": [256, 512], "num_warps": [4, 8]}


def launch(x, **params):
    return x.softmax(-1)
'''
CHILD_SRC = PARENT_SRC.replace('"num_warps": [4, 8]', '"num_warps": [4, 8, 16]') + PAYLOAD_LINE + "\n"


def _result(variant: Any, params: dict[str, Any], verdict: str, ms: float | None, speedup: float | None) -> Any:
    from warpforge.evaluator.result import EvalResult, Resources, ShapeResult, Timing, Verdict

    shapes = []
    if ms is not None and speedup is not None:
        for shape, scale in ((SHAPE_A, 1.0), (SHAPE_B, 3.0)):
            p50 = ms * scale
            shapes.append(ShapeResult(shape=shape, dtype="float16", p20_ms=p50 * 0.97, p50_ms=p50, p80_ms=p50 * 1.04,
                                      ref_p50_ms=p50 * speedup, speedup=speedup, roofline_pct=42.0 * scale / 2))
    return EvalResult(verdict=Verdict(verdict), reason="" if verdict == "ok" else "output_mismatch",
                      message="" if verdict == "ok" else "max abs error 3.1 at [0, 7]", task="softmax",
                      variant_hash=variant.source_hash, params=params, backend="replay", device=GPU,
                      fingerprint="fp-synthetic", versions={"torch": "2.x", "triton": "3.x", "warpforge": "0.1.0"},
                      shapes=shapes, timing=Timing(source="recorded", gpu=GPU) if ms is not None else None,
                      speedup=speedup, objective_ms=ms, compile_s=0.5,
                      resources=[Resources(kernel="softmax_kernel", target="cuda:90", registers=40, spill_bytes=0,
                                           shared_bytes=2048)])


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
        camp = store.create_campaign(s, "seeded", spec)
        prow = store.ensure_variant(s, parent)
        crow = store.ensure_variant(s, child, "llm", proposer="llm", parents=(parent.source_hash,),
                                    proposal_id="call-1", rationale='<script>alert("r")</script> fewer warps')
        rows = [(prow, {"BLOCK": 256, "num_warps": 4}, "ok", 0.40, 2.5),  # fastest raw time, NOT the decision
                (prow, {"BLOCK": 512, "num_warps": 8}, "ok", 0.70, 1.4),
                (crow, {"BLOCK": 256, "num_warps": 8}, "ok", 0.55, 1.8),
                (crow, {"BLOCK": 512, "num_warps": 16}, "incorrect", None, None),
                (crow, {"BLOCK": 512, "num_warps": 4}, "ok", 0.90, 1.1)]
        for i, (vrow, params, verdict, ms, sp) in enumerate(rows):
            v = parent if vrow is prow else child
            store.save_evaluation(s, _result(v, params, verdict, ms, sp), task=task, variant=vrow, campaign=camp,
                                  study_name=f"seeded:softmax:{v.name}:{v.source_hash[:12]}", trial_number=i)
        _decide(s, camp, parent, child)
        camp.status = "finished"
        store.create_campaign(s, "live-one", spec)
    db.engine.dispose()

    from warpforge.parallel import PlanConfig, load_cluster, load_model, predict
    from warpforge.parallel.store import store_predictions

    model, cluster = load_model("llama3-8b"), load_cluster("dgx-h100")
    preds = [predict(model, cluster, PlanConfig(tp=2, dp=4)), predict(model, cluster, PlanConfig(tp=1, dp=8))]
    store_predictions(url, model, cluster, [(p, "predict", []) for p in preds])
    return {"parent": parent.source_hash, "child": child.source_hash}


def _decide(s: Any, camp: Any, parent: Any, child: Any) -> None:
    from warpforge.db import store

    store.save_decision(
            s, camp, "softmax", backend="replay", accepted=True, note="accepted beyond noise (synthetic)",
            timing_source="recorded", timing_gpu=GPU, fingerprint="fp-synthetic", variant_hash=child.source_hash,
            variant_name=child.name, params={"BLOCK": 256, "num_warps": 8}, objective_ms=0.55, speedup=1.8,
            speedup_low=1.6, speedup_high=2.0, interval="bootstrap 95%", evaluations=5, measured=4,
            top_k=[{"variant": child.name, "params": {"BLOCK": 256, "num_warps": 8}, "verdict": "ok", "ms": 0.55,
                    "speedup": 1.8, "speedup_low": 1.6, "speedup_high": 2.0, "interval": "bootstrap 95%",
                    "remeasured": False, "chosen": True}],
            shapes=[{"shape": SHAPE_A, "shape_key": "M=4096,N=4096", "dtype": "float16", "p50_ms": 0.55,
                     "speedup": 1.7, "roofline_pct": 21.0},
                    {"shape": SHAPE_B, "shape_key": "M=8192,N=8192", "dtype": "float16", "p50_ms": 1.65,
                     "speedup": 1.9, "roofline_pct": 63.0}])
