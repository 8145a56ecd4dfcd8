"""Rich tables for ``warpforge plan`` (the human-readable side of ``--json``).

Example::

    >>> from warpforge.parallel import load_model, load_cluster, PlanConfig, predict
    >>> print_prediction(predict(load_model("llama3-8b"), load_cluster("dgx-h100"), PlanConfig(dp=8)))
    ... # doctest: +SKIP
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from warpforge.parallel.explain import LABELS, time_split
from warpforge.parallel.export import Export
from warpforge.parallel.prediction import Prediction
from warpforge.parallel.search import SearchResult


def _console() -> Console:
    return Console(soft_wrap=False)


def _export(console: Console, ex: Export | None) -> None:
    if ex is None:
        return
    console.print(f"\n[bold]{ex.format} export[/bold]")
    console.print(ex.text, markup=False, highlight=False)
    for note in ex.notes:
        console.print(f"[dim]note: {note}[/dim]")


def _band(pred: Prediction) -> str:
    b = pred.error_band
    if b is None:
        return "-"
    return b.label() if b.validated else f"[yellow]{b.label()}[/yellow]"


def print_prediction(pred: Prediction, ex: Export | None = None) -> None:
    console = _console()
    head = Table(title=f"{pred.model} on {pred.gpus} x {pred.cluster}: {pred.plan.short()}")
    head.add_column("metric")
    head.add_column("value", justify="right")
    rows = [
        ("step time", f"{pred.step_time_s:.3f} s"),
        ("tokens/s", f"{pred.tokens_per_s:,.0f}"),
        ("MFU / HFU", f"{pred.mfu:.1%} / {pred.hfu:.1%}"),
        ("validated error", _band(pred)),
        ("peak memory", f"{pred.peak_mem_gb:.1f} of {pred.hbm_gb:g} GiB (pipeline rank {pred.memory.stage})"),
        ("fits", "yes" if pred.fits else "[red]NO[/red]"),
        ("global batch / micro-batches", f"{pred.global_batch} / {pred.num_microbatches}"),
        ("bubble", f"{pred.bubble_fraction:.1%}"),
    ]
    for k, v in rows:
        head.add_row(k, v)
    console.print(head)

    tb = Table(title="time per step")
    tb.add_column("component")
    tb.add_column("seconds", justify="right")
    tb.add_column("share", justify="right")
    for k, frac in pred.time.fractions().items():
        if frac > 0:
            tb.add_row(LABELS[k], f"{getattr(pred.time, k):.3f}", f"{frac:.1%}")
    mb = Table(title=f"memory per GPU (GiB, pipeline rank {pred.memory.stage})")
    mb.add_column("component")
    mb.add_column("GiB", justify="right")
    for k in ("weights", "grads", "optimizer", "activations", "logits", "overhead"):
        mb.add_row(k, f"{getattr(pred.memory, k):.2f}")
    console.print(tb)
    console.print(mb)
    for note in pred.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    _export(console, ex)


def print_search(res: SearchResult, ex: Export | None, db_url: str | None, stored: int) -> None:
    console = _console()
    title = f"best plans for {res.model} on {res.gpus} x {res.cluster} (global batch {res.global_batch})"
    t = Table(title=title)
    for col, just in (("#", "right"), ("plan", "left"), ("step s", "right"), ("tokens/s", "right"),
                      ("MFU", "right"), ("±err", "right"), ("GiB", "right"), ("where the time goes", "left")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in res.plans:
        p = r.prediction
        label = p.plan.short() + (" [enqueued]" if r.source == "enqueued" else "")
        b = p.error_band
        err = f"±{b.mape:.0%}" if b and b.validated and b.mape else "n/v"
        t.add_row(str(r.rank), label, f"{p.step_time_s:.2f}", f"{p.tokens_per_s:,.0f}", f"{p.mfu:.1%}",
                  err, f"{p.peak_mem_gb:.1f}", time_split(p, 2).removeprefix("time: "))
    console.print(t)
    console.print("[bold]why[/bold]")
    for r in res.plans:
        for line in r.why[2:]:
            console.print(f"  #{r.rank} {line}")
    band = res.plans[0].prediction.error_band if res.plans else None
    if band is not None:
        console.print(f"validated error of these predictions: {band.label()}"
                      + ("" if band.validated else " (n/v = not validated)"))
    for note in res.plans[0].prediction.notes if res.plans else []:
        console.print(f"[yellow]note (#1):[/yellow] {note}")
    console.print(f"{res.method} search ({res.framework}, {res.precision}): {res.evaluated} plans evaluated "
                  f"of {res.space_size}, {res.feasible} fit, {res.elapsed_s:.1f} s wall, {res.cpu_s:.1f} s CPU")
    for e in res.enqueued:
        console.print(f"enqueued {e.plan.short()}: {e.status} {e.message}")
    if db_url:
        console.print(f"stored {stored} plans in {db_url}")
    _export(console, ex)
