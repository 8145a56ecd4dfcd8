"""``warpforge spaces``: the recorded GPU tuning spaces bench-search can use (logic in warpforge/spaces.py)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from warpforge.spaces import FULL_SET, list_spaces, spaces_tables, unique_paths


def spaces_command(
    dirs: list[Path] = typer.Option(
        [], "--dir", help="also list the spaces under this folder (<kernel>/<gpu>.json.gz)", show_default=False
    ),
    paths: bool = typer.Option(False, "--paths", help="print one path per space name, one a line (for bench-search)"),
    json_out: bool = typer.Option(False, "--json", help="print machine-readable JSON on stdout"),
) -> None:
    """List the recorded GPU tuning spaces bench-search can use: the shipped ones, --dir, ../shared/spaces."""
    import sys

    from warpforge.inert import InertConsole

    found = list_spaces(list(dirs))
    if json_out:
        sys.stdout.write(json.dumps({"spaces": [s.to_dict() for s in found], "full_set": FULL_SET}, indent=2) + "\n")
        return
    if paths:
        sys.stdout.write("".join(f"{p}\n" for p in unique_paths(found)))
        return
    console = InertConsole()
    for table in spaces_tables(found):
        console.print(table)
    console.print(
        f"bench-search them: warpforge bench-search $(warpforge spaces --paths) --budgets 50,100; {FULL_SET}",
        highlight=False,
    )
