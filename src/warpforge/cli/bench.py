"""``warpforge bench-search``: how fast each sampler approaches the optimum of recorded tuning spaces.

The measurement is search/bench/harness.py; this module parses the options and prints the table, the notes
under it and, with ``--baselines kt``, the verdicts against Kernel Tuner (search/bench/targets.py). Errors
go through the CLI's one boundary (cli/boundary.py): a bad option or file is exit 2.

Example::

    warpforge bench-search ../shared/spaces/pnpoly/RTX_3090.json.gz --samplers random,wf-default --repeats 5
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import typer

from warpforge.errors import UsageError, WarpforgeError
from warpforge.search.bench.harness import DEFAULT_BUDGETS
from warpforge.search.samplers.registry import DEFAULT_SAMPLER


def _parse_ints(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v <= 0 for v in values):
        raise UsageError(f"{what} must be positive integers separated by commas, got {text!r}")
    return values


def bench_search(
    space_files: list[Path] = typer.Argument(..., help="Kernel Tuner cache (.json/.json.gz) or T4 files."),
    samplers: str = typer.Option(f"random,tpe,{DEFAULT_SAMPLER}", help="Comma-separated registry names."),
    budgets: str = typer.Option(",".join(map(str, DEFAULT_BUDGETS)), help="Evaluation budgets, comma-separated."),
    repeats: int = typer.Option(10, min=1, help="Independent searches per (space, sampler)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON records instead of a table."),
    seed: int = typer.Option(0, help="Seed of the first repeat (repeat r uses seed + r)."),
    jobs: int = typer.Option(0, help="Worker processes (0: one per CPU core)."),
    baselines: str = typer.Option(
        "",
        help="'kt': every Kernel Tuner 1.5 strategy beside ours (optional extra "
        "warpforge[kt]); 'kt:genetic_algorithm,kt:bayes_opt': those.",
    ),
    save_json: Path | None = typer.Option(
        None, "--save-json", help="Also write the JSON records to this file (the table is printed as usual)."
    ),
) -> None:
    """Measure how fast each sampler approaches the optimum of recorded tuning spaces."""
    from warpforge.search.bench.harness import bench, render_table, table_notes

    names = [s.strip() for s in samplers.split(",") if s.strip()]
    if not names:
        raise UsageError("--samplers is empty")
    budget_list = _parse_ints(budgets, "--budgets")
    if baselines.strip():
        from warpforge.search.bench.kt_baseline import expand_baselines

        names += [n for n in expand_baselines(baselines) if n not in names]
    for f in space_files:
        if not Path(f).is_file():
            raise UsageError(f"{f}: no such file (pass Kernel Tuner cache or T4 files)")
    if save_json is not None and (save_json.is_dir() or not save_json.parent.is_dir()):
        raise UsageError(
            f"--save-json {save_json}: "
            + ("is a directory" if save_json.is_dir() else f"no such directory {save_json.parent}")
        )
    records = bench(list(space_files), names, budget_list, repeats, seed, jobs or None)
    text = json.dumps([asdict(r) for r in records], indent=1)
    if json_out:
        typer.echo(text)
    else:
        from warpforge.inert import InertConsole

        console = InertConsole()  # the terminal's width; piped, $COLUMNS or 80 (the table folds to fit)
        console.print(render_table(records, console.width))
        for note in table_notes(records):
            console.print(note, highlight=False)
        from warpforge.search.bench.targets import render_targets

        targets = render_targets(records)
        if targets is not None:
            # The targets table has no narrow layout yet: piped, it keeps the 160 columns it always had
            (console if console.is_terminal else InertConsole(width=max(console.width, 160))).print(targets)
            console.print(
                "difference: the default minus the best Kernel Tuner strategy, ± one standard error of "
                "the difference; 'met' = at or above within one standard error. Spaces with the same "
                "records (A100_T4 is A100) count once.",
                highlight=False,
            )
    if save_json is not None:  # after printing: a run that took an hour is on the screen whatever happens here
        try:
            save_json.write_text(text + "\n")
        except OSError as exc:
            raise WarpforgeError(f"--save-json {save_json}: {exc.strerror or exc}; the records are not saved") from None
