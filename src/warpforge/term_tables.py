"""Tables that fit an 80-column terminal by choosing what to show.

Rich shrinks every column of a table that is too wide until each is one to four characters wide, which is what
``agent transcripts`` printed at 80 columns (11 columns of ~7 characters each). Instead, these tables stack two
related facts in one cell (task over call key, model over finish reason, variant over verdicts) and print long
free text (an LLM's rationale) under the table, numbered, where the terminal can wrap it as prose. The whole
values are always in ``--json``; ``--wide`` prints one fact per column for a terminal that has the room.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text


def _verdicts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}:{n}" for k, n in sorted(counts.items())) or "-"


def calls_table(calls: Sequence[Any], title: str, wide: bool = False) -> Table:
    """The LLM calls of ``agent transcripts`` (``transcripts.CallRecord`` rows).

    Narrow (the default): 7 columns whose widest cell is ~14 characters, so the table is about 75 columns wide
    for the built-in call keys (``r1.s0.a0``) and model names up to ~14 characters; longer names wrap in
    their cell rather than being cut.
    """
    t = Table(title=escape(title))
    if wide:
        for col in (
            "id",
            "task",
            "call",
            "model",
            "finish",
            "tokens in/out",
            "s",
            "USD",
            "outcome",
            "variant",
            "verdicts",
        ):
            t.add_column(col)
        for c in calls:
            a = c.response  # the client's own answer, embedded in the record (agent/transcripts.py)
            t.add_row(
                str(c.id),
                escape(c.task),
                c.call_key,
                escape(a.model),
                a.finish_reason or "-",
                f"{a.prompt_tokens}/{a.completion_tokens}",
                f"{a.latency_s:.1f}",
                f"{a.cost_usd:.4f}",
                _outcome(c),
                (c.variant_hash or "")[:12] or "-",
                _verdicts(c.verdicts),
            )
        return t
    t.add_column("id", justify="right", no_wrap=True)
    t.add_column("task\ncall", overflow="fold")
    t.add_column("model\nfinish", overflow="fold")
    t.add_column("tokens\nin/out", justify="right", no_wrap=True)
    t.add_column("s\nUSD", justify="right", no_wrap=True)
    t.add_column("outcome", overflow="fold")
    t.add_column("variant\nverdicts", overflow="fold")
    for c in calls:
        a = c.response
        t.add_row(
            str(c.id),
            f"{escape(c.task)}\n{c.call_key}",
            f"{escape(a.model)}\n{a.finish_reason or '-'}",
            f"{a.prompt_tokens}/\n{a.completion_tokens}",
            f"{a.latency_s:.1f}\n{a.cost_usd:.4f}",
            _outcome(c),
            f"{(c.variant_hash or '')[:12] or '-'}\n{_verdicts(c.verdicts)}",
        )
    return t


def _outcome(c: Any) -> str:
    # "replayed" on its own line: a replayed call was answered from a stored transcript, not bought again.
    return escape(c.outcome) + ("\n(replayed)" if c.replayed else "")


def proposals_view(proposals: Iterable[Any], title: str) -> RenderableType:
    """Plans an LLM proposed (``plan_store.AgentPlanRecord``): a table of the numbers, then each proposal's
    rationale (or why it was not used) as a numbered paragraph.

    A rationale column would be squeezed to one word per line at 80 columns beside the plan's label, hence
    the paragraphs. The model's text is escaped: Rich would read ``[bold]`` or ``[/]`` in it as markup.
    """
    t = Table(title=escape(title))
    t.add_column("#", justify="right", no_wrap=True)
    t.add_column("call", overflow="fold")
    t.add_column("plan", overflow="fold")
    t.add_column("outcome", overflow="fold")
    t.add_column("rank", justify="right", no_wrap=True)
    t.add_column("tokens/s", justify="right", no_wrap=True)
    t.add_column("GiB", justify="right", no_wrap=True)
    notes: list[Text] = []
    for i, p in enumerate(proposals, 1):
        label = ", ".join(f"{k}={v}" for k, v in p.plan.items()) or "(defaults)"
        t.add_row(
            str(i),
            f"{p.call_id} {p.call_key}",
            escape(label),
            escape(p.outcome),
            str(p.rank or "-"),
            f"{p.tokens_per_s:,.0f}" if p.tokens_per_s else "-",
            f"{p.peak_mem_gb:.1f}" if p.peak_mem_gb else "-",
        )
        why = p.rationale if p.outcome == "ranked" else p.message
        head = "rationale" if p.outcome == "ranked" else "not used"
        notes.append(Text(f"#{i} {head}: ") + Text(why or "-"))  # Text(): never read as markup
    return Group(t, *notes)
