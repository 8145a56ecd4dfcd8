"""``plan search --proposer llm`` against the scripted OpenAI-compatible server, through the real openai client.

Expected values come from outside the agent: the memory a plan needs is worked out by hand (Adam in mixed
precision keeps >= 14 bytes per parameter: bf16 weights 2 + fp32 master weights and two moments 12), the
divisibility of TP/PP by hand, and a plan's rank from the ordinary search (``search_plans`` with nothing
enqueued), which the agent never touches.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import select
from typer.testing import CliRunner

from warpforge.agent.config import LLMConfig, ModelConfig
from warpforge.agent.scripted import Reply, ScriptedServer
from warpforge.agent.transcripts import read_runs, read_transcripts
from warpforge.cli import app
from warpforge.db.models import Plan
from warpforge.db.session import Database
from warpforge.parallel import load_cluster, load_model
from warpforge.parallel.plan_agent.agent import PlanAgent, PlanAgentSettings, SearchOptions
from warpforge.parallel.plan_agent.store import read_agent_plans
from warpforge.parallel.search import search_plans

KEY = "sk-test-warpforge-plan-0123456789abcdef"  # a fake key: never stored, never printed
MODEL, CLUSTER = "llama3-8b", "dgx-h100"  # 8 GPUs, 80 GiB each; 76 GiB usable with the default 5% margin
LLAMA3_8B_PARAMS = 8.03e9  # Meta's model card
# By hand: tp 1 over 8 GPUs with ZeRO 0 keeps every byte of Adam state on each GPU:
# >= 14 B x 8.03e9 = 104.7 GiB > 76 GiB usable, whatever the activations.
UNFIT = {"tp": 1, "zero": 0, "recompute": "full"}
UNFIT_LOWER_BOUND_GIB = 14 * LLAMA3_8B_PARAMS / 2**30
# By hand: TP 8 splits weights, gradients and optimizer over 8 (<= 18 B x 8.03e9 / 8 = 16.8 GiB) and full
# recompute keeps one layer input per layer: far below 76 GiB.
GOOD = {"tp": 8, "recompute": "full", "zero": 0}  # DP 1: nothing to shard over (the search uses ZeRO 0 too)
GOOD2 = {"tp": 2, "micro_batch": 1, "recompute": "selective", "zero": 1}
INVALID = {"tp": 4, "pp": 3}  # 4 x 3 = 12 GPUs' worth of model parallelism does not divide 8 GPUs


def answer(*plans: dict[str, Any], tokens: tuple[int, int] = (2000, 300), **kw: Any) -> Reply:
    body = {"plans": [{"plan": p, "rationale": f"because {json.dumps(p)}"} for p in plans]}
    return Reply(
        content=f"Here are plans.\n```json\n{json.dumps(body)}\n```",
        prompt_tokens=tokens[0],
        completion_tokens=tokens[1],
        **kw,
    )


def llm_for(server: ScriptedServer, **kw: Any) -> LLMConfig:
    return LLMConfig(
        models=(
            ModelConfig.model_validate(
                {
                    "name": "scripted",
                    "model": "planner",
                    "base_url": server.url,
                    "api_key_env": "WF_TEST_KEY",
                    "max_retries": 0,
                    "timeout_s": 10.0,
                    **kw,
                }
            ),
        )
    )


def run_agent(
    server: ScriptedServer,
    db_url: str,
    campaign: str = "p",
    options: SearchOptions | None = None,
    llm: dict[str, Any] | None = None,
    **settings: Any,
) -> Any:
    agent = PlanAgent(
        load_model(MODEL),
        load_cluster(CLUSTER),
        options or SearchOptions(),
        PlanAgentSettings(**settings),
        llm=llm_for(server, **(llm or {})),
        db_url=db_url,
        campaign=campaign,
    )
    return asyncio.run(agent.run())


def expected_rank(fields: dict[str, Any]) -> int:
    """1-based position of the first plan with these settings in the ordinary search's ranking."""
    res = search_plans(load_model(MODEL), load_cluster(CLUSTER))
    for i, p in enumerate(res.feasible_predictions):
        if all(getattr(p.plan, k) == v for k, v in fields.items()):
            return i + 1
    raise AssertionError(f"the search ranks no plan with {fields}")


