"""The llm proposer against the scripted server, without a campaign: seeding from templates, concurrent
proposals with lineage, one re-ask with the error, duplicates dropped, budgets that stop it with the reason,
and seeded decisions."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from agent_helpers import KEY
from agent_history import template_history

from warpforge.agent.config import LLMConfigError
from warpforge.agent.evolution import LLMProposer
from warpforge.agent.proposers import Candidate, History, get_proposer
from warpforge.agent.scripted import Reply, ScriptedServer, code_reply
from warpforge.kernels.task import get_task

ANSWERS = Path(__file__).parent / "answers"
GOOD = (ANSWERS / "softmax_good.py").read_text()


def configure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: ScriptedServer, **model: Any) -> None:
    file = tmp_path / "models.yaml"
    file.write_text(
        yaml.safe_dump(
            {
                "models": [
                    {
                        "name": "scripted",
                        "model": "coder",
                        "base_url": server.url,
                        "api_key_env": "WF_TEST_KEY",
                        "max_retries": 0,
                        **model,
                    }
                ]
            }
        )
    )
    monkeypatch.setenv("WARPFORGE_LLM_CONFIG", str(file))
    monkeypatch.setenv("WF_TEST_KEY", KEY)


def run_round(proposer: LLMProposer, history: History) -> list[Candidate]:
    async def go() -> list[Candidate]:
        try:
            return await proposer.propose(get_task("softmax"), history)
        finally:
            await proposer.aclose()

    return asyncio.run(go())


def test_no_llm_configured_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("WARPFORGE_LLM_CONFIG", "WARPFORGE_LLM_MODEL", "WARPFORGE_LLM_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(LLMConfigError, match="set WARPFORGE_LLM_MODEL"):
        get_proposer("llm", {})


def test_round_zero_seeds_templates_without_asking(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, scripted: Callable[..., ScriptedServer]
) -> None:
    server = scripted([])
    configure(monkeypatch, tmp_path, server)
    proposer = get_proposer("llm", {})
    out = run_round(proposer, History.empty("softmax", "interpret", 20))  # type: ignore[arg-type]
    assert [c.variant.name for c in out] == ["multi_row", "online", "single_pass"]
    assert {c.origin.kind for c in out} == {"template"} and server.requests == []


def test_a_round_proposes_concurrently_with_lineage_and_one_reask(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, scripted: Callable[..., ScriptedServer]
) -> None:
    # Each first answer takes 0.5 s: two proposals in flight overlap at the server.
    prose = Reply(content="I would use an online softmax with two passes.", delay_s=0.5)
    hack = code_reply((ANSWERS / "softmax_hack_torch.py").read_text(), delay_s=0.5)
    # Arrival order of concurrent requests decides who gets which reply: both slots get one bad answer
    # first (prose / a torch call), then a good one on their re-ask (two different good variants).
    server = scripted([prose, hack, code_reply(GOOD), code_reply(GOOD.replace("[1, 4]", "[2, 8]"))])
    configure(monkeypatch, tmp_path, server, price_in=1.0, price_out=1.0)
    proposer: Any = get_proposer("llm", {"in_flight": 2, "seed": 7})
    history = template_history("softmax")
    out = run_round(proposer, history)
    assert len(server.requests) == 4 and len(out) == 2
    assert server.max_concurrent == 2  # both proposals were in flight at once
    assert {c.origin.kind for c in out} == {"llm"} and all(c.variant.task == "softmax" for c in out)
    template_hashes = {v.variant.source_hash for v in history.variants}
    assert all(len(c.origin.parents) == 1 and c.origin.parents[0] in template_hashes for c in out)
    reasks = [r for r in server.requests if len(r["messages"]) == 4]
    assert len(reasks) == 2  # system, user, the bad answer, and the error
    errors = " ".join(r["messages"][3]["content"] for r in reasks)
    assert "no_code" in errors and "torch_compute_call" in errors
    assert proposer.meter.outcomes == {"no_code": 1, "rejected": 1, "accepted": 2}
    assert proposer.meter.calls == 4 and proposer.meter.cost_usd > 0


def test_duplicates_of_known_variants_are_dropped_without_reask(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, scripted: Callable[..., ScriptedServer]
) -> None:
    history = template_history("softmax")
    template = history.variants[1].variant.source
    server = scripted([code_reply("# same, reformatted\n" + template)])
    configure(monkeypatch, tmp_path, server)
    proposer: Any = get_proposer("llm", {"in_flight": 1})
    assert run_round(proposer, history) == []
    assert proposer.meter.outcomes == {"duplicate": 1} and len(server.requests) == 1


@pytest.mark.parametrize(
    ("options", "model", "reason"),
    [
        ({"max_calls": 2}, {}, "calls"),
        ({"max_cost_usd": 0.01}, {"price_in": 10.0, "price_out": 10.0}, "cost"),
        ({"max_tokens": 100}, {}, "tokens"),
        ({"max_rounds": 1}, {}, "rounds"),
    ],
)
def test_budgets_stop_the_agent_and_say_which(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    scripted: Callable[..., ScriptedServer],
    options: dict[str, Any],
    model: dict[str, Any],
    reason: str,
) -> None:
    server = scripted([], default=code_reply(GOOD, prompt_tokens=1000, completion_tokens=1000))
    configure(monkeypatch, tmp_path, server, **model)
    proposer: Any = get_proposer("llm", {"in_flight": 1, **options})
    history = template_history("softmax")
    rounds = 0
    while proposer.wants_more(history) and rounds < 10:
        asyncio.run(proposer.propose(get_task("softmax"), history))
        rounds += 1
    assert proposer.meter.stop_reason == reason
    assert f"stopped by {reason}" in proposer.note
    if reason == "calls":
        assert len(server.requests) == 2
    if reason == "rounds":  # the one round allowed is asked (in_flight 1: one call), not stopped before it
        assert len(server.requests) == 1


def test_speed_of_light_stops_the_agent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, scripted: Callable[..., ScriptedServer]
) -> None:
    configure(monkeypatch, tmp_path, scripted([]))
    proposer: Any = get_proposer("llm", {"sol_stop_pct": 55.0})
    assert not proposer.wants_more(template_history("softmax"))  # the best template is at 60%
    assert proposer.meter.stop_reason == "speed_of_light"


def test_same_answers_same_decisions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, scripted: Callable[..., ScriptedServer]
) -> None:
    bodies = []
    for seed in (3, 3):
        server = scripted([], default=code_reply(GOOD))
        configure(monkeypatch, tmp_path, server)
        run_round(get_proposer("llm", {"in_flight": 3, "seed": seed}), template_history("softmax"))  # type: ignore
        bodies.append(sorted(r["messages"][1]["content"] for r in server.requests))
    assert bodies[0] == bodies[1]  # same seed, same history: the same parents, the same prompts
    assert len(bodies[0]) == 3


def test_an_unreachable_server_is_a_failure_with_its_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Old: every call failed (call_failed 2), the campaign went on with the templates alone and `run` exited 0;
    # the reason was only in `agent transcripts --json`.
    import socket

    with socket.socket() as s:  # a port nobody listens on: bound, then closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    configure(monkeypatch, tmp_path, type("Gone", (), {"url": f"http://127.0.0.1:{port}/v1"})())  # type: ignore[arg-type]
    proposer: Any = get_proposer("llm", {"in_flight": 1})
    assert proposer.failure is None  # nothing asked yet: nothing failed
    assert run_round(proposer, template_history("softmax")) == []
    assert proposer.meter.calls >= 1 and proposer.meter.outcomes == {"call_failed": proposer.meter.calls}
    line = proposer.failure
    assert line.startswith(f"every LLM call failed ({proposer.meter.calls} of {proposer.meter.calls}): ")
    assert f"127.0.0.1:{port}" in line and "\n" not in line


def test_one_answer_is_not_a_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, scripted: Callable[..., ScriptedServer]
) -> None:
    server = scripted([code_reply(GOOD)])
    configure(monkeypatch, tmp_path, server)
    proposer: Any = get_proposer("llm", {"in_flight": 1, "max_calls": 1})
    run_round(proposer, template_history("softmax"))
    assert proposer.meter.calls == 1 and proposer.failure is None
