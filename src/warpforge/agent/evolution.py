"""The ``llm`` proposer: an evolving population of variants written by a language model.

Round 0 seeds the population with the task's templates (no waiting on the model: evaluation starts at
once; a task without templates asks the model for first variants). Every later round, while no budget
is spent, picks ``in_flight`` parents by score and novelty (the best measured, or the most often
correct where nothing is timed, weighted down by how many children each already has), asks the model
for a whole-file rewrite of each, concurrently, and returns the answers that pass parsing, the variant
contract, the evaluator's static checks and the duplicate check (normalized AST hash). A malformed answer
is asked again once with its error. Every call is stored (agent/transcripts.py) with its outcome. The
meter, the recorder, the re-ask loop and replay are agent/llm_run.py's, shared with the plan agent.

Budgets (per task): calls, tokens, money, wall time, rounds; the agent also stops when its best variant
reaches ``sol_stop_pct`` of speed of light, and after ``max_call_failures`` failed calls in a row.
``stop_reason`` says which ended it (stored in ``wf_agent_runs``, shown in the campaign summary).
Decisions are seeded: with the same answers and the same history, the same parents and models are chosen.

Example (configuration through ``CampaignSpec.proposer_config``)::

    >>> spec = CampaignSpec(name="c", tasks=["softmax"], proposer="llm",                 # doctest: +SKIP
    ...                     proposer_config={"max_calls": 8, "in_flight": 2, "max_cost_usd": 1.0})
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from pydantic import ConfigDict, Field

from warpforge.agent.budget import Budgets
from warpforge.agent.client import ChatClient, LLMCallError, LLMResponse
from warpforge.agent.llm_run import Attempt, CallRecorder, UsageMeter, ask
from warpforge.agent.parse import REASKABLE, ParsedAnswer, check_answer, normalized_hash
from warpforge.agent.prompting import build_prompt, reask_message
from warpforge.agent.proposers import Candidate, History, Origin, Proposer, VariantHistory, register_proposer
from warpforge.errors import UsageError
from warpforge.kernels.taskdef import Task
from warpforge.kernels.variant import builtin_variants

log = logging.getLogger("warpforge.agent")


class AgentSettings(Budgets):
    """The ``llm`` proposer's options (``proposer_config``); unknown keys are an error, not ignored. The budgets
    (max_calls, max_tokens, max_cost_usd, max_wall_s, max_rounds, max_call_failures) are agent/budget.py's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    llm_config: str | None = None  # YAML of models; default $WARPFORGE_LLM_CONFIG, then WARPFORGE_LLM_* vars
    replay: str | None = None  # answer from this campaign's stored transcripts (no network)
    in_flight: int = Field(default=2, ge=1)  # proposals per round, asked concurrently
    sol_stop_pct: float = Field(default=90.0, gt=0)  # stop once a variant reaches this % of speed of light
    prompt_tokens: int = Field(default=12_000, ge=1000)
    seed_templates: bool = True
    target: str = "sm_90"
    seed: int = 0


# Keys the campaign (or the CLI) passes as context; never part of the stored settings.
CONTEXT_KEYS = ("campaign", "db_url", "files")


