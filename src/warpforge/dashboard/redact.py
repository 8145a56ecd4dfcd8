"""Scrubbing key-like values out of the text the dashboard shows (LLM transcripts), defence in depth.

The agent stored every text redacted (agent/secrets.py); this replaces, at render time, the value of any
key-like environment variable of the dashboard's own process (``OPENAI_API_KEY``, ``*_API_KEY``, ``*_TOKEN``,
...), so that a key set here never reaches a page even if a transcript was written without it registered.

Example::

    >>> scrub("auth sk-abc123456789 failed", ["sk-abc123456789"])
    'auth [redacted] failed'
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from warpforge import keys
from warpforge.agent.secrets import MIN_SECRET_LEN, REDACTED  # one definition of a secret and its mark


def _env_secrets() -> list[str]:
    # Key names as warpforge/keys.py defines them, from the environment and the keys it holds out of it.
    values = {v for k, v in keys.environ().items() if keys.is_key_name(k) and len(v) >= MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)


def scrub(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with every key-like environment value of this process replaced by ``[redacted]``."""
    for s in _env_secrets() if secrets is None else secrets:
        if s in text:
            text = text.replace(s, REDACTED)
    return text


def scrub_transcript(t: Any) -> Any:
    """A transcript (``LLMTranscript``) with its texts scrubbed; None stays None."""
    if t is None:
        return None
    secrets = _env_secrets()
    if not secrets:
        return t
    messages = tuple({"role": m["role"], "content": scrub(m["content"], secrets)} for m in t.messages)
    call = replace(t.call, message=scrub(t.call.message, secrets))
    return replace(
        t, call=call, messages=messages, content=scrub(t.content, secrets), reasoning=scrub(t.reasoning, secrets)
    )


def scrub_calls(page: Any) -> Any:
    """A page of ``LLMCallRow`` with each row's message scrubbed."""
    secrets = _env_secrets()
    if not secrets:
        return page
    return replace(page, items=tuple(replace(c, message=scrub(c.message, secrets)) for c in page.items))
