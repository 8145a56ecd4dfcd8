"""``--llm-replay CAMPAIGN``: the agent answers from a stored campaign's transcripts, with no network at all.

Replay does not depend on timing. A live campaign asks the model while it evaluates, so how many rounds
fit depends on how fast evaluations run (and a replay that reuses stored evaluations runs them instantly).
Replay therefore takes every stored call of the task at the first round, in stored order, with its stored
parents and messages, and re-checks each answer exactly as the live agent did (parse, contract, static
checks, duplicates against the same set in the same order): the outcomes come out the same, and every
variant the original campaign searched is searched again. Each replayed call is stored again under the new
campaign with ``replayed`` set and its original key; the agent then stops with the original's stop reason.

Example::

    $ warpforge run softmax --proposer llm --llm-replay demo --campaign demo-replay
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from warpforge.agent.client import LLMResponse
from warpforge.agent.parse import check_answer
from warpforge.agent.proposers import Candidate, Origin

if TYPE_CHECKING:
    from warpforge.agent.evolution import LLMProposer
    from warpforge.kernels.task import Task


def replay_all(proposer: LLMProposer, task: Task, sources: dict[str, str]) -> list[Candidate]:
    """Every stored call of ``task`` in the replayed campaign, re-checked and re-stored; ``sources`` maps the
    source hashes known so far (the templates) to their sources, for diff answers."""
    from warpforge.agent.transcripts import read_runs, read_transcripts
    from warpforge.db.session import Database

    campaign = str(proposer.settings.replay)
    db = proposer._db_handle() or Database(proposer.db_url)
    records = read_transcripts(db, campaign, task.name)
    if not records:
        raise ValueError(f"--llm-replay: campaign {campaign!r} has no stored LLM calls for task {task.name!r}")
    out: list[Candidate] = []
    for rec in records:
        proposer.calls += 1
        if rec.outcome == "call_failed":
            proposer._record(task, rec.call_key, rec.model, rec.params, list(rec.messages), None, rec.outcome,
                             rec.message, rec.parents, rec.prompt_cut)
            continue
        answer = LLMResponse(rec.model, rec.content, rec.reasoning, rec.finish_reason, rec.prompt_tokens,
                             rec.completion_tokens, 0.0, rec.cost_usd, rec.params)
        proposer.prompt_tokens += answer.prompt_tokens
        proposer.completion_tokens += answer.completion_tokens
        proposer.cost_usd += answer.cost_usd
        name = "llm_" + "_".join(rec.call_key.split(".")[:2])  # r2.s0.a1 -> llm_r2_s0, as the live agent names it
        parent_source = sources.get(rec.parents[0]) if rec.parents else None
        parsed = check_answer(answer.content, task=task.name, finish_reason=answer.finish_reason,
                              seen=proposer.seen, name=name, parent_source=parent_source)
        variant = parsed.variant
        call_id = proposer._record(task, rec.call_key, answer.model, answer.params, list(rec.messages), answer,
                                   parsed.outcome, parsed.message, rec.parents, rec.prompt_cut,
                                   variant.source_hash if variant else None, parsed.ast_hash)
        if parsed.outcome != "accepted" or variant is None or parsed.ast_hash is None:
            continue
        proposer.seen.add(parsed.ast_hash)
        sources[variant.source_hash] = variant.source
        # Only what the original searched: a variant it never evaluated (the campaign skipped it, or ended
        # first) would make the replay search more than the original did.
        if rec.verdicts:
            out.append(Candidate(replace(variant, name=name),
                                 Origin("llm", proposer.name, rec.parents, str(call_id or rec.call_key),
                                        parsed.rationale)))
    runs = [r for r in read_runs(db, campaign) if r["task"] == task.name]
    proposer.stop_reason = (runs[0]["stop_reason"] if runs else "") or "replay_exhausted"
    return out
