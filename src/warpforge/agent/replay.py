"""Replay from stored transcripts: a ChatClient that answers each call by its key, with no network at all.

The plan agent (parallel/plan_agent/agent.py) asks its calls under deterministic keys
(``r<round>.s<slot>.a<attempt>``) with
prompts that hold no timings, so answering the same keys with the stored answers reaches the same decisions.
A prompt that differs from the stored one is logged and listed in ``mismatches`` (the evidence changed: a
different simulator or search); a key with no stored answer raises ``ReplayExhausted`` (the original stopped
there). A stored ``call_failed`` is raised again as the same ``LLMCallError``.

Example::

    >>> client = ReplayClient(read_transcripts(db, "plans-1"), LLMConfig(models=stored_models))  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import Any

from warpforge.agent.client import LLMCallError, LLMResponse, pick_model
from warpforge.agent.config import LLMConfig, ModelConfig
from warpforge.agent.transcripts import CallRecord
from warpforge.errors import WarpforgeError

log = logging.getLogger("warpforge.agent")


class ReplayExhausted(WarpforgeError, RuntimeError):
    """The replayed campaign has no stored answer for this call key: the original stopped here."""


class ReplayClient:
    """A ChatClient answering from a stored campaign's transcripts by call key, with no network at all."""

    def __init__(self, records: Sequence[CallRecord], models: LLMConfig) -> None:
        self.by_key = {r.call_key: r for r in records}
        self.models = models
        self.mismatches: list[str] = []

    def pick(self, rng: random.Random) -> ModelConfig:
        return pick_model(self.models.models, rng)

    async def complete(self, messages: Sequence[Any], model: ModelConfig, key: str = "",
                       schema: Any = None) -> LLMResponse:
        from warpforge.agent.secrets import redact

        rec = self.by_key.get(key)
        if rec is None:
            raise ReplayExhausted(key)
        if [(m["role"], redact(m["content"])) for m in messages] != [(m["role"], m["content"]) for m in rec.messages]:
            log.warning("replay %s: the prompt differs from the stored one (the evidence changed?)", key)
            self.mismatches.append(key)
        if rec.outcome == "call_failed":
            kind = rec.message.split(":", 1)[0]
            raise LLMCallError(kind, rec.message.split(":", 1)[-1].strip(), rec.model, rec.params)
        return LLMResponse(rec.model, rec.content, rec.reasoning, rec.finish_reason, rec.prompt_tokens,
                           rec.completion_tokens, 0.0, rec.cost_usd, rec.params)

    async def aclose(self) -> None:
        return None