def configure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: ScriptedServer) -> None:
    file = tmp_path / "models.yaml"
    file.write_text(
        yaml.safe_dump(
            {
                "models": [
                    {
                        "name": "scripted",
                        "model": "planner",
                        "base_url": server.url,
                        "api_key_env": "WF_TEST_KEY",
                        "max_retries": 0,
                        "price_in": 1.0,
                        "price_out": 2.0,
                    }
                ]
            }
        )
    )
    monkeypatch.setenv("WARPFORGE_LLM_CONFIG", str(file))
    monkeypatch.setenv("WF_TEST_KEY", KEY)


def test_good_plans_land_ranked_by_the_simulator_with_rationale(
    monkeypatch: pytest.MonkeyPatch, db_url: str, scripted: Callable[..., ScriptedServer]
) -> None:
    monkeypatch.setenv("WF_TEST_KEY", KEY)
    server = scripted([answer(GOOD, GOOD2)])
    res = run_agent(server, db_url, max_calls=1)
    assert res.stop_reason == "calls" and len(server.requests) == 1
    assert server.auth_headers == [f"Bearer {KEY}"]  # through the real client, with the configured key
    by_plan = {json.dumps(p.plan, sort_keys=True): p for p in res.proposals}
    good, good2 = by_plan[json.dumps(GOOD, sort_keys=True)], by_plan[json.dumps(GOOD2, sort_keys=True)]
    assert (good.outcome, good2.outcome) == ("ranked", "ranked")
    assert good.rank == expected_rank(
        {"tp": 8, "pp": 1, "dp": 1, "cp": 1, "micro_batch": 1, "recompute": "full", "zero": 0, "interleave": 1}
    )
    assert good2.rank == expected_rank(
        {"tp": 2, "pp": 1, "dp": 4, "cp": 1, "micro_batch": 1, "recompute": "selective", "zero": 1, "interleave": 1}
    )
    db = Database(db_url)
    stored = read_agent_plans(db, "p")
    (call,) = read_transcripts(db, "p")
    assert call.call_key == "r1.s0.a0" and call.outcome == "accepted" and call.task == "plan:llama3-8b@dgx-h100x1"
    assert {p.call_id for p in stored} == {call.id}
    assert {p.rationale for p in stored} == {f"because {json.dumps(GOOD)}", f"because {json.dumps(GOOD2)}"}
    assert sorted(p.rank or 0 for p in stored) == sorted([good.rank, good2.rank])
    with db.session() as s:
        rows = s.scalars(select(Plan).where(Plan.source == "llm")).all()
        assert len(rows) == 2
        assert all(r.prediction["why"][0].startswith(f"proposed by the LLM (call {call.id}") for r in rows)
    (run,) = read_runs(db, "p")
    assert run["stop_reason"] == "calls" and run["calls"] == 1 and run["prompt_tokens"] == 2000
    if db_url.startswith("sqlite"):
        assert KEY.encode() not in Path(db_url.removeprefix("sqlite:///")).read_bytes()
    db.engine.dispose()


