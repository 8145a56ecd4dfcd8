"""The LLM client through real HTTP against the scripted server: reasoning apart, truncation, usage and cost,
the client's own retries and timeout, parameter names, configuration, and no key in any error."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import KEY, config_for, model_for

from warpforge.agent.client import LLMCallError, LLMResponse, OpenAIChatClient, split_reasoning
from warpforge.agent.config import HOW_TO_CONFIGURE, LLMConfigError, load_llm_config
from warpforge.agent.scripted import Reply, ScriptedServer

ENV = {"WF_TEST_KEY": KEY}
HELLO = [{"role": "user", "content": "write a kernel"}]


def ask(server: ScriptedServer, **model_kw: Any) -> LLMResponse:
    async def go() -> LLMResponse:
        config = config_for(server, **model_kw)
        client = OpenAIChatClient(config, env=ENV)
        try:
            return await client.complete(HELLO, config.models[0])
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_think_block_is_reasoning_not_content(scripted: Callable[..., ScriptedServer]) -> None:
    server = scripted([Reply(content="<think>try BLOCK=1024\n```python\nx=1\n```</think>Final answer here")])
    answer = ask(server)
    assert answer.content == "Final answer here"
    assert "try BLOCK=1024" in answer.reasoning and "```" not in answer.content
    assert server.auth_headers == [f"Bearer {KEY}"]  # the key is sent to the server, and only there


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_fields_are_kept_apart(scripted: Callable[..., ScriptedServer], field: str) -> None:
    server = scripted([Reply(content="the code", reasoning="because tiling", reasoning_field=field)])
    answer = ask(server)
    assert (answer.content, answer.reasoning) == ("the code", "because tiling")


def test_length_finish_is_truncated_and_usage_prices_the_call(scripted: Callable[..., ScriptedServer]) -> None:
    server = scripted(
        [Reply(content="```python\ndef launch(", finish_reason="length", prompt_tokens=1000, completion_tokens=500)]
    )
    answer = ask(server, price_in=1.0, price_out=2.0)
    assert answer.truncated and answer.finish_reason == "length"
    assert (answer.prompt_tokens, answer.completion_tokens) == (1000, 500)
    # 1000 * $1/M + 500 * $2/M = $0.002, computed by hand.
    assert answer.cost_usd == pytest.approx(0.002)


def test_429_and_503_are_retried_by_the_client_itself(scripted: Callable[..., ScriptedServer]) -> None:
    server = scripted([Reply(status=429), Reply(status=503), Reply(content="ok")])
    answer = ask(server, max_retries=2)
    assert answer.content == "ok"
    assert len(server.requests) == 3


def test_retries_are_bounded_by_max_retries(scripted: Callable[..., ScriptedServer]) -> None:
    server = scripted([Reply(status=429)] * 5)
    with pytest.raises(LLMCallError) as info:
        ask(server, max_retries=1)
    assert info.value.kind == "rate_limited"
    assert len(server.requests) == 2  # one try + one retry: no second retry loop around the client


def test_slow_answer_past_the_timeout_fails_cleanly(scripted: Callable[..., ScriptedServer]) -> None:
    server = scripted([Reply(content="late", delay_s=3.0)])
    with pytest.raises(LLMCallError) as info:
        ask(server, timeout_s=0.3, max_retries=0)
    assert info.value.kind == "timeout"
    assert "timeout_s" in str(info.value)


def test_token_parameter_name_and_temperature_are_configured_not_guessed(
    scripted: Callable[..., ScriptedServer],
) -> None:
    server = scripted([Reply(content="a"), Reply(content="b")])
    ask(server, token_param="max_completion_tokens", max_tokens=1234, temperature=None)
    ask(server, token_param="max_tokens", max_tokens=99, temperature=0.2)
    first, second = server.requests
    assert first["max_completion_tokens"] == 1234 and "max_tokens" not in first and "temperature" not in first
    assert second["max_tokens"] == 99 and second["temperature"] == 0.2 and "max_completion_tokens" not in second
    assert "tools" not in first and "response_format" not in first  # opt-in only


def test_the_key_never_reaches_an_error_or_a_log(
    scripted: Callable[..., ScriptedServer], caplog: pytest.LogCaptureFixture
) -> None:
    # A server that echoes the key back in its error body (some proxies do).
    server = scripted([Reply(status=401, content=f"invalid api key {KEY}")])
    caplog.set_level(logging.DEBUG)
    with pytest.raises(LLMCallError) as info:
        ask(server, max_retries=0)
    assert info.value.kind == "auth"
    assert KEY not in str(info.value) and "[redacted]" in str(info.value)
    assert KEY not in caplog.text


def test_split_reasoning_handles_unclosed_and_headless_blocks() -> None:
    assert split_reasoning("<think>still thinking, cut off") == ("", "still thinking, cut off")
    assert split_reasoning("step 1, step 2</think>answer") == ("answer", "step 1, step 2")
    assert split_reasoning("plain", "field") == ("plain", "field")


def test_config_from_environment_and_file(tmp_path: Path, scripted: Callable[..., ScriptedServer]) -> None:
    env = {"WARPFORGE_LLM_MODEL": "qwen", "WARPFORGE_LLM_BASE_URL": "http://127.0.0.1:9/v1"}
    cfg = load_llm_config(env=env)
    assert cfg.models[0].model == "qwen" and cfg.models[0].base_url == "http://127.0.0.1:9/v1"
    file = tmp_path / "models.yaml"
    file.write_text(
        "models:\n  - {name: a, model: m1, base_url: 'http://x/v1', token_param: max_completion_tokens,"
        " price_in: 0.5, price_out: 1.5, weight: 3}\n  - {model: m2, temperature: null}\n"
    )
    cfg = load_llm_config(env={"WARPFORGE_LLM_CONFIG": str(file)})
    assert [m.label for m in cfg.models] == ["a", "m2"]
    assert cfg.models[0].token_param == "max_completion_tokens" and cfg.models[0].weight == 3
    assert cfg.models[1].temperature is None
    public = model_for(scripted([])).public()
    assert public["api_key_env"] == "WF_TEST_KEY" and KEY not in str(public)  # the variable's name, never the key


def test_missing_or_malformed_config_says_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(LLMConfigError) as info:
        load_llm_config(env={})
    assert str(info.value) == HOW_TO_CONFIGURE and "WARPFORGE_LLM_MODEL" in str(info.value)
    bad = tmp_path / "bad.yaml"
    bad.write_text("models:\n  - {model: m, token_limit_param: max_tokens}\n")
    with pytest.raises(LLMConfigError, match="malformed"):
        load_llm_config(env={"WARPFORGE_LLM_CONFIG": str(bad)})
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY"):
        load_llm_config(env={"WARPFORGE_LLM_MODEL": "gpt"})


def test_structured_output_is_opt_in_and_parsed(scripted: Callable[..., ScriptedServer]) -> None:
    import json

    from warpforge.agent.parse import check_answer

    source = "TASK = 'double'\nSPACE = {'B': [1]}\ndef launch(x, **p):\n    return x\n"
    server = scripted([Reply(content=json.dumps({"rationale": "one pass", "source": source}))])
    answer = ask(server, structured_output=True)
    sent = server.requests[0]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["schema"]["required"] == ["rationale", "source"]
    parsed = check_answer(answer.content, task="double", finish_reason=answer.finish_reason, seen=set())
    assert parsed.outcome == "accepted" and parsed.rationale == "one pass"
    assert parsed.variant is not None and parsed.variant.source == source
