"""``warpforge plan search --proposer llm``: the plan agent behind the plan CLI (parallel/plan_agent does the work).

``cli/plan.py`` hands over here when ``--proposer llm`` (or ``--llm-replay``) is given; without an LLM
configured it stops with one line saying what to set (exit 2). ``--llm-replay CAMPAIGN`` takes the stored
campaign's search settings, agent settings and model list, checks that ``--model``/``--cluster``/``--nodes``
name the same specs, and answers every call from the stored transcripts (no network).

Example::

    $ export WARPFORGE_LLM_MODEL=gpt-5-mini OPENAI_API_KEY=...
    $ warpforge plan search --model llama3-8b --cluster dgx-h100 --proposer llm --campaign plans-8b --max-calls 4
    $ warpforge plan search --model llama3-8b --cluster dgx-h100 --llm-replay plans-8b --proposer llm --json
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

from warpforge.parallel.errors import SpecError
from warpforge.parallel.plan_agent.agent import (
    PlanAgent,
    PlanAgentResult,
    PlanAgentSettings,
    ReplayClient,
    SearchOptions,
)
from warpforge.parallel.specs import ClusterSpec, ModelSpec


def search_options(**fields: Any) -> SearchOptions:
    """The ``plan search`` flags as stored with the campaign (a replay searches with the same ones)."""
    return SearchOptions.model_validate(fields)


def _settings(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> PlanAgentSettings:
    from pydantic import ValidationError

    from warpforge.parallel.specs import one_line

    try:
        return PlanAgentSettings.model_validate({**base, **{k: v for k, v in overrides.items() if v is not None}})
    except ValidationError as exc:
        raise SpecError(f"bad plan agent settings: {one_line(exc)}") from None


def _replay_setup(
    db: Any, replay: str, model: ModelSpec, cluster: ClusterSpec
) -> tuple[SearchOptions, dict[str, Any], Any, list[Any]]:
    from warpforge.agent.config import LLMConfig
    from warpforge.agent.transcripts import read_runs, read_transcripts
    from warpforge.parallel.plan_agent.agent import plan_task
    from warpforge.parallel.plan_agent.store import campaign_spec

    spec = campaign_spec(db, replay)
    if spec is None:
        raise SpecError(f"--llm-replay: no campaign {replay!r} in {db.safe_url}")
    if spec.get("kind") != "plan":
        raise SpecError(f"--llm-replay: campaign {replay!r} is not a plan search; replay kernels with warpforge run")
    if spec.get("model_spec") != model.model_dump(mode="json") or spec.get("cluster_spec") != cluster.model_dump(
        mode="json"
    ):
        raise SpecError(
            f"--llm-replay: campaign {replay!r} planned {spec['model_spec'].get('name')} on "
            f"{spec['cluster_spec'].get('name')} x{spec['cluster_spec'].get('nodes')} nodes; pass the "
            "same --model, --cluster, --nodes and --seq"
        )
    task = plan_task(model, cluster)
    runs = [r for r in read_runs(db, replay) if r["task"] == task]
    if not runs:
        raise SpecError(f"--llm-replay: campaign {replay!r} made no LLM calls")
    settings = dict(runs[0]["settings"])
    llm = LLMConfig(models=tuple(settings.pop("models")))
    return SearchOptions.model_validate(spec["search"]), settings, llm, read_transcripts(db, replay, task)


def llm_plan_search(
    model: ModelSpec,
    cluster: ClusterSpec,
    options: SearchOptions,
    *,
    db_url: str | None,
    campaign: str | None,
    replay: str | None,
    overrides: Mapping[str, Any],
    json_out: bool,
) -> None:
    """Run (or replay) the plan agent and print its answer; usage errors raise SpecError (exit 2)."""
    from warpforge.agent.config import LLMConfigError, load_llm_config
    from warpforge.db.session import Database
    from warpforge.parallel.plan_agent.store import CampaignExists

    database = Database(db_url)
    client: Any = None
    if replay is not None:
        database = Database(db_url, create=False)  # replays a stored campaign: the database must exist
        database.upgrade()
        options, base, llm, records = _replay_setup(database, replay, model, cluster)
        client = ReplayClient(records, llm)
    else:
        try:
            llm = load_llm_config()
        except LLMConfigError as exc:
            raise SpecError(str(exc)) from None
        base = dict(llm.plan_agent)
    settings = _settings(base, overrides)
    name = campaign or (
        f"{replay}-replay-{int(time.time())}"
        if replay
        else f"plans-{model.name}-{cluster.name}x{cluster.nodes}-{int(time.time())}"
    )
    agent = PlanAgent(
        model, cluster, options, settings, llm=llm, db_url=db_url, campaign=name, client=client, replay_of=replay
    )
    try:
        result = asyncio.run(agent.run())
    except CampaignExists as exc:
        raise SpecError(str(exc)) from None
    if json_out:
        doc = result.search.to_json()
        doc["db"] = {"url": database.safe_url, "stored": result.stored_plans}
        doc["agent"] = agent_json(result)
        print(json.dumps(doc, indent=2))
    else:
        print_agent(result, database.safe_url)


def agent_json(r: PlanAgentResult) -> dict[str, Any]:
    return {
        "campaign": r.campaign,
        "stop_reason": r.stop_reason,
        "calls": r.calls,
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "cost_usd": r.cost_usd,
        "outcomes": r.outcomes,
        "replay_mismatches": r.replay_mismatches,
        "proposals": [p.to_dict() for p in r.proposals],
    }


def print_agent(r: PlanAgentResult, where: str) -> None:
    from warpforge.cli.plan_render import print_search
    from warpforge.inert import InertConsole

    print_search(r.search, None, where, r.stored_plans)
    console = InertConsole()
    console.print(proposals_table(r.proposals, f"plans proposed by the LLM (campaign {r.campaign})"))
    console.print(r.note, highlight=False, markup=False)


def proposals_table(proposals: Any, title: str) -> Any:
    """Proposed plans as a table plus their rationales (``term_tables.proposals_view``: fits 80 columns)."""
    from warpforge.term_tables import proposals_view

    return proposals_view(proposals, title)