def test_every_bad_answer_gets_its_outcome(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, scripted: Callable[..., ScriptedServer]
) -> None:
    monkeypatch.setenv("WF_TEST_KEY", KEY)
    server = scripted(
        [
            Reply(content="I would use TP 8 with full recompute."),  # r1.s0.a0 no_code -> re-asked
            answer(UNFIT, INVALID, GOOD),  # r1.s0.a1: one plan each of does_not_fit, invalid, ranked
            answer(GOOD),  # r2.s0.a0: duplicate (not re-asked: the model cannot fix it by being told)
            answer(INVALID),  # r3.s0.a0: rejected (no plan can run) -> re-asked with the reason
            Reply(content='```json\n{"plans": [{"plan": {"tpp": 2}, "rationale": "x"}]}\n```'),  # r3.s0.a1 parse_error
            Reply(content='```json\n{"plans": [{"plan": {"tp": 2', finish_reason="length"),  # r4.s0.a0 truncated
        ]
    )
    db_url = f"sqlite:///{tmp_path / 'wf.db'}"
    res = run_agent(server, db_url, max_calls=6, max_rounds=10)
    calls = read_transcripts(Database(db_url), "p")
    assert [(c.call_key, c.outcome) for c in calls] == [
        ("r1.s0.a0", "no_code"),
        ("r1.s0.a1", "accepted"),
        ("r2.s0.a0", "duplicate"),
        ("r3.s0.a0", "rejected"),
        ("r3.s0.a1", "parse_error"),
        ("r4.s0.a0", "truncated"),
    ]
    assert "tpp" in calls[4].message and "Extra inputs" in calls[4].message
    # The re-ask carries the error; the next round's prompt shows what became of the earlier plans.
    assert "no ```json block" in server.requests[1]["messages"][-1]["content"]
    assert "none of the plans can run" in server.requests[4]["messages"][-1]["content"]
    assert "does_not_fit (needs" in server.requests[2]["messages"][-1]["content"]
    plans = [(json.dumps(p.plan, sort_keys=True), p.outcome) for p in res.proposals]
    assert plans == [
        (json.dumps(UNFIT, sort_keys=True), "does_not_fit"),
        (json.dumps(INVALID, sort_keys=True), "invalid"),
        (json.dumps(GOOD, sort_keys=True), "ranked"),
        (json.dumps(GOOD, sort_keys=True), "duplicate"),
        (json.dumps(INVALID, sort_keys=True), "invalid"),
    ]
    unfit = res.proposals[0]
    assert unfit.peak_mem_gb is not None and unfit.peak_mem_gb > UNFIT_LOWER_BOUND_GIB > 76.0
    assert unfit.rank is None and "usable 76.0" in unfit.message
    assert res.stop_reason == "calls" and res.calls == 6 == len(server.requests)


@pytest.mark.parametrize(
    ("settings", "llm", "reason", "requests"),
    [
        ({"max_calls": 2}, {}, "calls", 2),
        ({"max_tokens": 4000}, {}, "tokens", 2),  # 2,000 + 300 tokens per call: over 4,000 after the second
        ({"max_cost_usd": 0.03}, {"price_in": 10.0}, "cost", 2),  # 2,000 x $10/M = $0.02 per call
        ({"max_rounds": 3}, {}, "rounds", 3),  # one call per round (in_flight 1)
    ],
)
def test_budgets_stop_it_cleanly_and_say_which(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    scripted: Callable[..., ScriptedServer],
    settings: dict[str, Any],
    llm: dict[str, Any],
    reason: str,
    requests: int,
) -> None:
    monkeypatch.setenv("WF_TEST_KEY", KEY)
    replies = [answer({"tp": 8, "recompute": "full", "zero": z}) for z in (0, 1, 2, 3)]
    server = scripted(replies, default=answer({"tp": 4, "recompute": "full"}))
    db_url = f"sqlite:///{tmp_path / 'wf.db'}"
    res = run_agent(server, db_url, llm=llm, **{"max_calls": 50, "max_rounds": 50, **settings})
    assert res.stop_reason == reason and f"stopped by {reason}" in res.note
    assert len(server.requests) == requests
    (run,) = read_runs(Database(db_url), "p")
    assert run["stop_reason"] == reason and run["calls"] == requests
    assert len(res.search.plans) >= 1  # the search still answers: a budget stops the agent, not the search


