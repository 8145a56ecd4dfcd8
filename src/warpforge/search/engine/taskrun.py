"""One task's search inside a campaign: proposals in flight, results stored, then told (search/engine/campaign.py).

``TaskRun.run()`` keeps ``pool.depth`` proposals in flight across the task's arms (one Optuna study per
variant, the budget split by the allocator), lets the proposer add arms between rounds (search/engine/rounds.py),
stores the completions of each poll in one transaction before telling any of them (db/writer.py), adopts a
new best only beyond noise, and ends with the top-k re-benchmark and the stored decision (search/engine/final.py).

Example::

    >>> summary, requeued = TaskRun(db, spec, task, pools, spec.pool_config(), None, None, None).run()  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from warpforge.agent.proposers import PROPOSERS, Candidate, History, Origin, get_proposer, user_candidates
from warpforge.db import store
from warpforge.db.session import Database
from warpforge.db.writer import ResultWriter
from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.evaluator.run import make_pool
from warpforge.evaluator.run.backend import BACKENDS, Backend, resolve_backend_name
from warpforge.evaluator.run.pool import Completion, EvalPool, JobSpec, PoolConfig, PoolError
from warpforge.evaluator.run.provenance import software_versions
from warpforge.evaluator.run.stages import space_stage
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.supervisor import ChildPool
from warpforge.kernels.taskdef import Task
from warpforge.kernels.variant import VariantError, parse_variant
from warpforge.search.engine.acceptance import Entry, Incumbent
from warpforge.search.engine.allocators import get_allocator
from warpforge.search.engine.arms import Arm, ensure_variant, study_name
from warpforge.search.engine.final import Ending
from warpforge.search.engine.mirror import StudyWriter, open_study, optuna_storage
from warpforge.search.engine.rounds import Prepared, ProposalLoop
from warpforge.search.engine.spec import CampaignError, CampaignSpec
from warpforge.search.engine.summary import Event, TaskSummary, VariantSummary
from warpforge.search.samplers.space import SearchSpace
from warpforge.search.samplers.strategy import Proposal, Strategy

log = logging.getLogger("warpforge.search.engine.campaign")


class TaskRun:
    """One task's search: keep ``pool.depth`` proposals in flight, store each result, then tell it."""

    def __init__(
        self,
        db: Database,
        spec: CampaignSpec,
        task: Task,
        pools: dict[str, EvalPool],
        config: PoolConfig,
        deadline: float | None,
        on_event: Callable[[Event], None] | None,
        on_start: Callable[[str, int], None] | None,
    ) -> None:
        self.db, self.spec, self.task, self.deadline = db, spec, task, deadline
        self.on_event, self.on_start = on_event, on_start
        self.backend_name = resolve_backend_name(spec.backend, task.name)
        self.backend_cls: type[Backend] = BACKENDS[self.backend_name]
        if self.backend_name not in pools:
            try:
                pools[self.backend_name] = make_pool(self.backend_name, config)
            except PoolError as exc:
                raise CampaignError(str(exc)) from exc
        self.pool = pools[self.backend_name]
        self.versions = software_versions()
        self.inflight: dict[str, tuple[Arm, Proposal, JobSpec]] = {}
        self.incumbent = Incumbent(spec.alpha, remeasure=self.pool.can_remeasure)
        self.ab_key: str | None = None  # the A/B re-measurement in flight
        self.issued = self.done = self.budget = self.reused = 0
        self.measured: list[Entry] = []
        # Live GPU times are reused only within this campaign (its GPU); other results across campaigns.
        self.reuse_campaign = spec.name if self.backend_name == "cuda" else None
        self.arms: list[Arm] = []
        self.by_hash: dict[str, Arm] = {}
        self.skipped: list[str] = []  # proposed variants that could not be prepared (said in the summary)
        self.campaign_id = 0  # the campaign's row, read when the run starts
        self.stored: set[tuple[str, str]] = set()  # (variant hash, params key) already stored: never evaluated again
        self.asked_at = -1  # evaluations done when wants_more was last asked
        self._base: JobSpec | None = None  # the task's job template: its file is read and hashed once, not per job
        self.allocator = get_allocator(spec.allocator, spec.allocator_config)
        proposer_config = dict(spec.proposer_config)
        if getattr(PROPOSERS.get(spec.proposer), "needs_campaign", False):
            # Context, not stored in the spec (the URL may hold a password): the agent stores its calls there.
            proposer_config |= {"campaign": spec.name, "db_url": spec.db_url}
        proposer = get_proposer(spec.proposer, proposer_config)
        # The resources last, each closed by run() (or here, when a later one cannot start).
        self.writer = StudyWriter(optuna_storage(db.url))  # studies live in memory, copied in the background
        try:
            self.children = ChildPool()  # constraint enumeration runs candidate code: in a child, here
            self.results = ResultWriter(db)  # the single writer's connection, held for the task's run
            self.rounds: ProposalLoop[SearchSpace] = ProposalLoop(proposer, task)
        except BaseException:
            self.writer.close()
            if hasattr(self, "children"):
                self.children.close()
            raise
        self.ending = Ending(
            db, spec, task, self.pool, self.backend_name, self.incumbent, save=self.save, commit=self.commit
        )

    def run(self) -> tuple[TaskSummary, int]:
        try:
            out = self._run()
        except BaseException:
            self.results.close(quiet=True)  # completed results are kept even when the run fails or is stopped
            raise
        else:
            self.results.close()
        finally:
            self.rounds.close()
            self.children.close()
            self.writer.close()
        return out

    def _run(self) -> tuple[TaskSummary, int]:
        first = self.rounds.first(History.empty(self.task.name, self.backend_name, self.spec.trials), self._prepare)
        users = [Prepared(c, self._prepare_users(c)) for c in user_candidates(self.spec.variant_files, self.task.name)]
        if not first and not users:
            raise CampaignError(f"the {self.spec.proposer} proposer has no variants for task {self.task.name!r}")
        requeued = 0
        for p in first + users:
            if p.error is not None and p.candidate.origin.kind == "user":
                raise CampaignError(p.error)  # a file the user named: stop and say why
            if p.error is not None:  # a proposer's candidate (an LLM's first variants): record it, go on
                log.warning("proposed variant %s skipped: %s", p.candidate.variant.name, p.error)
                self.skipped.append(p.error)
                continue
            requeued += self._add_arm(p)
        if self.spec.resume:  # arms a proposer added mid-run before the kill: searched again, with their lineage
            for c in self._stored_candidates():
                requeued += self._add_arm(Prepared(c, self._prepare(c)))
        if not self.arms:
            raise CampaignError(f"no variant of {self.task.name} could be prepared: {'; '.join(self.skipped)}")
        with self.db.session() as s:
            campaign = store.get_campaign(s, self.spec.name)
            assert campaign is not None  # created (or found) by run_campaign
            self.campaign_id = self.results.campaign_id = campaign.id
            self.stored = store.stored_param_keys(
                s,
                list(self.by_hash),
                backend=self.backend_name,
                task_hash=self.task.source_hash,
                versions=self.versions,
                campaign_id=self.campaign_id if self.reuse_campaign is not None else None,
            )
        self._load_history()
        already = sum(a.strategy.n_told for a in self.arms)
        self.budget = max(self.spec.trials - (already if self.spec.resume else 0), 0)
        if self.on_start is not None:
            self.on_start(self.task.name, self.budget)
        while True:
            self._next_round()  # first: arms a finished round adds get their share in this _fill
            self._fill()
            if not self.inflight and self.ab_key is None and not self.rounds.in_flight:
                break
            # Nothing measuring: wait on the proposal instead of the idle pool.
            if not self.inflight and self.ab_key is None:
                with self.writer.waiting():
                    self._take_round(timeout=1.0)
                continue
            with self.writer.waiting():  # the studies' copy to the database runs while we wait
                completions = self.pool.poll(timeout=0.2 if self.rounds.in_flight else 1.0)
            self._complete(completions)
        final = self.ending.final(self.measured, self.by_hash)
        summary = self.ending.summarize(final, self.arms)
        summary.reused = self.reused  # said once, by the reader of the summary (run prints it beside the table)
        if self.rounds.failed:
            summary.notes.append(f"proposer {self.spec.proposer}: {self.rounds.failed}")
        if self.skipped:
            summary.notes.append(
                f"{len(self.skipped)} proposed variant(s) skipped (could not be prepared): "
                + "; ".join(self.skipped[:3])
                + ("; ..." if len(self.skipped) > 3 else "")
            )
        note = getattr(self.rounds.proposer, "note", "")  # e.g. the agent's calls, cost, and what stopped it
        if note:
            summary.notes.append(str(note))
        summary.failure = getattr(self.rounds.proposer, "failure", None)
        return summary, requeued

    # --- proposal rounds ---------------------------------------------------------------------------
    def _prepare_users(self, candidate: Candidate) -> SearchSpace:
        """A ``--variant-file`` that cannot be searched is the user's input, said as eval says it (exit 2)."""
        try:
            return self._prepare(candidate)
        except CampaignError as exc:
            raise VariantError(str(exc)) from None

    def _prepare(self, candidate: Candidate) -> SearchSpace:
        """The candidate's feasible configurations (its code runs in a child); raises CampaignError."""
        variant = candidate.variant
        if not variant.space and variant.model_new:
            raise CampaignError(
                f"variant {variant.name} of {self.task.name} is a ModelNew without SPACE: a campaign "
                "tunes at least one parameter (add SPACE = {'BLOCK': [...]} and take BLOCK as a "
                "keyword of forward), or evaluate it as it is with `warpforge eval`"
            )
        if not variant.space:
            raise CampaignError(f"variant {variant.name} of {self.task.name} has an empty SPACE: nothing to search")
        failure, configs = space_stage(self.children, Job(self.task, variant, {}))
        if failure is not None:
            raise CampaignError(f"variant {variant.name}: {failure.verdict.value}: {failure.message}")
        if not configs:
            raise CampaignError(
                f"variant {variant.name} of {self.task.name}: no configuration of its SPACE "
                "satisfies constraints() on the benchmark shapes; widen SPACE or fix constraints"
            )
        return SearchSpace(variant.space, [tuple(c[n] for n in variant.space) for c in configs])

    def _add_arm(self, prepared: Prepared[SearchSpace]) -> int:
        """Open the arm's study (resumed studies re-queue their interrupted trials); returns how many."""
        variant, origin, space = prepared.candidate.variant, prepared.candidate.origin, prepared.value
        assert space is not None
        name = study_name(self.spec.name, self.task.name, variant)
        seed = None if self.spec.seed is None else self.spec.seed + len(self.arms)
        strategy = Strategy(space, open_study(name, self.writer, self.spec.sampler, seed), self.spec.sampler, seed)
        requeued = 0
        if self.spec.resume:
            self._adopt_stored(strategy, name)
            requeued = strategy.recover()
        with self.db.session() as s:
            record_id = ensure_variant(s, variant, origin).id
        summary = VariantSummary(variant.name, variant.source_hash, len(space), origin.kind, list(origin.parents))
        arm = Arm(variant, record_id, strategy, summary, name, origin)
        self.arms.append(arm)
        self.by_hash[variant.source_hash] = arm
        return requeued

    def _stored_candidates(self) -> list[Candidate]:
        """Variants this campaign evaluated for this task that round 0 did not propose again."""
        with self.db.session() as s:
            rows = store.campaign_variants(s, self.spec.name, self.task.name)
            out = [
                Candidate(
                    parse_variant(r.source, r.name),
                    Origin(r.origin, r.proposer, tuple(r.parents or ()), r.proposal_id, r.rationale or ""),
                )
                for r in rows
                if r.source_hash not in self.by_hash
            ]
        if out:
            log.info(
                "resume: %d arm(s) added mid-run before are searched again: %s",
                len(out),
                ", ".join(c.variant.name for c in out),
            )
        return out

    def _adopt_stored(self, strategy: Strategy, name: str) -> None:
        """Tell the study what this campaign stored for it and its copy in the database had not reached (a
        kill -9 between storing a result and the background copy of its trial): never evaluated twice."""
        with self.db.session() as s:
            rows = store.study_results(s, self.spec.name, name)
        adopted = sum(
            strategy.adopt(p, ms, failed=v != Verdict.OK.value, attrs={"verdict": v, "reason": r})
            for p, v, r, ms in rows
        )
        if adopted:
            log.info(
                "%s: %d stored result(s) told to the study on resume (its copy had not reached them)", name, adopted
            )

    def history(self) -> History:
        best = self.incumbent.best
        timing = best.result.timing if best is not None else None
        return History(
            self.task.name,
            self.backend_name,
            timing.gpu if timing else None,
            self.rounds.round,
            self.done,
            max(self.budget - self.issued, 0),
            tuple(a.stats.history(a.variant, a.origin) for a in self.arms),
        )

    def _next_round(self) -> None:
        self._take_round(timeout=0.0)
        if self.rounds.in_flight or self.rounds.failed or self.done == self.asked_at or self.issued >= self.budget:
            return
        self.asked_at = self.done
        history = self.history()
        if self.rounds.proposer.wants_more(history):
            self.rounds.start(history, self._prepare)

    def _take_round(self, timeout: float) -> None:
        prepared = self.rounds.take(timeout)
        for p in prepared or []:
            variant = p.candidate.variant
            if p.error is not None:
                log.warning("proposed variant %s skipped: %s", variant.name, p.error)
                self.skipped.append(p.error)
            elif variant.task != self.task.name:
                log.warning(
                    "proposed variant %s is for task %r, not %r: skipped", variant.name, variant.task, self.task.name
                )
            elif variant.source_hash in self.by_hash:
                log.info("proposed variant %s duplicates an arm (same source): skipped", variant.name)
            else:
                self._add_arm(p)
                log.info(
                    "new arm %s (%s from %s, parents %s) added after %d evaluations",
                    variant.name,
                    p.candidate.origin.kind,
                    p.candidate.origin.proposer,
                    ",".join(h[:12] for h in p.candidate.origin.parents) or "none",
                    self.done,
                )
        if prepared is not None:
            self.asked_at = -1  # new arms: wants_more may be asked again at once

    # --- the loop ----------------------------------------------------------------------------------
    def _fill(self) -> None:
        while (
            len(self.inflight) < self.pool.depth
            and self.issued < self.budget
            and (self.deadline is None or time.monotonic() < self.deadline)
        ):
            arm = self.allocator.pick(self.arms, self.issued)
            if arm is None:
                return
            proposal = arm.strategy.ask()
            if proposal is None:
                arm.exhausted = True
                continue
            self.issued += 1
            key = f"{arm.study_name}#{proposal.trial.number}"
            job = self.job_spec(arm, proposal.params, key)
            cached = None
            if (arm.variant.source_hash, store.params_key(proposal.params)) in self.stored:
                with self.db.session() as s:  # same source, params, backend, software, task: never evaluated again
                    row = store.find_evaluation(
                        s,
                        arm.variant.source_hash,
                        proposal.params,
                        self.backend_name,
                        self.versions,
                        task_hash=self.task.source_hash,
                        campaign=self.reuse_campaign,
                    )
                    cached = store.result_of(row) if row is not None else None
                    again = cached is not None and row is not None and row.campaign_id != self.campaign_id
                if again and cached is not None:
                    # Reused from another campaign: stored again under this one, so that its results, summary
                    # and resume see it (the kill-between-store-and-tell case is already ours); durable first.
                    self.save(arm, cached, trial_number=proposal.trial.number)
                    self.commit()
            # A dead worker or a worker-side bug says nothing about the candidate: evaluate it again.
            if cached is not None and cached.reason not in ("worker_died", "worker_error"):
                log.info(
                    "%s %s: stored result reused (%s), not evaluated again",
                    arm.variant.name,
                    proposal.params,
                    cached.summary(),
                )
                self.reused += 1
                self._finish(arm, proposal, job, cached, cached=True)
                continue
            self.inflight[key] = (arm, proposal, job)
            arm.inflight += 1
            self.pool.submit(job)
            self.pool.pump()

    def _complete(self, completions: list[Completion]) -> None:
        """Store one poll's completed evaluations in ONE transaction, then (in arrival order) tell each.

        Durable before done: nothing is told, counted or reported before the commit returns, so a kill -9
        loses only evaluations that no study, reader or resume ever saw as done (their trials are still
        RUNNING in the database and are evaluated again), never a stored one, and repeats none. Batching by
        poll keeps the sampler's view unchanged: every completion is told before the next ask, as before.
        """
        evaluations: list[tuple[Arm, Proposal, JobSpec, EvalResult] | None] = []  # None: the A/B re-measurement
        for c in completions:
            if c.key == self.ab_key:
                evaluations.append(None)
                continue
            arm, proposal, job = self.inflight.pop(c.key)
            arm.inflight -= 1
            assert c.result is not None
            self.save(arm, c.result, trial_number=proposal.trial.number)
            evaluations.append((arm, proposal, job, c.result))
        self.commit()
        for c, done in zip(completions, evaluations):
            if done is None:
                self.ab_key = None
                self._challenge(self.incumbent.resolve(c.samples))
                continue
            self.pool.pump()
            self._finish(*done, cached=False)

    def _finish(self, arm: Arm, proposal: Proposal, job: JobSpec, result: EvalResult, cached: bool) -> None:
        attrs = {"verdict": result.verdict.value, "reason": result.reason}
        if result.verdict is not Verdict.OK:
            arm.strategy.tell(proposal, None, failed=True, attrs=attrs)
        else:
            arm.strategy.tell(proposal, result.objective_ms, attrs=attrs)
        self.done += 1
        arm.stats.add(result)
        entry = Entry(job.key, arm.variant.name, dict(proposal.params), result, job)
        self.measured.append(entry)
        self._challenge(self.incumbent.offer(entry))
        if self.on_event is not None:
            best = self.incumbent.best
            self.on_event(
                Event(
                    self.task.name,
                    arm.variant.name,
                    self.done,
                    self.budget,
                    result,
                    cached,
                    best.ms if best else None,
                    f"{best.variant} {best.params}" if best else None,
                )
            )

    def _challenge(self, pair: tuple[Entry, Entry] | None) -> None:
        if pair is not None:
            self.ab_key = f"ab:{pair[0].key}:{pair[1].key}"
            assert pair[0].spec is not None and pair[1].spec is not None
            self.pool.submit_remeasure(self.ab_key, pair[0].spec, pair[1].spec)

    # --- helpers shared with final.py --------------------------------------------------------------
    def job_spec(self, arm: Arm, params: dict[str, Any], key: str) -> JobSpec:
        if self._base is None:
            self._base = JobSpec.of(
                Job(
                    self.task,
                    arm.variant,
                    {},
                    seeds=self.spec.seeds,
                    target=self.spec.target,
                    timeout_s=self.spec.timeout_s,
                ),
                "",
            )
        return replace(self._base, key=key, variant=arm.variant, params=dict(params))

    def save(self, arm: Arm, result: EvalResult, trial_number: int | None, final: bool = False) -> None:
        """Queue a completed result for the next :meth:`commit` (not durable before it)."""
        self.results.add(
            result,
            task=self.task,
            variant_id=arm.record_id,
            variant_hash=arm.variant.source_hash,
            study_name=arm.study_name,
            trial_number=trial_number,
            final=final,
        )

    def commit(self) -> None:
        """Make every queued result durable: one transaction on the writer's connection."""
        self.results.flush()

    def _load_history(self) -> None:
        """On resume, the incumbent is rebuilt from this campaign's stored measurements, in order."""
        if not self.spec.resume:
            return
        with self.db.session() as s:
            rows = store.results(s, campaign=self.spec.name, task=self.task.name, limit=100_000)
            history = [
                (r.id, r.variant_hash, r.params, store.result_of(r))
                for r in rows
                if r.verdict == Verdict.OK.value and r.objective_ms is not None and not r.final
            ]
        self.incumbent.remeasure = False  # history is judged on its stored numbers, not re-measured
        for _, vhash, params, result in sorted(history, key=lambda h: h[0]):
            arm = self.by_hash.get(vhash)
            if arm is not None:
                key = f"{arm.study_name}@{store.params_key(params)}"
                entry = Entry(key, arm.variant.name, params, result, self.job_spec(arm, params, key))
                self.measured.append(entry)
                self.incumbent.offer(entry)
        self.incumbent.remeasure = self.pool.can_remeasure
