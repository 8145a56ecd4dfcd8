"""Measure the agent: run ``--proposer llm`` campaigns over a task suite and print, per model, how its answers fared.

Per model: proposals (first attempts), parsed % (the final answer held a variant that parsed), compiled % and
correct % (of the accepted variants: any evaluation past compilation / any ``ok``), then per task the best
speedup (when a GPU measured) or the number of correct LLM variants (CPU), tokens and cost, and the share of
the campaign's wall time the evaluation workers were busy.

    python benchmarks/agent_eval.py --scripted                    # CI: scripted server, tiny task, interpreter
    python benchmarks/agent_eval.py --tasks softmax,rmsnorm --backend cuda --trials 60 --max-calls 16

Without ``--scripted`` it uses the configured endpoint(s) (WARPFORGE_LLM_* or WARPFORGE_LLM_CONFIG; docs/agent.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOUBLE_TASK = ROOT / "tests" / "agent" / "task_double_small.py"  # y = 2x + 1 on the smallest shapes
ANSWERS = ROOT / "tests" / "agent" / "answers"


def scripted_server() -> Any:
    """A server cycling through good, wrong, hacking, prose and duplicate answers for the ``double`` task."""
    from warpforge.agent.scripted import Reply, ScriptedServer, code_reply

    good = (ANSWERS / "double_good_v2.py").read_text()
    cycle = [code_reply(good, prompt_tokens=1500, completion_tokens=400),
             code_reply((ANSWERS / "double_wrong.py").read_text(), prompt_tokens=1500, completion_tokens=400),
             code_reply((ANSWERS / "double_hack_dynamic.py").read_text(), prompt_tokens=1500, completion_tokens=200),
             Reply(content="Use a bigger block.", prompt_tokens=1500, completion_tokens=20),
             code_reply(good.replace("[256, 512]", "[1024]"), prompt_tokens=1600, completion_tokens=400),
             code_reply("# again\n" + good, prompt_tokens=1500, completion_tokens=400)]
    server = ScriptedServer([])
    server.script = lambda body: cycle[(len(server.requests) - 1) % len(cycle)]  # the body is recorded first
    return server.start()


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    from sqlalchemy import create_engine, text

    from warpforge.search.campaign import CampaignSpec, run_campaign

    db_url = args.db or f"sqlite:///{Path(tempfile.mkdtemp(prefix='wf-agent-eval-')) / 'wf.db'}"
    tasks = [str(DOUBLE_TASK)] if args.scripted and not args.tasks else (args.tasks or "softmax").split(",")
    walls: dict[str, tuple[str, float, Any]] = {}
    for i, task in enumerate(tasks):
        name = f"agent-eval-{int(time.time())}-{i}"
        spec = CampaignSpec(name=name, tasks=[task], trials=args.trials, proposer="llm", backend=args.backend,
                            proposer_config={"max_calls": args.max_calls, "in_flight": args.in_flight, "seed": 0},
                            sampler="random", seed=0, db_url=db_url, top_k=0, seeds=1, workers=args.workers)
        started = time.monotonic()
        summary = run_campaign(spec)
        walls[task] = (name, time.monotonic() - started, summary.tasks[0])
    engine = create_engine(db_url)
    per_model: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(int))
    per_task = []
    with engine.connect() as conn:
        for task, (name, wall, summary) in walls.items():
            cid = conn.execute(text("select id from wf_campaigns where name = :n"), {"n": name}).scalar()
            calls = conn.execute(text("select call_key, model, outcome, variant_hash, prompt_tokens, completion_tokens,"
                                      " cost_usd from wf_agent_calls where campaign_id = :c order by id"),
                                 {"c": cid}).all()
            verdicts: dict[str, set[str]] = defaultdict(set)
            busy = 0.0
            for vh, verdict, wall_s in conn.execute(text("select variant_hash, verdict, wall_s from wf_evaluations "
                                                         "where campaign_id = :c"), {"c": cid}):
                verdicts[vh].add(verdict)
                busy += wall_s or 0.0
            last: dict[str, Any] = {}
            for c in calls:  # a proposal's final outcome is its last attempt's
                last[c.call_key.rsplit(".", 1)[0]] = c
            correct = 0
            for c in last.values():
                m = per_model[c.model]
                m["proposals"] += 1
                m["parsed"] += c.outcome in ("accepted", "rejected", "duplicate")
                if c.outcome == "accepted":
                    m["accepted"] += 1
                    seen = verdicts.get(c.variant_hash, set())
                    m["compiled"] += bool(seen - {"compile_error"})
                    m["correct"] += "ok" in seen
                    correct += "ok" in seen
            for c in calls:
                per_model[c.model]["tokens"] += c.prompt_tokens + c.completion_tokens
                per_model[c.model]["cost"] += c.cost_usd
            per_task.append({"task": Path(task).stem, "calls": len(calls), "correct_llm_variants": correct,
                             "best_speedup": summary.best_speedup, "tokens": sum(c.prompt_tokens + c.completion_tokens
                                                                                 for c in calls),
                             "cost_usd": sum(c.cost_usd for c in calls), "wall_s": wall,
                             "busy_share": busy / (wall * max(args.workers, 1)) if wall else 0.0,
                             "notes": list(summary.notes)})
    engine.dispose()
    models = {k: dict(v) for k, v in per_model.items()}
    return {"db": db_url, "models": models, "tasks": per_task}


def pct(n: float, d: float) -> str:
    return f"{100.0 * n / d:.0f}%" if d else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scripted", action="store_true", help="start the scripted server (no real model)")
    parser.add_argument("--tasks", default=None, help="comma-separated task names or files (default: softmax; "
                        "with --scripted the tiny test task)")
    parser.add_argument("--backend", default="interpret")
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--max-calls", type=int, default=6)
    parser.add_argument("--in-flight", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--db", default=None, help="database URL (default: a fresh SQLite file)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    server = None
    if args.scripted:
        server = scripted_server()
        os.environ.pop("WARPFORGE_LLM_CONFIG", None)
        os.environ.update({"WARPFORGE_LLM_BASE_URL": server.url, "WARPFORGE_LLM_MODEL": "scripted"})
    try:
        report = evaluate(args)
    finally:
        if server is not None:
            server.stop()
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    print(f"{'model':<20} {'proposals':>9} {'parsed':>7} {'compiled':>8} {'correct':>8} {'tokens':>8} {'USD':>8}")
    for model, m in report["models"].items():
        print(f"{model:<20} {m['proposals']:>9} {pct(m['parsed'], m['proposals']):>7} "
              f"{pct(m['compiled'], m['accepted']):>8} {pct(m['correct'], m['accepted']):>8} {m['tokens']:>8} "
              f"{m['cost']:>8.4f}")
    print(f"{'task':<20} {'calls':>5} {'best':>14} {'tokens':>8} {'USD':>8} {'wall s':>7} {'busy':>5}")
    for t in report["tasks"]:
        best = (f"{t['best_speedup']:.3g}x" if t["best_speedup"] else f"{t['correct_llm_variants']} correct")
        print(f"{t['task']:<20} {t['calls']:>5} {best:>14} {t['tokens']:>8} {t['cost_usd']:>8.4f} "
              f"{t['wall_s']:>7.1f} {pct(t['busy_share'], 1):>5}")
        for note in t["notes"]:
            print(f"  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