def test_enqueued_into_optuna_on_a_large_space(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, scripted: Callable[..., ScriptedServer]
) -> None:
    monkeypatch.setenv("WF_TEST_KEY", KEY)
    server = scripted([answer(GOOD)])
    res = run_agent(
        server, f"sqlite:///{tmp_path / 'wf.db'}", options=SearchOptions(method="optuna", trials=20), max_calls=1
    )
    assert res.search.method == "optuna"
    (p,) = res.proposals
    assert p.outcome == "ranked" and p.rank is not None
    (enq,) = res.search.enqueued
    assert enq.status == "ranked" and enq.plan.tp == 8 and enq.plan.recompute == "full"


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["plan", "search", "-m", MODEL, "-c", CLUSTER, *args])


def test_cli_without_llm_says_what_to_set_and_search_stays_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for var in ("WARPFORGE_LLM_CONFIG", "WARPFORGE_LLM_MODEL", "WARPFORGE_LLM_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    db = f"sqlite:///{tmp_path / 'wf.db'}"
    r = invoke("--proposer", "llm", "--db", db)
    assert r.exit_code == 2
    assert r.output.strip().count("\n") == 0 and "WARPFORGE_LLM_MODEL" in r.output
    r = invoke("--db", db, "--json")
    assert r.exit_code == 0 and "agent" not in json.loads(r.output)
    assert invoke("--llm-replay", "x", "--db", db).exit_code == 2  # --llm-replay needs --proposer llm


def test_replay_with_the_server_stopped_reaches_the_same_plans(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, scripted: Callable[..., ScriptedServer]
) -> None:
    server = scripted([Reply(content="no json"), answer(UNFIT, GOOD), answer(GOOD2, INVALID), answer(GOOD)])
    configure(monkeypatch, tmp_path, server)
    db = f"sqlite:///{tmp_path / 'wf.db'}"
    first = invoke("--proposer", "llm", "--db", db, "--campaign", "orig", "--max-calls", "4", "--json")
    assert first.exit_code == 0, first.output
    server.stop()
    monkeypatch.delenv("WARPFORGE_LLM_CONFIG")
    again = invoke("--proposer", "llm", "--db", db, "--campaign", "again", "--llm-replay", "orig", "--json")
    assert again.exit_code == 0, again.output
    a, b = json.loads(first.output), json.loads(again.output)

    def same(doc: dict[str, Any]) -> Any:
        props = [
            {
                k: p[k]
                for k in (
                    "call_key",
                    "slot",
                    "plan",
                    "plan_key",
                    "outcome",
                    "message",
                    "rationale",
                    "rank",
                    "step_time_s",
                )
            }
            for p in doc["agent"]["proposals"]
        ]
        ranked = [(p["rank"], p["prediction"]["plan"]) for p in doc["plans"]]
        return props, ranked, doc["agent"]["outcomes"], doc["agent"]["stop_reason"], doc["agent"]["calls"]

    assert same(a) == same(b)
    assert a["agent"]["stop_reason"] == "calls"
    assert a["agent"]["outcomes"] == {"no_code": 1, "accepted": 2, "duplicate": 1}
    assert b["agent"]["replay_mismatches"] == []
    assert all(p["replayed"] for p in b["agent"]["proposals"])
    assert a["agent"]["cost_usd"] == pytest.approx(b["agent"]["cost_usd"])
    calls = read_transcripts(Database(db), "again")
    assert [c.call_key for c in calls] == [c.call_key for c in read_transcripts(Database(db), "orig")]
    assert all(c.replayed for c in calls)


def test_calls_in_flight_together_and_duplicates_settle_in_slot_order(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, scripted: Callable[..., ScriptedServer]
) -> None:
    monkeypatch.setenv("WF_TEST_KEY", KEY)
    server = scripted([], default=answer(GOOD, delay_s=0.5))  # both slots answer the same plan
    res = run_agent(server, f"sqlite:///{tmp_path / 'wf.db'}", in_flight=2, max_calls=2)
    assert server.max_concurrent == 2  # asked concurrently, not one after the other
    # Whichever answer arrived first, slot 0's plan is the one ranked and slot 1's the duplicate.
    assert [(p.call_key, p.outcome) for p in res.proposals] == [("r1.s0.a0", "ranked"), ("r1.s1.a0", "duplicate")]


def test_failed_calls_are_recorded_and_stop_it_after_three_in_a_row(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, scripted: Callable[..., ScriptedServer]
) -> None:
    monkeypatch.setenv("WF_TEST_KEY", KEY)
    server = scripted([], default=Reply(status=503))
    db_url = f"sqlite:///{tmp_path / 'wf.db'}"
    res = run_agent(server, db_url, max_calls=10)
    assert res.stop_reason == "call_failures" and res.outcomes == {"call_failed": 3}
    assert len(server.requests) == 3  # max_retries 0: one request per call
    calls = read_transcripts(Database(db_url), "p")
    assert [c.outcome for c in calls] == ["call_failed"] * 3 and "HTTP 503" in calls[0].message
    assert res.proposals == [] and len(res.search.plans) >= 1
    # Replayed (no server): the same failures, the same stop.
    server.stop()
    from warpforge.parallel.plan_agent.agent import ReplayClient

    llm = LLMConfig(models=(ModelConfig(name="scripted", model="planner"),))
    agent = PlanAgent(
        load_model(MODEL),
        load_cluster(CLUSTER),
        SearchOptions(),
        PlanAgentSettings(max_calls=10),
        llm=llm,
        db_url=db_url,
        campaign="p-replay",
        client=ReplayClient(calls, llm),
        replay_of="p",
    )
    again = asyncio.run(agent.run())
    assert (again.stop_reason, again.outcomes) == ("call_failures", {"call_failed": 3})
    assert [c.message for c in read_transcripts(Database(db_url), "p-replay")] == [c.message for c in calls]


def test_transcripts_show_the_proposed_plans_and_never_read_markup_in_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, scripted: Callable[..., ScriptedServer]
) -> None:
    monkeypatch.setenv("WF_TEST_KEY", KEY)
    body = {"plans": [{"plan": GOOD, "rationale": "[red]TP8[/] [/]"}]}
    server = scripted([Reply(content=f"```json\n{json.dumps(body)}\n```")])
    db = f"sqlite:///{tmp_path / 'wf.db'}"
    run_agent(server, db, max_calls=1)
    out = CliRunner().invoke(app, ["agent", "transcripts", "p", "--db", db], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "[red]TP8[/] [/]" in out.output and "plans proposed in p" in out.output
    doc = json.loads(CliRunner().invoke(app, ["agent", "transcripts", "p", "--db", db, "--json"]).output)
    (plan,) = doc["plans"]
    assert (plan["outcome"], plan["rationale"], plan["call_key"]) == ("ranked", "[red]TP8[/] [/]", "r1.s0.a0")


def test_a_run_that_fails_after_its_campaign_row_marks_it_failed(
    monkeypatch: pytest.MonkeyPatch, db_url: str, scripted: Callable[..., ScriptedServer]
) -> None:
    # Once the row exists any failure (here: storing the ranked plans) must not leave it "running" forever.
    import warpforge.parallel.plan_agent.store as plan_store
    from warpforge.db.models import Campaign

    def broken(*args: Any, **kwargs: Any) -> int:
        raise RuntimeError("disk full")

    monkeypatch.setattr(plan_store, "store_ranked_plans", broken)
    monkeypatch.setenv("WF_TEST_KEY", KEY)
    server = scripted([answer(GOOD)])
    with pytest.raises(RuntimeError, match="disk full"):
        run_agent(server, db_url, campaign="broken", max_calls=1)
    with Database(db_url).session() as s:
        assert s.scalar(select(Campaign.status).where(Campaign.name == "broken")) == "failed"
