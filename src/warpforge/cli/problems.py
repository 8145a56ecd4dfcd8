"""``warpforge problems``: the KernelBench problems at hand (logic in warpforge/problems.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from warpforge.problems import FULL_SET, list_problems


def problems_command(
    dirs: list[Path] = typer.Option(
        [],
        "--dir",
        help="also list the problems under this folder (level<N>/*.py, or one level's folder)",
        show_default=False,
    ),
    level: int | None = typer.Option(
        None, "--level", min=1, help="only this level (1 single ops, 2 chains, 3 models)", show_default=False
    ),
    paths: bool = typer.Option(False, "--paths", help="print one file path a line (for warpforge run)"),
    json_out: bool = typer.Option(False, "--json", help="print machine-readable JSON on stdout"),
) -> None:
    """List KernelBench problems to run: the shipped ones, --dir folders, ../shared/kernelbench."""
    from rich.markup import escape
    from rich.table import Table

    from warpforge.inert import InertConsole

    found = [p for p in list_problems(list(dirs)) if level is None or p.level == level]
    if json_out:
        sys.stdout.write(json.dumps({"problems": [p.to_dict() for p in found], "full_set": FULL_SET}, indent=2) + "\n")
        return
    if paths:  # one file per problem: a shipped one and its ../shared copy would run as two tasks of one name
        first = {(p.level, p.name): p.path for p in reversed(found)}
        sys.stdout.write("".join(f"{first[p.level, p.name]}\n" for p in found if first[p.level, p.name] == p.path))
        return
    console = InertConsole()
    table = Table(title="KernelBench problems", caption="paths: warpforge problems --paths")
    table.add_column("level", justify="right", no_wrap=True)
    table.add_column("problem", overflow="fold")
    table.add_column("from", overflow="fold")
    for p in found:
        table.add_row(str(p.level), escape(p.name), escape(p.origin))
    console.print(table)
    # The command alone on its line (64 characters): copied whole at 80 columns.
    console.print(
        "search one with templates (no GPU needed):\n  warpforge run $(warpforge problems --paths | grep 23_Softmax)",
        highlight=False,
        soft_wrap=True,
    )
    console.print(f"{FULL_SET}", highlight=False)
