"""Replay from stored transcripts: the one ChatClient that answers from the store, with no network at all.

Both agents replay through it. The plan agent (parallel/plan_agent/agent.py) asks its calls again under
their deterministic keys (``r<round>.s<slot>.a<attempt>``) with prompts that hold no timings, so answering
the same keys with the stored answers reaches the same decisions; a prompt that differs from the stored one
is logged and listed in ``mismatches`` (the evidence changed: a different simulator or search), and a key
with no stored answer raises ``ReplayExhausted`` (the original stopped there). The kernel agent
(agent/evolution.py) re-checks every stored call in order through :meth:`ReplayClient.answer`, because how
many rounds a live campaign fits depends on how fast its evaluations ran. A stored ``call_failed`` is
raised again as the same ``LLMCallError``.

Example::

    >>> client = ReplayClient(read_transcripts(db, "plans-1"), LLMConfig(models=stored_models))  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from warpforge.agent.client import LLMCallError, LLMResponse, pick_model
from warpforge.agent.config import LLMConfig, ModelConfig
from warpforge.agent.transcripts import CallRecord
from warpforge.errors import WarpforgeError

log = logging.getLogger("warpforge.agent")


class ReplayExhausted(WarpforgeError, RuntimeError):
    """The replayed campaign has no stored answer for this call key: the original stopped here."""


class ReplayClient:
    """A ChatClient answering from a stored campaign's transcripts, with no network at all.

    ``complete`` answers a call by its key (the plan agent asks the same keys again); :meth:`answer` gives a
    stored record's response as the live call gave it (the kernel agent re-checks every stored call in order).
    """

    def __init__(self, records: Sequence[CallRecord], models: LLMConfig) -> None:
        self.by_key = {r.call_key: r for r in records}
        self.models = models
        self.mismatches: list[str] = []

    def pick(self, rng: random.Random) -> ModelConfig:
        return pick_model(self.models.models, rng)

    @staticmethod
    def answer(rec: CallRecord) -> LLMResponse:
        """The stored response (latency 0: nothing was waited for); a stored failure raises the same error."""
        if rec.outcome == "call_failed":
            kind = rec.message.split(":", 1)[0]
            raise LLMCallError(kind, rec.message.split(":", 1)[-1].strip(), rec.response.model, rec.response.params)
        return replace(rec.response, latency_s=0.0)

    async def complete(
        self, messages: Sequence[Any], model: ModelConfig, key: str = "", schema: Any = None
    ) -> LLMResponse:
        from warpforge.agent.secrets import redact

        rec = self.by_key.get(key)
        if rec is None:
            raise ReplayExhausted(key)
        if [(m["role"], redact(m["content"])) for m in messages] != [(m["role"], m["content"]) for m in rec.messages]:
            log.warning("replay %s: the prompt differs from the stored one (the evidence changed?)", key)
            self.mismatches.append(key)
        return self.answer(rec)

    async def aclose(self) -> None:
        return None
