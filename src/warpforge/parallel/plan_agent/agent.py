"""The plan proposer: an LLM proposes parallelism plans from the simulator's evidence; the search ranks them.

``plan search --proposer llm`` runs, in one campaign (a ``wf_campaigns`` row):

1. the ordinary plan search (``parallel.search.search_plans``): the best plans so far;
2. rounds, while no budget is spent (agent/llm_run.py's meter, shared with the kernel agent: calls, tokens,
   cost, wall time, rounds, failed calls in a row): ``in_flight`` concurrent calls, each shown the model and
   cluster specs and the simulator's breakdown of the best plans so far plus its own earlier proposals with
   what became of them (prompting.py); each answer parsed strictly (parse.py), re-asked once with the error
   when malformed or when none of its plans can run, and each plan judged by the simulator (judge.py):
   ``ranked``, ``does_not_fit``, ``invalid`` or ``duplicate``;
3. the search again with every new LLM plan enqueued (``search_plans(enqueue=...)``, which also hands them to
   Optuna's ``enqueue_trial`` on large spaces): the final ranking, in which each LLM plan gets its rank.

Every call is stored in ``wf_agent_calls`` (task ``plan:<model>@<cluster>x<nodes>``), the totals and the stop
reason in ``wf_agent_runs``, each proposed plan with its rationale, outcome, rank and call id in
``wf_agent_plans``, and the ranked plans in ``wf_plans`` (LLM ones with source ``llm``). Decisions are seeded and
prompts hold no timings, so ``--llm-replay CAMPAIGN`` (``ReplayClient``: answers by call key from the stored
transcripts, no network) reaches the same plans.

Example::

    >>> agent = PlanAgent(model, cluster, SearchOptions(), PlanAgentSettings(max_calls=4),   # doctest: +SKIP
    ...                   llm=load_llm_config(), db_url="sqlite:///wf.db", campaign="plans-1")
    >>> result = asyncio.run(agent.run())                                                   # doctest: +SKIP
    >>> result.stop_reason, [p.rank for p in result.proposals]                              # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from warpforge.agent.budget import Budgets
from warpforge.agent.client import ChatClient, LLMResponse
from warpforge.agent.config import LLMConfig, ModelConfig
from warpforge.agent.llm_run import Attempt, CallRecorder, UsageMeter, ask
from warpforge.agent.parse import REASKABLE
from warpforge.agent.replay import ReplayClient
from warpforge.db.rows import AgentPlanRow
from warpforge.parallel.plan_agent.judge import PlanJudge
from warpforge.parallel.plan_agent.parse import PLAN_SCHEMA, ParsedPlans, parse_plan_answer
from warpforge.parallel.plan_agent.prompting import EarlierProposal, SearchView, build_plan_prompt, plan_reask_message

__all__ = ["PlanAgent", "PlanAgentResult", "PlanAgentSettings", "ReplayClient", "SearchOptions", "plan_task"]
from warpforge.parallel.prediction import Prediction
from warpforge.parallel.specs import ClusterSpec, ModelSpec

log = logging.getLogger("warpforge.agent")


class PlanAgentSettings(Budgets):
    """The plan agent's options; the budgets are agent/budget.py's (smaller defaults: a plan call is cheap to
    judge, and a few rounds show whether the model finds anything the search did not)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_calls: int | None = Field(default=8, ge=1)
    max_tokens: int | None = Field(default=200_000, ge=1)
    max_cost_usd: float | None = Field(default=1.0, ge=0)
    max_wall_s: float | None = Field(default=900.0, gt=0)
    max_rounds: int | None = Field(default=4, ge=1)
    in_flight: int = Field(default=1, ge=1)  # calls per round, asked concurrently (same evidence each)
    plans_per_call: int = Field(default=4, ge=1)
    show_best: int = Field(default=5, ge=1)  # best plans whose breakdown the prompt shows
    prompt_tokens: int = Field(default=12_000, ge=1000)
    seed: int = 0


