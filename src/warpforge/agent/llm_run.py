"""One LLM run, whatever it proposes: the usage meter, the call recorder, the ask-with-one-re-ask loop.

Both agents are built on this module: the kernel agent (agent/evolution.py, variants) and the plan agent
(parallel/plan_agent/agent.py, parallelism plans). What they share is here and only here:

- :class:`UsageMeter`: calls, tokens, cost, failed calls in a row, rounds and wall time against the run's
  :class:`~warpforge.agent.budget.Budgets`, and the stop reason (the first budget spent, or what the agent
  itself decided: ``speed_of_light``, ``campaign_budget``, ``replay_exhausted``); its ``totals`` are the row
  stored in ``wf_agent_runs``;
- :class:`CallRecorder`: every call stored (``wf_agent_calls``, agent/transcripts.py) with the client's own
  :class:`~warpforge.agent.client.LLMResponse` embedded, and its outcome counted;
- :func:`ask`: one proposal = a call, and one re-ask with the checker's complaint when the answer is
  malformed in a way the model can fix; budgets are checked before every call. Each attempt is an
  :class:`Attempt`; replay (agent/replay.py, ``ReplayClient``) answers the same calls from the store.

What differs stays with each agent: what a prompt holds, how an answer is checked, what is done with it.

Example::

    meter = UsageMeter(settings)                       # settings: a Budgets subclass
    attempts = await ask(client, meter, model, messages, key=lambda a: f"r1.s0.a{a}",
                         check=parse, reask=lambda parsed: reask_text(parsed) if fixable(parsed) else None)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from warpforge.agent.budget import Budgets, Usage, spent
from warpforge.agent.client import ChatClient, LLMCallError, LLMResponse, Message
from warpforge.agent.config import ModelConfig
from warpforge.agent.replay import ReplayExhausted

log = logging.getLogger("warpforge.agent")
P = TypeVar("P")


@dataclass
class UsageMeter:
    """What a run has used, against its budgets, and why it stopped (the first reason given wins)."""

    limits: Budgets
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    rounds: int = 0
    failures_in_row: int = 0
    started: float | None = None  # time.monotonic() when the run started asking
    stop_reason: str | None = None
    exhausted: bool = False  # replay: the stored campaign has no answer for the next call
    outcomes: dict[str, int] = field(default_factory=dict)

    def start(self) -> None:
        if self.started is None:
            self.started = time.monotonic()

    def spent(self, in_round: bool = False) -> str | None:
        """The first budget used up, or None. Inside a round, the round itself is already counted and must not
        stop its own calls (``max_rounds=1`` once asked nothing at all)."""
        rounds = self.rounds - 1 if in_round else self.rounds
        return spent(
            self.limits, Usage(self.calls, self.tokens, self.cost_usd, self.started, rounds, self.failures_in_row)
        )

    def stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            log.info("llm agent stopped: %s", reason)

    def stop_if_spent(self, in_round: bool = False) -> bool:
        reason = self.spent(in_round)
        if reason:
            self.stop(reason)
        return self.stop_reason is not None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def wall_s(self) -> float:
        return 0.0 if self.started is None else time.monotonic() - self.started

    def calling(self) -> None:
        self.start()
        self.calls += 1

    def answered(self, response: LLMResponse, *, live: bool = True) -> None:
        """An answer came back (``live=False``: a stored one re-read, which breaks no failure streak)."""
        if live:
            self.failures_in_row = 0
        self.prompt_tokens += response.prompt_tokens
        self.completion_tokens += response.completion_tokens
        self.cost_usd += response.cost_usd

    def counted(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def outcome_text(self) -> str:
        return ", ".join(f"{k} {n}" for k, n in sorted(self.outcomes.items())) or "no answers"

    def totals(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The ``wf_agent_runs`` row: what was used, what stopped the run, and the settings it ran with."""
        return {
            "stop_reason": self.stop_reason or "",
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
            "wall_s": self.wall_s,
            "outcomes": dict(self.outcomes),
            "settings": dict(settings),
        }


@dataclass(frozen=True)
class Attempt(Generic[P]):
    """One call of a proposal: its key and messages, the client's response (a failed call's is empty), the
    error (``kind: message``) when the call failed, and what the agent's checker made of the answer."""

    key: str
    messages: list[Message]
    response: LLMResponse
    error: str = ""
    checked: P | None = None

    @property
    def failed(self) -> bool:
        return self.checked is None


async def ask(
    client: ChatClient,
    meter: UsageMeter,
    model: ModelConfig,
    messages: Sequence[Message],
    *,
    key: Callable[[int], str],
    check: Callable[[LLMResponse], P],
    reask: Callable[[P], str | None],
    schema: Mapping[str, Any] | None = None,
    on_attempt: Callable[[Attempt[P]], Awaitable[None] | None] | None = None,
) -> list[Attempt[P]]:
    """A call and at most one re-ask: ``reask(checked)`` returns the follow-up text, or None to stop there.

    Budgets are checked before each call (a spent one stops the run: ``meter.stop_reason``). A replayed
    campaign that has no answer for the key sets ``meter.exhausted`` and counts no call. ``on_attempt`` sees
    each attempt as it happens (the kernel agent records it at once; the plan agent settles later, in slot
    order).
    """
    attempts: list[Attempt[P]] = []
    convo = list(messages)
    for attempt in (0, 1):
        if meter.stop_if_spent(in_round=True):
            break
        k = key(attempt)
        meter.calling()
        try:
            response = await client.complete(convo, model, key=k, schema=schema)
        except ReplayExhausted:
            meter.calls -= 1  # not a call: the replayed campaign stopped before it
            meter.exhausted = True
            break
        except LLMCallError as exc:
            meter.failures_in_row += 1
            failed: Attempt[P] = Attempt(
                k, convo, LLMResponse.failed(model.label, exc.params, exc.latency_s), f"{exc.kind}: {exc}"
            )
            attempts.append(failed)
            await _seen(on_attempt, failed)
            break
        meter.answered(response)
        checked = check(response)
        done: Attempt[P] = Attempt(k, convo, response, checked=checked)
        attempts.append(done)
        await _seen(on_attempt, done)
        follow = reask(checked) if attempt == 0 else None
        if follow is None:
            break
        convo = convo + [{"role": "assistant", "content": response.content}, {"role": "user", "content": follow}]
    return attempts


async def _seen(hook: Callable[[Any], Awaitable[None] | None] | None, attempt: Any) -> None:
    if hook is not None:
        result = hook(attempt)
        if result is not None:
            await result


class CallRecorder:
    """Counts each call's outcome on the meter and stores the call (when the run has a database)."""

    def __init__(self, meter: UsageMeter, db: Callable[[], Any], campaign: str | None, *, replayed: bool) -> None:
        self.meter, self._db, self.campaign, self.replayed = meter, db, campaign, replayed

    def record(
        self,
        task: str,
        key: str,
        messages: Sequence[Message],
        response: LLMResponse,
        outcome: str,
        message: str = "",
        **extra: Any,
    ) -> int | None:
        """Store one call; ``extra``: parents, prompt_cut, variant_hash, ast_hash. Returns its id (or None)."""
        from warpforge.agent.transcripts import CallRecord, store_call

        self.meter.counted(outcome)
        log.info("llm %s %s: %s%s", task, key, outcome, f" ({message})" if message else "")
        db = self._db()
        if db is None or self.campaign is None:
            return None
        return store_call(
            db,
            self.campaign,
            CallRecord(
                task=task,
                call_key=key,
                messages=tuple(messages),
                response=response,
                outcome=outcome,
                message=message,
                replayed=self.replayed,
                **extra,
            ),
        )
