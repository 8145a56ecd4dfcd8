"""The Agent page, its API and the variant page's transcript, on the seeded database whose LLM calls were
written by the agent's own transcript writer (expected numbers: seed.CALLS, summed by hand below)."""

from __future__ import annotations

from typing import Any

import pytest
import seed


def test_usage_per_campaign_and_per_model_and_outcome_mix(client: Any) -> None:
    view = client.get("/api/agent").json()
    total = view["total"]
    # 1000+800+500+300 prompt tokens, 200+100+50+30 completion tokens, $0.0036+0.0024+0.0010+0.0009.
    assert (total["calls"], total["prompt_tokens"], total["completion_tokens"]) == (4, 2600, 380)
    assert total["cost_usd"] == pytest.approx(0.0079)
    assert total["outcomes"] == {"accepted": 2, "no_code": 1, "rejected": 1}
    per_campaign = {u["campaign"]: u for u in view["per_campaign"]}
    assert per_campaign["seeded"]["calls"] == 3 and per_campaign["seeded"]["cost_usd"] == pytest.approx(0.0070)
    assert per_campaign["live-one"]["outcomes"] == {"accepted": 1}
    per_model = {u["model"]: u for u in view["per_model"]}
    assert (per_model["coder-a"]["calls"], per_model["coder-a"]["prompt_tokens"]) == (2, 1800)
    assert per_model["coder-b"]["cost_usd"] == pytest.approx(0.0019)
    assert per_model["coder-b"]["outcomes"] == {"accepted": 1, "no_code": 1}
    (run,) = view["runs"]["items"]
    assert (run["campaign"], run["stop_reason"], run["calls"]) == ("seeded", "calls", 3)
    mix = {t["name"]: t["y"] for t in view["figure"]["spec"]["data"]}
    labels = view["figure"]["spec"]["data"][0]["x"]
    assert dict(zip(labels, mix["accepted"])) == {"live-one": 1, "seeded": 1}


def test_calls_are_paginated_newest_first_and_filter(client: Any, seeded: dict[str, Any]) -> None:
    page = client.get("/api/agent/calls", params={"limit": 3}).json()
    assert page["total"] == 4 and [c["id"] for c in page["items"]] == sorted(seeded["calls"], reverse=True)[:3]
    rest = client.get("/api/agent/calls", params={"limit": 3, "offset": 3}).json()["items"]
    assert [c["id"] for c in rest] == [min(seeded["calls"])]
    assert client.get("/api/agent/calls", params={"model": "coder-b"}).json()["total"] == 2
    only = client.get("/api/agent/calls", params={"campaign": "seeded", "outcome": "rejected"}).json()
    assert only["total"] == 1 and only["items"][0]["prompt_tokens"] == 800
    assert "messages" not in only["items"][0]  # list rows carry no text
    filtered = client.get("/api/agent", params={"campaign": "live-one"}).json()
    assert filtered["total"]["calls"] == 1 and filtered["calls"]["total"] == 1
    html = client.get("/agent", params={"model": "coder-a"}).text
    assert html.count('class="call-link"') == 2
    assert client.get("/api/agent/calls", params={"limit": 5000}).status_code == 422


def test_one_call_has_its_messages_and_answer_escaped(client: Any, seeded: dict[str, Any]) -> None:
    first = seeded["calls"][0]
    t = client.get(f"/api/agent/calls/{first}").json()
    assert [m["role"] for m in t["messages"]] == ["system", "user"]
    assert t["call"]["variant_hash"] == seeded["child"] and t["reasoning"].startswith("fewer warps")
    html = client.get(f"/agent/calls/{first}").text
    assert seed.CALL_PAYLOAD not in html and "&lt;script&gt;document.body.dataset.pwned" in html
    assert client.get("/agent/calls/999999").status_code == 404
    assert client.get("/api/agent/calls/999999").status_code == 404


def test_variant_page_shows_the_transcript_of_the_call_that_produced_it(client: Any, seeded: dict[str, Any]) -> None:
    v = client.get(f"/api/variants/{seeded['child']}").json()
    assert v["transcript"]["call"]["id"] == seeded["calls"][0]
    assert v["transcript"]["call"]["outcome"] == "accepted" and "Here is the variant" in v["transcript"]["content"]
    html = client.get(f"/variants/{seeded['child']}").text
    assert 'id="transcript"' in html and "You write Triton kernels." in html
    assert seed.CALL_PAYLOAD not in html  # the answer's payload is text, not markup
    parent = client.get(f"/variants/{seeded['parent']}").text  # a template: no transcript
    assert 'id="transcript"' not in parent


def test_no_key_in_any_agent_page_or_answer(client: Any, seeded: dict[str, Any]) -> None:
    """The key was in the prompts, answers and reasoning the agent's writer stored: it was redacted there."""
    paths = [
        "/agent",
        "/api/agent",
        "/api/agent/calls",
        f"/variants/{seeded['child']}",
        f"/api/variants/{seeded['child']}",
    ]
    paths += [f"/agent/calls/{i}" for i in seeded["calls"]] + [f"/api/agent/calls/{i}" for i in seeded["calls"]]
    for p in paths:
        text = client.get(p).text
        assert seed.SECRET not in text, p
    assert "[redacted]" in client.get(f"/agent/calls/{seeded['calls'][0]}").text


def test_a_key_in_the_dashboards_environment_is_scrubbed_from_shown_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """A transcript stored by a process that never registered the key: the page still does not show it."""
    from warpforge.dashboard.redact import scrub

    monkeypatch.setenv("VLLM_API_KEY", "sk-live-0123456789abcdef")
    monkeypatch.setenv("SHORT_KEY", "EMPTY")  # placeholder keys are too short to be secrets (agent/secrets.py)
    assert scrub("auth sk-live-0123456789abcdef failed, EMPTY") == "auth [redacted] failed, EMPTY"
    assert scrub("nothing to hide") == "nothing to hide"