class SearchOptions(BaseModel):
    """The search settings (``plan search`` flags), stored with the campaign so a replay searches the same way."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    global_batch: int | None = None
    trials: int = 400
    top: int = 5
    method: Literal["auto", "exhaustive", "optuna"] = "auto"
    memory_margin: float = 0.05
    seed: int = 0
    precision: Literal["bf16", "fp8"] = "bf16"
    framework: str = "any"


@dataclass(frozen=True)
class PlanAgentResult:
    campaign: str
    search: Any  # parallel.search.SearchResult: the final ranking, LLM plans enqueued
    proposals: list[AgentPlanRow]
    stop_reason: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    outcomes: dict[str, int]
    replay_mismatches: list[str] = field(default_factory=list)  # call keys whose prompt differed in replay
    stored_plans: int = 0

    @property
    def note(self) -> str:
        outcomes = ", ".join(f"{k} {n}" for k, n in sorted(self.outcomes.items())) or "no answers"
        ranked = sorted(p.rank for p in self.proposals if p.rank is not None)
        return (
            f"llm plan agent: {self.calls} calls ({outcomes}), {len(self.proposals)} plans proposed, "
            f"{len(ranked)} ranked (best rank {ranked[0] if ranked else '-'}), "
            f"{self.prompt_tokens + self.completion_tokens} tokens, ${self.cost_usd:.4f}; "
            f"stopped by {self.stop_reason}"
        )


def plan_task(model: ModelSpec, cluster: ClusterSpec) -> str:
    """The ``task`` of the agent's calls and totals: ``plan:<model>@<cluster>x<nodes>``."""
    return f"plan:{model.name}@{cluster.name}x{cluster.nodes}"[:200]


