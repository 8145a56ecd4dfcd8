"""The read layer over the agent's tables (db/agent_reads.py via Reader) on SQLite and PostgreSQL. The calls are
written by the agent's own transcript writer (agent/transcripts.store_call/store_run); the expected sums are
worked by hand from the numbers below."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from warpforge.db.queries import Reader
from warpforge.db.session import Database

KEY = "sk-reads-0a1b2c3d4e5f6789"
# (campaign, model, outcome, prompt tokens, completion tokens, USD, produced variant)
CALLS = [
    ("c1", "m-a", "accepted", 1000, 200, 0.0036, "v" * 64),
    ("c1", "m-a", "no_code", 400, 40, 0.0011, None),
    ("c1", "m-b", "rejected", 600, 60, 0.0017, "w" * 64),
    ("c2", "m-b", "accepted", 100, 10, 0.0003, "x" * 64),
    ("c2", "m-b", "truncated", 100, 500, 0.0042, None),
]


@pytest.fixture
def stored(db_url: str) -> dict[str, Any]:
    from warpforge.agent.client import LLMResponse
    from warpforge.agent.secrets import register_secret
    from warpforge.agent.transcripts import CallRecord, store_call, store_run
    from warpforge.db import store

    db = Database(db_url)
    db.upgrade()
    with db.session() as s:
        store.create_campaign(s, "c1", {"tasks": ["softmax"]})
        store.create_campaign(s, "c2", {"tasks": ["softmax"]})
    register_secret(KEY)
    ids = []
    for i, (camp, model, outcome, pt, ct, usd, variant) in enumerate(CALLS):
        rec = CallRecord(
            task="softmax",
            call_key=f"r{i}.s0.a0",
            messages=({"role": "system", "content": "sys"}, {"role": "user", "content": f"ask {KEY}"}),
            response=LLMResponse(model, f"answer {i}", "why", "stop", pt, ct, 0.5 * (i + 1), usd, {"temperature": 0.5}),
            outcome=outcome,
            parents=("p" * 64,),
            prompt_cut=("winners",),
            variant_hash=variant,
        )
        ids.append(store_call(db, camp, rec))
    store_run(db, "c1", "softmax", {"stop_reason": "calls", "calls": 3, "outcomes": {"accepted": 1}})
    store_run(db, "c2", "softmax", {"stop_reason": "", "calls": 2})
    db.engine.dispose()
    return {"url": db_url, "ids": ids}


def test_calls_page_newest_first_with_filters(stored: dict[str, Any]) -> None:
    r = Reader(stored["url"])
    page = r.llm_calls(limit=2)
    assert page.total == 5 and [c.id for c in page.items] == stored["ids"][::-1][:2] and page.has_more
    assert [c.id for c in r.llm_calls(offset=4, limit=2).items] == [stored["ids"][0]]
    c1 = r.llm_calls(campaign="c1")
    assert c1.total == 3 and {c.campaign for c in c1.items} == {"c1"}
    assert r.llm_calls(model="m-b", outcome="accepted").total == 1
    assert r.llm_calls(variant_hash="w" * 64).items[0].outcome == "rejected"
    assert r.llm_calls(campaign="nope").total == 0
    first = c1.items[-1]
    assert (first.prompt_tokens, first.completion_tokens, first.parents) == (1000, 200, ("p" * 64,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.outcome = "x"  # type: ignore[misc]


def test_usage_per_campaign_x_model_and_rollups(stored: dict[str, Any]) -> None:
    r = Reader(stored["url"])
    grid = {(u.campaign, u.model): u for u in r.llm_usage()}
    assert set(grid) == {("c1", "m-a"), ("c1", "m-b"), ("c2", "m-b")}
    assert (grid[("c1", "m-a")].calls, grid[("c1", "m-a")].prompt_tokens) == (2, 1400)
    assert grid[("c1", "m-a")].outcomes == {"accepted": 1, "no_code": 1}
    assert grid[("c1", "m-a")].latency_s == pytest.approx(0.5 + 1.0)
    (c2,) = r.llm_usage(campaign="c2", by="campaign")
    assert (c2.calls, c2.completion_tokens, c2.cost_usd) == (2, 510, pytest.approx(0.0045))
    models = {u.model: u for u in r.llm_usage(by="model")}
    assert models["m-b"].calls == 3 and models["m-b"].cost_usd == pytest.approx(0.0062)
    (total,) = r.llm_usage(by="all")
    assert (total.calls, total.prompt_tokens, total.completion_tokens) == (5, 2200, 810)
    assert total.cost_usd == pytest.approx(0.0109) and total.scope == "all"
    with pytest.raises(ValueError, match="rollup"):
        r.llm_usage(by="gpu")


def test_one_call_has_its_text_redacted_and_the_variant_finds_its_call(stored: dict[str, Any]) -> None:
    r = Reader(stored["url"])
    t = r.llm_call(stored["ids"][0])
    assert t is not None and [m["role"] for m in t.messages] == ["system", "user"]
    assert KEY not in t.messages[1]["content"] and "[redacted]" in t.messages[1]["content"]
    assert (t.content, t.reasoning, t.params, t.prompt_cut) == ("answer 0", "why", {"temperature": 0.5}, ("winners",))
    assert r.llm_call(10**6) is None
    # No stored variant row names these hashes: the newest call that produced the source answers.
    found = r.llm_call_for_variant("x" * 64)
    assert found is not None and found.call.id == stored["ids"][3]
    assert r.llm_call_for_variant("z" * 64) is None


def test_agent_runs_with_stop_reasons(stored: dict[str, Any]) -> None:
    runs = Reader(stored["url"]).agent_runs()
    assert runs.total == 2
    assert {(x.campaign, x.stop_reason, x.calls) for x in runs.items} == {("c1", "calls", 3), ("c2", "", 2)}
    assert Reader(stored["url"]).agent_runs(campaign="c1").items[0].outcomes == {"accepted": 1}
