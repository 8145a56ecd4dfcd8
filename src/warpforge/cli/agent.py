"""``warpforge agent ...``: the agent's stored LLM calls (never a key: nothing stored holds one).

Example::

    $ warpforge agent transcripts my-campaign            # one row per call: outcome, tokens, cost, variant
    $ warpforge agent transcripts my-campaign --full     # with the messages, answers and reasoning
    $ warpforge agent transcripts my-campaign --json
    $ warpforge agent transcripts plans-demo              # a plan search: its calls, then the plans proposed
"""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from rich.markup import escape

from warpforge.errors import UsageError
from warpforge.inert import InertConsole

app = typer.Typer(help="The LLM agent: its stored calls.", no_args_is_help=True)
out = InertConsole()
err = InertConsole(stderr=True)


@app.command("transcripts")
def transcripts(
    campaign: str = typer.Argument(..., metavar="CAMPAIGN"),
    task: str | None = typer.Option(None, "--task", help="only this task's calls"),
    full: bool = typer.Option(False, "--full", help="also print each call's messages, answer and reasoning"),
    db: str | None = typer.Option(None, "--db", help="database URL (default: $WARPFORGE_DB, else the SQLite file)"),
    json_out: bool = typer.Option(False, "--json", help="print machine-readable JSON on stdout"),
    wide: bool = typer.Option(False, "--wide", help="one fact per column (needs ~150 columns)"),
) -> None:
    """The LLM calls of a campaign: model, finish reason, tokens, latency, cost, outcome, variant and verdicts."""
    from warpforge.agent.transcripts import read_runs, read_transcripts
    from warpforge.db.queries import Reader

    reader = Reader(db)  # a reader: a missing database is an error, an older schema is never migrated here
    if reader.campaign(campaign) is None:
        raise UsageError(f"no campaign {campaign!r} in {reader.db.safe_url}: list them with `warpforge results`")
    database = reader.db
    calls = read_transcripts(database, campaign, task)
    runs = [r for r in read_runs(database, campaign) if task is None or r["task"] == task]
    from warpforge.parallel.plan_agent.store import read_agent_plans

    plans = [p for p in read_agent_plans(database, campaign) if task is None or p.task == task]
    if json_out:
        doc = {"campaign": campaign, "runs": runs, "calls": [c.to_dict() for c in calls]}
        if plans:  # a plan search's proposals (plan search --proposer llm)
            doc["plans"] = [p.to_dict() for p in plans]
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
        return
    if not calls:
        out.print(f"campaign {campaign!r} made no LLM calls (proposer: template, or the agent never ran)", markup=False)
        return
    from warpforge.term_tables import calls_table

    table = calls_table(calls, f"LLM calls of {campaign}", wide=wide)  # fits 80 columns unless --wide
    out.print(table)
    if plans:
        from warpforge.cli.plan_agent import proposals_table

        out.print(proposals_table(plans, f"plans proposed in {campaign}"))
    for run in runs:
        out.print(_run_line(run), highlight=False, markup=False)
    if full:
        for c in calls:
            out.rule(escape(f"{c.task} {c.call_key} ({c.outcome})"))  # stored text: never Rich markup
            for m in c.messages:
                out.print(f"[bold]{escape(str(m['role']))}[/bold]", highlight=False)
                out.print(m["content"], markup=False, highlight=False)
            if c.response.reasoning:
                out.print("[bold]reasoning[/bold]", highlight=False)
                out.print(c.response.reasoning, markup=False, highlight=False)
            out.print("[bold]answer[/bold]", highlight=False)
            out.print(c.response.content, markup=False, highlight=False)
            if c.message:
                out.print(f"[bold]why not used:[/bold] {escape(c.message)}", highlight=False)


def _run_line(r: dict[str, Any]) -> str:
    outcomes = ", ".join(f"{k} {n}" for k, n in sorted(r["outcomes"].items()))
    return (
        f"{r['task']}: {r['calls']} calls ({outcomes}), {r['prompt_tokens']}+{r['completion_tokens']} tokens, "
        f"${r['cost_usd']:.4f}, {r['wall_s']:.0f} s; stopped by {r['stop_reason'] or 'the campaign'}"
    )


def proposer_config_for_run(
    proposer: str, llm_replay: str | None, db: str | None, target: str, seed: int | None
) -> dict[str, Any]:
    """``warpforge run``'s proposer options; a usage error (UsageError, exit 2) before anything starts.

    With ``--llm-replay C`` the agent reuses C's stored settings (budgets, in_flight, seed) so that it asks the
    same calls, and answers them from C's transcripts.
    """
    if proposer != "llm":
        if llm_replay is not None:
            raise UsageError("--llm-replay needs --proposer llm")
        return {}
    config: dict[str, Any] = {"target": target}
    if seed is not None:
        config["seed"] = seed
    if llm_replay is None:
        from warpforge.agent.config import load_llm_config

        load_llm_config()  # no LLM configured: one line saying what to set (LLMConfigError is a UsageError)
        return config
    from warpforge.agent.transcripts import read_runs
    from warpforge.db.queries import Reader

    reader = Reader(db)  # replays a stored campaign: it must exist (and is read, never migrated, here)
    if reader.campaign(llm_replay) is None:
        raise UsageError(f"--llm-replay: no campaign {llm_replay!r} in {reader.db.safe_url}")
    runs = read_runs(reader.db, llm_replay)
    if not runs:
        raise UsageError(f"--llm-replay: campaign {llm_replay!r} made no LLM calls (was it run with --proposer llm?)")
    return {**runs[0]["settings"], **config, "replay": llm_replay}
