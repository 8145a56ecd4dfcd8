"""The LLM client: Chat Completions through ``openai.AsyncOpenAI``, one call in, one checked answer out.

Chat Completions is the one protocol OpenAI, vLLM, SGLang, Ollama and llama.cpp all serve. Retries and
timeouts are the client's own (``max_retries``, ``timeout`` per model): there is no second retry loop
here, and nothing blocks in a thread a timeout cannot stop. Every answer is read with its
``finish_reason`` (``length`` = truncated) and ``usage`` (tokens, cost); reasoning arriving as a
``reasoning``/``reasoning_content`` field or as ``<think>`` blocks in the content is kept apart from the
final content, which is the only place code is taken from. Errors carry no key (secrets.redact).

Example::

    >>> client = OpenAIChatClient(load_llm_config())                         # doctest: +SKIP
    >>> answer = await client.complete([{"role": "user", "content": "hi"}])  # doctest: +SKIP
    >>> answer.content, answer.finish_reason, answer.prompt_tokens            # doctest: +SKIP
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from warpforge.agent.config import LLMConfig, ModelConfig
from warpforge.agent.secrets import install_log_filter, redact, register_secret
from warpforge.errors import WarpforgeError

log = logging.getLogger("warpforge.agent")

Message = Mapping[str, str]


@dataclass(frozen=True)
class LLMResponse:
    """One answer, checked: final content and reasoning apart, tokens, latency and cost."""

    model: str  # the configured label
    content: str  # final content, reasoning removed
    reasoning: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cost_usd: float
    params: Mapping[str, Any] = field(default_factory=dict)  # request parameters sent (never the key)

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"

    @classmethod
    def failed(cls, model: str, params: Mapping[str, Any], latency_s: float = 0.0) -> LLMResponse:
        """What a call that failed (after the client's retries) is stored with: no answer, no tokens."""
        return cls(model, "", "", "", 0, 0, latency_s, 0.0, dict(params))


class LLMCallError(WarpforgeError, RuntimeError):
    """A call that failed after the client's own retries; ``kind`` is machine-readable, the text has no key."""

    def __init__(
        self, kind: str, message: str, model: str = "", params: Mapping[str, Any] | None = None, latency_s: float = 0.0
    ) -> None:
        super().__init__(redact(message))
        self.kind, self.model, self.params, self.latency_s = kind, model, dict(params or {}), latency_s


class ChatClient(Protocol):
    """What the proposer needs: pick a model, complete a conversation (live or replayed)."""

    def pick(self, rng: random.Random) -> ModelConfig: ...

    async def complete(
        self, messages: Sequence[Message], model: ModelConfig, key: str = "", schema: Mapping[str, Any] | None = None
    ) -> LLMResponse: ...

    async def aclose(self) -> None: ...


_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.S)


def split_reasoning(content: str, reasoning: str = "") -> tuple[str, str]:
    """(final content, reasoning): ``<think>`` blocks (closed or cut off) move out of the content.

    A content that starts mid-thought (``...</think>answer``: servers that strip the opening tag) keeps
    only what follows the closing tag.
    """
    parts = [reasoning] if reasoning else []
    if "</think>" in content and "<think>" not in content.split("</think>", 1)[0]:
        head, content = content.split("</think>", 1)
        parts.append(head.strip())
    parts += [m.strip() for m in _THINK.findall(content)]
    final = _THINK.sub("", content).strip()
    return final, "\n\n".join(p for p in parts if p)


# Structured output (opt-in per model): the answer is a JSON object {rationale, source}; parse.py reads it.
VARIANT_SCHEMA: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "variant_file",
        "strict": True,
        "schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["rationale", "source"],
            "properties": {"rationale": {"type": "string"}, "source": {"type": "string"}},
        },
    },
}


