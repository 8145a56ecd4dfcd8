"""Measure the agent: run ``--proposer llm`` campaigns over a task suite and print, per model, how its answers fared.

Per model: proposals (first attempts), parsed % (the final answer held a variant that parsed), compiled % and
correct % (of the accepted variants: any evaluation past compilation / any ``ok``), then per task the best
speedup (when a GPU measured) or the number of correct LLM variants (CPU), tokens and cost, and the share of
the campaign's wall time the evaluation workers were busy.

It also runs ``plan search --proposer llm`` on planner presets and reports, per model and preset, how many
LLM-proposed plans land in the simulator's top 5 (and what became of the others).

    python benchmarks/agent_eval.py --scripted                    # CI: scripted server, tiny task, interpreter
    python benchmarks/agent_eval.py --tasks softmax,rmsnorm --backend cuda --trials 60 --max-calls 16
    python benchmarks/agent_eval.py --plans-only --plan-presets all --plan-calls 8   # plans only, every preset

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
    plan_cycle_marker = "propose parallelism plans"  # plan prompts (agent/prompts/plan_system.j2) say this
    cycle = [
        code_reply(good, prompt_tokens=1500, completion_tokens=400),
        code_reply((ANSWERS / "double_wrong.py").read_text(), prompt_tokens=1500, completion_tokens=400),
        code_reply((ANSWERS / "double_hack_dynamic.py").read_text(), prompt_tokens=1500, completion_tokens=200),
        Reply(content="Use a bigger block.", prompt_tokens=1500, completion_tokens=20),
        code_reply(good.replace("[256, 512]", "[1024]"), prompt_tokens=1600, completion_tokens=400),
        code_reply("# again\n" + good, prompt_tokens=1500, completion_tokens=400),
    ]
    server = ScriptedServer([])
    kernel_calls = [0]

    def answer(body: dict[str, Any]) -> Any:
        if plan_cycle_marker in str(body["messages"][0]["content"]):
            return scripted_planner(body)
        kernel_calls[0] += 1
        return cycle[(kernel_calls[0] - 1) % len(cycle)]

    server.script = answer
    return server.start()


# Planner presets (model@cluster:nodes): small by default (~15 s of searches in all), every preset with "all".
PLAN_PRESETS = ("llama3-8b@dgx-h100:1", "llama3-70b@dgx-h100:4", "mixtral-8x7b@dgx-h100:2")
PLAN_PRESETS_ALL = PLAN_PRESETS + ("gpt3-175b@dgx-a100:16", "deepseek-v3-like@dgx-h100:32")


def scripted_planner(body: dict[str, Any]) -> Any:
    """A naive stand-in model for plans: it copies the best plan the prompt shows (``#1 `label` {json}``), adds
    the same plan without any sharding or recompute (never fits a model of 8 B parameters or more on 80 GiB
    GPUs: Adam alone keeps 14 bytes per parameter) and a TP of 3 (divides no 8-GPU node): by hand, one plan per
    answer lands in the top 5, one does not fit, one is invalid; asked again, the first two are duplicates."""
    import re

    from warpforge.agent.scripted import Reply

    prompt = str(body["messages"][-1]["content"])
    m = re.search(r"^#1 `[^`]*` (\{.*\})$", prompt, re.M)
    best = json.loads(m.group(1)) if m else {}
    plans = [
        {"plan": best, "rationale": "the best plan so far, as a control"},
        {
            "plan": {"tp": 1, "pp": 1, "cp": 1, "zero": 0, "recompute": "none"},
            "rationale": "no sharding, no recompute: the fastest if it fits",
        },
        {"plan": {"tp": 3}, "rationale": "an odd TP"},
    ]
    return Reply(
        content="```json\n" + json.dumps({"plans": plans}) + "\n```", prompt_tokens=3000, completion_tokens=250
    )


def evaluate_plans(args: argparse.Namespace, db_url: str) -> list[dict[str, Any]]:
    """One plan campaign per preset; per (model, preset): outcomes of the proposed plans and how many rank in
    the simulator's top 5 (ranks among all fitting plans of the final search)."""
    import asyncio

    from warpforge.agent.config import load_llm_config
    from warpforge.agent.transcripts import read_transcripts
    from warpforge.db.session import Database
    from warpforge.parallel import load_cluster, load_model
    from warpforge.parallel.plan_agent.agent import PlanAgent, PlanAgentSettings, SearchOptions

    presets = (
        PLAN_PRESETS_ALL
        if args.plan_presets == "all"
        else (tuple(args.plan_presets.split(",")) if args.plan_presets else PLAN_PRESETS)
    )
    llm = load_llm_config()
    rows = []
    for i, preset in enumerate(presets):
        model_name, _, rest = preset.partition("@")
        cluster_name, _, nodes = rest.partition(":")
        model, cluster = load_model(model_name), load_cluster(cluster_name, nodes=int(nodes or 1))
        name = f"agent-eval-plans-{int(time.time())}-{i}"
        agent = PlanAgent(
            model,
            cluster,
            SearchOptions(),
            PlanAgentSettings(max_calls=args.plan_calls, seed=0),
            llm=llm,
            db_url=db_url,
            campaign=name,
        )
        started = time.monotonic()
        res = asyncio.run(agent.run())
        wall = time.monotonic() - started
        call_model = {c.id: c.response.model for c in read_transcripts(Database(db_url), name)}
        per: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(int))
        for p in res.proposals:
            m = per[call_model.get(p.call_id or -1, "?")]
            m["proposed"] += 1
            m[p.outcome] += 1
            m["top5"] += p.rank is not None and p.rank <= 5
            if p.rank is not None:
                m["best_rank"] = min(m.get("best_rank") or p.rank, p.rank)
        for model_label, m in per.items():
            rows.append(
                {
                    "model": model_label,
                    "preset": preset,
                    **dict(m),
                    "calls": res.calls,
                    "tokens": res.prompt_tokens + res.completion_tokens,
                    "cost_usd": res.cost_usd,
                    "stop_reason": res.stop_reason,
                    "wall_s": wall,
                }
            )
    return rows


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    from sqlalchemy import create_engine, text

    from warpforge.search.engine.campaign import CampaignSpec, run_campaign

    db_url = args.db or f"sqlite:///{Path(tempfile.mkdtemp(prefix='wf-agent-eval-')) / 'wf.db'}"
    plans = evaluate_plans(args, db_url) if not args.no_plans else []
    if args.plans_only:
        return {"db": db_url, "models": {}, "tasks": [], "plans": plans}
    tasks = [str(DOUBLE_TASK)] if args.scripted and not args.tasks else (args.tasks or "softmax").split(",")
    walls: dict[str, tuple[str, float, Any]] = {}
    for i, task in enumerate(tasks):
        name = f"agent-eval-{int(time.time())}-{i}"
        spec = CampaignSpec(
            name=name,
            tasks=[task],
            trials=args.trials,
            proposer="llm",
            backend=args.backend,
            proposer_config={"max_calls": args.max_calls, "in_flight": args.in_flight, "seed": 0},
            sampler="random",
            seed=0,
            db_url=db_url,
            top_k=0,
            seeds=1,
            workers=args.workers,
        )
        started = time.monotonic()
        summary = run_campaign(spec)
        walls[task] = (name, time.monotonic() - started, summary.tasks[0])
    engine = create_engine(db_url)
    per_model: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(int))
    per_task = []
    with engine.connect() as conn:
        for task, (name, wall, summary) in walls.items():
            cid = conn.execute(text("select id from wf_campaigns where name = :n"), {"n": name}).scalar()
            calls = conn.execute(
                text(
                    "select call_key, model, outcome, variant_hash, prompt_tokens, completion_tokens,"
                    " cost_usd from wf_agent_calls where campaign_id = :c order by id"
                ),
                {"c": cid},
            ).all()
            verdicts: dict[str, set[str]] = defaultdict(set)
            busy = 0.0
            for vh, verdict, wall_s in conn.execute(
                text("select variant_hash, verdict, wall_s from wf_evaluations where campaign_id = :c"), {"c": cid}
            ):
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
            per_task.append(
                {
                    "task": Path(task).stem,
                    "calls": len(calls),
                    "correct_llm_variants": correct,
                    "best_speedup": summary.best_speedup,
                    "tokens": sum(c.prompt_tokens + c.completion_tokens for c in calls),
                    "cost_usd": sum(c.cost_usd for c in calls),
                    "wall_s": wall,
                    "busy_share": busy / (wall * max(args.workers, 1)) if wall else 0.0,
                    "notes": list(summary.notes),
                }
            )
    engine.dispose()
    models = {k: dict(v) for k, v in per_model.items()}
    return {"db": db_url, "models": models, "tasks": per_task, "plans": plans}