class PlanAgent:
    """One LLM plan search (see the module docstring); ``client`` is an OpenAIChatClient or a ReplayClient."""

    def __init__(
        self,
        model: ModelSpec,
        cluster: ClusterSpec,
        options: SearchOptions,
        settings: PlanAgentSettings,
        *,
        llm: LLMConfig,
        db_url: str | None,
        campaign: str,
        client: ChatClient | None = None,
        replay_of: str | None = None,
    ) -> None:
        self.model, self.cluster, self.options, self.settings, self.llm = model, cluster, options, settings, llm
        self.db_url, self.campaign, self.replay_of = db_url, campaign, replay_of
        self.client = client
        self.task = plan_task(model, cluster)
        self.judge = PlanJudge(
            model,
            cluster,
            options.global_batch or model.default_global_batch(),
            options.precision,
            options.framework,
            options.memory_margin,
        )
        self.gb, self.usable = self.judge.gb, self.judge.usable
        self.meter = UsageMeter(settings)
        self.recorder = CallRecorder(self.meter, self._database, campaign, replayed=replay_of is not None)
        self.proposals: list[tuple[AgentPlanRow, Prediction | None]] = []
        self._db: Any = None
        self._campaign_id = 0

    # --- storage ----------------------------------------------------------------------------------------------
    def _database(self) -> Any:
        if self._db is None:
            from warpforge.db.session import Database

            self._db = Database(self.db_url)
        return self._db

    def _save_run(self) -> None:
        from warpforge.agent.transcripts import store_run

        store_run(
            self._database(),
            self.campaign,
            self.task,
            self.meter.totals(
                {**self.settings.model_dump(mode="json"), "models": [m.public() for m in self.llm.models]}
            ),
        )

    # --- the loop ------------------------------------------------------------------------------------------
    async def _ask(self, slot: int, messages: list[Any], model: ModelConfig) -> list[Attempt[ParsedPlans]]:
        """One proposal: a call, and one re-ask when the answer is malformed or none of its plans can run."""
        assert self.client is not None

        def check(answer: LLMResponse) -> ParsedPlans:
            parsed = parse_plan_answer(
                answer.content, finish_reason=answer.finish_reason, max_plans=self.settings.plans_per_call
            )
            if parsed.outcome == "accepted":
                judged = [self.judge(p) for p in parsed.plans]
                if all(j.outcome in ("invalid", "duplicate") for j in judged) and any(
                    j.outcome == "invalid" for j in judged
                ):
                    parsed = replace(
                        parsed,
                        outcome="rejected",
                        message="none of the plans can run: "
                        + "; ".join(
                            f"plan {i + 1}: {j.message}" for i, j in enumerate(judged) if j.outcome == "invalid"
                        ),
                    )
            return parsed

        def reask(parsed: ParsedPlans) -> str | None:
            return plan_reask_message(parsed.outcome, parsed.message) if parsed.outcome in REASKABLE else None

        rounds = self.meter.rounds
        return await ask(
            self.client,
            self.meter,
            model,
            messages,
            key=lambda a: f"r{rounds}.s{slot}.a{a}",
            check=check,
            reask=reask,
            schema=PLAN_SCHEMA,
        )

    def _settle(self, attempts: list[Attempt[ParsedPlans]]) -> None:
        """Store a proposal's calls and judge its plans, in slot order (so duplicates across slots are seeded)."""
        from warpforge.parallel.plan_agent.store import store_agent_plan

        for a in attempts:
            if a.checked is None:
                self.recorder.record(self.task, a.key, a.messages, a.response, "call_failed", a.error)
                continue
            judged = [self.judge(p) for p in a.checked.plans] if a.checked.outcome in ("accepted", "rejected") else []
            outcome, message = a.checked.outcome, a.checked.message
            if outcome == "accepted" and all(j.outcome == "duplicate" for j in judged):
                outcome, message = "duplicate", "every plan was proposed before in this run"
            call_id = self.recorder.record(self.task, a.key, a.messages, a.response, outcome, message) or 0
            for slot, j in enumerate(judged):
                p = j.prediction
                rec = AgentPlanRow(
                    self.task,
                    call_id,
                    a.key,
                    slot,
                    j.raw.plan,
                    j.plan.key() if j.plan else None,
                    j.outcome,
                    j.message,
                    " ".join(j.raw.rationale.split())[:1000],
                    step_time_s=p.step_time_s if p else None,
                    tokens_per_s=p.tokens_per_s if p else None,
                    peak_mem_gb=p.peak_mem_gb if p else None,
                    replayed=self.replay_of is not None,
                )
                rec = replace(rec, id=store_agent_plan(self._database(), self._campaign_id, rec))
                self.proposals.append((rec, p))
                if j.plan is not None and j.outcome != "duplicate":
                    self.judge.seen.add(j.plan.key())

    def _evidence(self, baseline: Any) -> list[tuple[int, Prediction, str]]:
        from warpforge.parallel.explain import time_split

        mine = [p for r, p in self.proposals if r.outcome == "ranked" and p is not None]
        pool = {p.plan.key(): p for p in [*baseline.feasible_predictions, *mine]}
        ranked = sorted(pool.values(), key=lambda p: (-p.tokens_per_s, p.peak_mem_gb))
        llm = {p.plan.key() for p in mine}
        # The best plan of each layout (TP, CP, PP, EP, DP): five plans that differ only in ZeRO stage would
        # show the model one layout five times.
        out: list[tuple[int, Prediction, str]] = []
        layouts: set[tuple[int, ...]] = set()
        for i, p in enumerate(ranked):
            layout = (p.plan.tp, p.plan.cp, p.plan.pp, p.plan.ep, p.plan.dp)
            if layout in layouts:
                continue
            layouts.add(layout)
            out.append((i + 1, p, ("proposed by you; " if p.plan.key() in llm else "") + time_split(p, 3)))
            if len(out) == self.settings.show_best:
                break
        return out

    def _earlier(self) -> list[EarlierProposal]:
        out = []
        for rec, p in self.proposals:
            label = p.plan.short() if p is not None else json.dumps(dict(rec.plan))
            msg = rec.message or (f"{p.tokens_per_s:,.0f} tokens/s, {p.peak_mem_gb:.1f} GiB" if p else "")
            out.append(EarlierProposal(label, rec.outcome, msg))
        return out

    async def run(self) -> PlanAgentResult:
        """Search, ask, judge, search again with the LLM's plans enqueued; store everything (see module doc)."""
        from warpforge.parallel.plan_agent.store import create_plan_campaign, finish_campaign

        db = self._database()
        db.upgrade()
        self._campaign_id = create_plan_campaign(
            db,
            self.campaign,
            {
                "kind": "plan",
                "proposer": "llm",
                "tasks": [self.task],
                "replay_of": self.replay_of,
                "model_spec": self.model.model_dump(mode="json"),
                "cluster_spec": self.cluster.model_dump(mode="json"),
                "search": self.options.model_dump(mode="json"),
            },
        )
        try:
            return await self._search_and_ask(db)
        except BaseException:  # no plan fits, a store error, Ctrl-C: the campaign row must not stay "running"
            finish_campaign(db, self._campaign_id, "failed")
            raise

    async def _search_and_ask(self, db: Any) -> PlanAgentResult:
        from warpforge.parallel.plan_agent.store import finish_campaign, set_ranks, store_ranked_plans
        from warpforge.parallel.search import search_plans, space_axes

        opts = self.options.model_dump()
        baseline = search_plans(self.model, self.cluster, **opts)  # raises when no plan fits: the CLI says why
        view = SearchView(
            self.model,
            self.cluster,
            self.gb,
            self.options.precision,
            self.usable,
            space_axes(self.model, self.cluster),
            baseline.evaluated,
            baseline.feasible,
        )
        if self.client is None:
            from warpforge.agent.client import OpenAIChatClient

            self.client = OpenAIChatClient(self.llm)
        try:
            while not self.meter.stop_if_spent():
                self.meter.rounds += 1
                rng = random.Random(f"{self.settings.seed}:{self.task}:{self.meter.rounds}")
                models = [self.client.pick(random.Random(rng.random())) for _ in range(self.settings.in_flight)]
                prompts = [
                    build_plan_prompt(
                        view,
                        best=self._evidence(baseline),
                        earlier=self._earlier(),
                        max_plans=self.settings.plans_per_call,
                        budget_tokens=self.settings.prompt_tokens,
                        structured=m.structured_output,
                    )
                    for m in models
                ]
                results = await asyncio.gather(
                    *(self._ask(s, list(p.messages), m) for s, (p, m) in enumerate(zip(prompts, models)))
                )
                for attempts in results:
                    self._settle(attempts)
                if self.meter.exhausted:
                    self.meter.stop(self._replayed_stop_reason())
                self._save_run()
        finally:
            await self.client.aclose()
        self._save_run()
        enqueue = [p.plan for r, p in self.proposals if r.outcome in ("ranked", "does_not_fit") and p is not None]
        final = search_plans(self.model, self.cluster, **{**opts, "enqueue": enqueue})
        rank = {p.plan.key(): i + 1 for i, p in enumerate(final.feasible_predictions)}
        ranked = [
            replace(r, rank=rank.get(r.plan_key or "")) if r.outcome == "ranked" else r for r, _ in self.proposals
        ]
        set_ranks(db, {r.id: r.rank for r in ranked if r.id is not None and r.rank is not None})
        lines = {
            r.plan_key: f"proposed by the LLM (call {r.call_id}, {r.call_key}): {r.rationale}"
            for r in reversed(ranked)
            if r.plan_key and r.outcome in ("ranked", "does_not_fit")
        }
        unfit = [p for r, p in self.proposals if r.outcome == "does_not_fit" and p is not None]
        stored = store_ranked_plans(self.db_url, self.model, self.cluster, final, lines, unfit, self._campaign_id)
        finish_campaign(db, self._campaign_id)
        mismatches = list(getattr(self.client, "mismatches", []))
        m = self.meter
        return PlanAgentResult(
            self.campaign,
            final,
            ranked,
            m.stop_reason or "",
            m.calls,
            m.prompt_tokens,
            m.completion_tokens,
            m.cost_usd,
            dict(m.outcomes),
            mismatches,
            stored,
        )

    def _replayed_stop_reason(self) -> str:
        from warpforge.agent.transcripts import read_runs

        runs = [r for r in read_runs(self._database(), str(self.replay_of)) if r["task"] == self.task]
        return (runs[0]["stop_reason"] if runs else "") or "replay_exhausted"