def request_params(model: ModelConfig, schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The sampling parameters sent for ``model`` (stored with each transcript); ``schema`` is the
    structured-output format for models that opted in (default: a variant file)."""
    params: dict[str, Any] = {"model": model.model, model.token_param: model.max_tokens}
    if model.temperature is not None:
        params["temperature"] = model.temperature
    if model.top_p is not None:
        params["top_p"] = model.top_p
    if model.structured_output:
        params["response_format"] = dict(schema or VARIANT_SCHEMA)
    return params


def pick_model(models: Sequence[ModelConfig], rng: random.Random) -> ModelConfig:
    """A model drawn by weight; always exactly one draw from ``rng``, so seeded decisions after it line up
    whether one model or several are configured (and in replay)."""
    x = rng.random() * sum(m.weight for m in models)
    for m in models:
        x -= m.weight
        if x < 0:
            return m
    return models[-1]


class OpenAIChatClient:
    """One ``AsyncOpenAI`` per configured model; ``pick`` samples a model by its weight."""

    def __init__(self, config: LLMConfig, env: Mapping[str, str] | None = None) -> None:
        from openai import AsyncOpenAI  # lazy: importing openai costs ~0.3 s and the template path needs none

        self.config = config
        self._clients: dict[str, Any] = {}
        for m in config.models:
            key = m.api_key(env)
            register_secret(key)
            # Local servers (vLLM, SGLang, Ollama) take any key, but the client insists on one.
            self._clients[m.label] = AsyncOpenAI(
                base_url=m.base_url, api_key=key or "EMPTY", timeout=m.timeout_s, max_retries=m.max_retries
            )
        install_log_filter()

    def pick(self, rng: random.Random) -> ModelConfig:
        return pick_model(self.config.models, rng)

    async def complete(
        self, messages: Sequence[Message], model: ModelConfig, key: str = "", schema: Mapping[str, Any] | None = None
    ) -> LLMResponse:
        import openai

        params = request_params(model, schema)
        started = time.monotonic()
        try:
            resp = await self._clients[model.label].chat.completions.create(
                messages=[dict(m) for m in messages], extra_body=model.extra_body or None, **params
            )
        except openai.APITimeoutError as exc:
            raise LLMCallError(
                "timeout",
                f"{model.label}: no answer within {model.timeout_s:g} s "
                f"({model.max_retries} retries): raise timeout_s or use a faster model",
                model.label,
                params,
                time.monotonic() - started,
            ) from exc
        except openai.APIConnectionError as exc:
            raise LLMCallError(
                "connection",
                f"{model.label}: cannot reach {model.base_url or 'api.openai.com'} ({exc}): is the server running?",
                model.label,
                params,
                time.monotonic() - started,
            ) from exc
        except openai.APIStatusError as exc:
            kind = {401: "auth", 403: "auth", 404: "not_found", 429: "rate_limited"}.get(
                exc.status_code, "server_error" if exc.status_code >= 500 else "bad_request"
            )
            hint = {
                "auth": "check the API key variable named by api_key_env",
                "not_found": "check base_url and the model id",
                "rate_limited": "lower in_flight or wait",
                "bad_request": "check token_param/temperature for this model",
            }.get(kind, "retry later")
            raise LLMCallError(
                kind,
                f"{model.label}: HTTP {exc.status_code} after {model.max_retries} retries: "
                f"{_short(exc.message)}; {hint}",
                model.label,
                params,
                time.monotonic() - started,
            ) from exc
        latency = time.monotonic() - started
        install_log_filter()  # loggers the first request created (httpx's, the transport's) get the filter too
        if not resp.choices:
            raise LLMCallError("empty", f"{model.label}: answer without choices", model.label, params, latency)
        choice = resp.choices[0]
        msg = choice.message
        extra = getattr(msg, "model_extra", None) or {}
        raw_reasoning = extra.get("reasoning_content") or extra.get("reasoning") or ""
        content, reasoning = split_reasoning(msg.content or "", str(raw_reasoning))
        usage = resp.usage
        p_tok = int(getattr(usage, "prompt_tokens", 0) or 0)
        c_tok = int(getattr(usage, "completion_tokens", 0) or 0)
        finish = choice.finish_reason or "unknown"
        if finish == "length":
            log.info("%s: answer truncated at %d completion tokens", model.label, c_tok)
        return LLMResponse(
            model.label, content, reasoning, finish, p_tok, c_tok, latency, model.cost_usd(p_tok, c_tok), params
        )

    async def aclose(self) -> None:
        for c in self._clients.values():
            await c.close()


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."