@register_proposer
class LLMProposer(Proposer):
    """Whole-file rewrites by an LLM through any OpenAI-compatible endpoint (or a stored campaign)."""

    name = "llm"
    needs_campaign: ClassVar[bool] = True  # the campaign passes its name and database (transcripts go there)

    def __init__(self, config: Mapping[str, Any] | None = None, client: ChatClient | None = None) -> None:
        super().__init__(config)
        given = dict(config or {})
        self.campaign: str | None = given.get("campaign")
        self.db_url: str | None = given.get("db_url")
        options = {k: v for k, v in given.items() if k not in CONTEXT_KEYS}
        if client is None and options.get("replay") is None:
            from warpforge.agent.config import load_llm_config

            self.llm_config = load_llm_config(options.get("llm_config"))  # LLMConfigError: one line, what to set
            options = {**self.llm_config.agent, **options}  # the config file's agent: section, overridden here
        self.settings = AgentSettings.model_validate(options)
        self._client: ChatClient | None = client
        self._injected = client is not None  # a client given by the caller is used as it is, on any loop
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self.meter = UsageMeter(self.settings)
        self.recorder = CallRecorder(
            self.meter, self._db_handle, self.campaign, replayed=self.settings.replay is not None
        )
        self.children: dict[str, int] = {}
        self.seen: set[str] = set()
        self.task_name: str | None = None
        self._db: Any = None
        self.last_error = ""  # the newest failed call's "kind: message", for failure

    # --- plumbing ------------------------------------------------------------------------------------
    def _db_handle(self) -> Any:
        if self._db is None and self.campaign is not None:
            from warpforge.db.session import Database

            self._db = Database(self.db_url)
        return self._db

    def _client_for(self, task: Task) -> ChatClient:
        loop = asyncio.get_running_loop()
        if self._client is not None and (self._injected or self._client_loop in (None, loop)):
            self._client_loop = loop
            return self._client
        from warpforge.agent.client import OpenAIChatClient

        # An AsyncOpenAI client belongs to the event loop it first ran on: one per loop.
        self._client = OpenAIChatClient(self.llm_config)
        self._client_loop = loop
        return self._client

    @property
    def note(self) -> str:
        """One line for the campaign summary: what the agent did and what stopped it."""
        m = self.meter
        return (
            f"llm agent: {m.calls} calls ({m.outcome_text()}), {m.tokens} tokens, ${m.cost_usd:.4f}; stopped by "
            f"{m.stop_reason or 'the campaign (trial or time budget)'}"
        )

    @property
    def failure(self) -> str | None:
        """One line when the agent asked and no call came back (an unreachable server, a wrong key): the run
        then searched the templates alone, which is not what was asked, so the command exits 1."""
        m = self.meter
        if m.calls == 0 or m.outcomes.get("call_failed", 0) < m.calls:
            return None
        return f"every LLM call failed ({m.calls} of {m.calls}): {self.last_error or 'no answer'}"

    def _replay_all(self, task: Task, sources: dict[str, str]) -> list[Candidate]:
        """``--llm-replay CAMPAIGN``: every stored call of ``task`` in the replayed campaign, re-checked and
        re-stored, with no network at all; ``sources`` maps the source hashes known so far (the templates)
        to their sources, for diff answers.

        Replay does not depend on timing. A live campaign asks the model while it evaluates, so how many
        rounds fit depends on how fast evaluations run (and a replay that reuses stored evaluations runs them
        instantly). Replay therefore takes every stored call of the task at the first round, in stored order,
        with its stored parents and messages, and re-checks each answer exactly as the live agent did (parse,
        contract, static checks, duplicates against the same set in the same order): the outcomes come out the
        same, and every variant the original campaign searched is searched again. Each replayed call is stored
        again under the new campaign with ``replayed`` set and its original key; the agent then stops with the
        original's stop reason.
        """
        from warpforge.agent.replay import ReplayClient
        from warpforge.agent.transcripts import read_runs, read_transcripts
        from warpforge.db.session import Database

        campaign = str(self.settings.replay)
        db = self._db_handle() or Database(self.db_url)
        records = read_transcripts(db, campaign, task.name)
        if not records:
            raise UsageError(f"--llm-replay: campaign {campaign!r} has no stored LLM calls for task {task.name!r}")
        out: list[Candidate] = []
        for rec in records:
            self.meter.calling()
            extra = {"parents": rec.parents, "prompt_cut": rec.prompt_cut}
            try:
                answer = ReplayClient.answer(rec)
            except LLMCallError:
                self.recorder.record(
                    task.name, rec.call_key, rec.messages, rec.response, rec.outcome, rec.message, **extra
                )
                continue
            self.meter.answered(answer, live=False)
            name = "llm_" + "_".join(rec.call_key.split(".")[:2])  # r2.s0.a1 -> llm_r2_s0, as the live agent names it
            parent_source = sources.get(rec.parents[0]) if rec.parents else None
            parsed = check_answer(
                answer.content,
                task=task.name,
                finish_reason=answer.finish_reason,
                seen=self.seen,
                name=name,
                parent_source=parent_source,
            )
            variant = parsed.variant
            call_id = self.recorder.record(
                task.name,
                rec.call_key,
                rec.messages,
                answer,
                parsed.outcome,
                parsed.message,
                variant_hash=variant.source_hash if variant else None,
                ast_hash=parsed.ast_hash,
                **extra,
            )
            if parsed.outcome != "accepted" or variant is None or parsed.ast_hash is None:
                continue
            self.seen.add(parsed.ast_hash)
            sources[variant.source_hash] = variant.source
            # Only what the original searched: a variant it never evaluated (the campaign skipped it, or ended
            # first) would make the replay search more than the original did.
            if rec.verdicts:
                out.append(
                    Candidate(
                        replace(variant, name=name),
                        Origin("llm", self.name, rec.parents, str(call_id or rec.call_key), parsed.rationale),
                    )
                )
        runs = [r for r in read_runs(db, campaign) if r["task"] == task.name]
        self.meter.stop((runs[0]["stop_reason"] if runs else "") or "replay_exhausted")
        return out

    def _save_run(self) -> None:
        from warpforge.agent.transcripts import store_run

        db = self._db_handle()
        if db is None or self.task_name is None:
            return
        store_run(
            db,
            str(self.campaign),
            self.task_name,
            self.meter.totals(self.settings.model_dump(mode="json", exclude={"replay", "llm_config"})),
        )

    # --- the seam ------------------------------------------------------------------------------------
    def wants_more(self, history: History) -> bool:
        if history.round == 0:
            return True
        if self.meter.stop_reason is None:
            best = max((v.roofline_pct for v in history.variants if v.roofline_pct is not None), default=None)
            if best is not None and best >= self.settings.sol_stop_pct:
                self.meter.stop("speed_of_light")
            elif history.budget_left <= 0:
                self.meter.stop("campaign_budget")
            else:
                self.meter.stop_if_spent()
        if self.meter.stop_reason is not None:
            self._save_run()
        return self.meter.stop_reason is None

    async def propose(self, task: Task, history: History) -> list[Candidate]:
        self.task_name = task.name
        for v in history.variants:
            self.seen.add(normalized_hash(v.variant.source))
        out: list[Candidate] = []
        if history.round == 0 and self.settings.seed_templates:
            for template in builtin_variants(task.name):
                self.seen.add(normalized_hash(template.source))
                out.append(Candidate(template, Origin("template", "template")))
        if self.settings.replay is not None:
            if history.round > 0:
                return []
            sources = {c.variant.source_hash: c.variant.source for c in out}
            sources |= {v.variant.source_hash: v.variant.source for v in history.variants}
            out += self._replay_all(task, sources)
            self._save_run()
            return out
        if out or (history.round == 0 and history.variants):
            return out
        if self.meter.stop_reason is not None:
            return out
        self.meter.start()
        rng = random.Random(f"{self.settings.seed}:{task.name}:{history.round}")
        parents = self._parents(history, rng)
        self.meter.rounds += 1
        answers = await asyncio.gather(
            *(self._propose_one(task, history, parent, slot, rng.random()) for slot, parent in enumerate(parents))
        )
        self._save_run()
        return [c for c in answers if c is not None]

    def _parents(self, history: History, rng: random.Random) -> list[VariantHistory | None]:
        """``in_flight`` parents, by score and novelty; None (write from scratch) when there are none yet."""
        pool = sorted(history.variants, key=lambda v: v.variant.source_hash)
        correct = [v for v in pool if v.verdicts.get("ok", 0) > 0] or pool
        if not correct:
            return [None] * self.settings.in_flight
        measured = sorted((v for v in correct if v.best_ms is not None), key=lambda v: v.best_ms or 0.0)
        unmeasured = sorted(
            (v for v in correct if v.best_ms is None), key=lambda v: -v.verdicts.get("ok", 0) / max(v.evaluated, 1)
        )
        ranked = measured + unmeasured
        chosen: list[VariantHistory | None] = []
        children = dict(self.children)
        for _ in range(self.settings.in_flight):
            weights = [1.0 / (1 + rank) / (1 + children.get(v.variant.source_hash, 0)) for rank, v in enumerate(ranked)]
            parent = rng.choices(ranked, weights=weights, k=1)[0]
            children[parent.variant.source_hash] = children.get(parent.variant.source_hash, 0) + 1
            chosen.append(parent)
        return chosen

    async def _propose_one(
        self, task: Task, history: History, parent: VariantHistory | None, slot: int, draw: float
    ) -> Candidate | None:
        client = self._client_for(task)
        model = client.pick(random.Random(draw))
        prompt = build_prompt(
            task,
            history,
            parent,
            budget_tokens=self.settings.prompt_tokens,
            target=self.settings.target,
            winners=self._winners(task, history),
            structured=model.structured_output,
        )
        parents: tuple[str, ...] = (parent.variant.source_hash,) if parent is not None else ()
        if parent is not None:
            self.children[parents[0]] = self.children.get(parents[0], 0) + 1
        name = f"llm_r{history.round}_s{slot}"
        parent_source = parent.variant.source if parent is not None else None
        accepted: list[Candidate] = []

        def check(answer: LLMResponse) -> ParsedAnswer:
            return check_answer(
                answer.content,
                task=task.name,
                finish_reason=answer.finish_reason,
                seen=self.seen,
                name=name,
                parent_source=parent_source,
            )

        def reask(parsed: ParsedAnswer) -> str | None:
            return reask_message(parsed.outcome, parsed.message) if parsed.outcome in REASKABLE else None

        def settle(a: Attempt[ParsedAnswer]) -> None:  # at once: the next slot's duplicate check sees it
            parsed = a.checked
            if parsed is None:
                self.last_error = a.error
                self.recorder.record(
                    task.name,
                    a.key,
                    a.messages,
                    a.response,
                    "call_failed",
                    a.error,
                    parents=parents,
                    prompt_cut=prompt.cut,
                )
                return
            variant = parsed.variant
            call_id = self.recorder.record(
                task.name,
                a.key,
                a.messages,
                a.response,
                parsed.outcome,
                parsed.message,
                parents=parents,
                prompt_cut=prompt.cut,
                variant_hash=variant.source_hash if variant else None,
                ast_hash=parsed.ast_hash,
            )
            if parsed.outcome == "accepted" and variant is not None and parsed.ast_hash is not None:
                self.seen.add(parsed.ast_hash)
                origin = Origin(
                    "llm", self.name, parents, str(call_id) if call_id is not None else a.key, parsed.rationale
                )
                accepted.append(Candidate(replace(variant, name=name), origin))

        await ask(
            client,
            self.meter,
            model,
            prompt.messages,
            check=check,
            reask=reask,
            on_attempt=settle,
            key=lambda attempt: f"r{history.round}.s{slot}.a{attempt}",
        )
        return accepted[0] if accepted else None

    def _winners(self, task: Task, history: History) -> list[str]:
        from warpforge.agent.retrieval import past_winners

        return past_winners(self.db_url if self.campaign is not None else None, task.name, history.gpu)

    async def aclose(self) -> None:
        if self.meter.calls:
            self.meter.stop("campaign_budget")  # only when nothing else stopped it first
        self._save_run()
        if self._client is not None:
            await self._client.aclose()