def pct(n: float, d: float) -> str:
    return f"{100.0 * n / d:.0f}%" if d else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scripted", action="store_true", help="start the scripted server (no real model)")
    parser.add_argument(
        "--tasks",
        default=None,
        help="comma-separated task names or files (default: softmax; with --scripted the tiny test task)",
    )
    parser.add_argument("--backend", default="interpret")
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--max-calls", type=int, default=6)
    parser.add_argument("--in-flight", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--db", default=None, help="database URL (default: a fresh SQLite file)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--plans-only", action="store_true", help="only the plan proposer (no kernel campaigns)")
    parser.add_argument("--no-plans", action="store_true", help="only the kernel campaigns")
    parser.add_argument(
        "--plan-presets",
        default=None,
        help=f"comma-separated model@cluster:nodes, or 'all' (default: {','.join(PLAN_PRESETS)})",
    )
    parser.add_argument("--plan-calls", type=int, default=2, help="LLM calls per plan campaign")
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
    if report["plans"]:
        print(
            f"{'model':<12} {'preset':<28} {'plans':>5} {'top 5':>5} {'best':>5} {'ranked':>6} {'no fit':>6} "
            f"{'invalid':>7} {'dup':>4} {'calls':>5} {'tokens':>7} {'USD':>7} {'stop':>6}"
        )
        for r in report["plans"]:
            print(
                f"{r['model']:<12} {r['preset']:<28} {r['proposed']:>5} {r.get('top5', 0):>5} "
                f"{r.get('best_rank') or '-':>5} {r.get('ranked', 0):>6} {r.get('does_not_fit', 0):>6} "
                f"{r.get('invalid', 0):>7} {r.get('duplicate', 0):>4} {r['calls']:>5} {r['tokens']:>7} "
                f"{r['cost_usd']:>7.4f} {r['stop_reason']:>6}"
            )
    if args.plans_only:
        return 0
    print(f"{'model':<20} {'proposals':>9} {'parsed':>7} {'compiled':>8} {'correct':>8} {'tokens':>8} {'USD':>8}")
    for model, m in report["models"].items():
        print(
            f"{model:<20} {m['proposals']:>9} {pct(m['parsed'], m['proposals']):>7} "
            f"{pct(m['compiled'], m['accepted']):>8} {pct(m['correct'], m['accepted']):>8} {m['tokens']:>8} "
            f"{m['cost']:>8.4f}"
        )
    print(f"{'task':<20} {'calls':>5} {'best':>14} {'tokens':>8} {'USD':>8} {'wall s':>7} {'busy':>5}")
    for t in report["tasks"]:
        best = f"{t['best_speedup']:.3g}x" if t["best_speedup"] else f"{t['correct_llm_variants']} correct"
        print(
            f"{t['task']:<20} {t['calls']:>5} {best:>14} {t['tokens']:>8} {t['cost_usd']:>8.4f} "
            f"{t['wall_s']:>7.1f} {pct(t['busy_share'], 1):>5}"
        )
        for note in t["notes"]:
            print(f"  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
