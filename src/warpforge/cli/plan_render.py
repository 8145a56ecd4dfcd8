"""Rich tables for ``warpforge plan`` (the human-readable side of ``--json``).

Titles count GPUs and nodes apart (``64 GPUs (8 x dgx-h100)``: the cluster preset names a node type), and a
legend under each table spells out every abbreviation it shows (``norc``, ``z2``, ``v2``, ``n/v``) and what a
gap in the ranks means.

Example::

    >>> gpus_label(64, "dgx-h100", 8)
    '64 GPUs (8 x dgx-h100)'
    >>> legend(["tp2 pp2 dp4 cp4 mb1 norc z2"])  # doctest: +NORMALIZE_WHITESPACE
    'plan: tp pp dp cp = tensor, pipeline, data, context parallel sizes; mbN = N sequences per micro-batch;
     norc = no activation recompute; zN = ZeRO stage N (z1 shards optimizer states, z2 also gradients, z3 also
     weights)'
    >>> from warpforge.parallel import load_model, load_cluster, PlanConfig, predict
    >>> print_prediction(predict(load_model("llama3-8b"), load_cluster("dgx-h100"), PlanConfig(dp=8)))
    ... # doctest: +SKIP
"""

from __future__ import annotations

import re
import textwrap

from rich.markup import escape
from rich.table import Table

from warpforge.inert import InertConsole
from warpforge.parallel.explain import LABELS, time_split
from warpforge.parallel.export import Export
from warpforge.parallel.prediction import Prediction
from warpforge.parallel.search import SearchResult


def _console() -> InertConsole:
    return InertConsole(soft_wrap=False)


def gpus_label(gpus: int, cluster: str, gpus_per_node: int | None) -> str:
    """``64 GPUs (8 x dgx-h100)``: the GPUs a plan uses and the nodes of the cluster preset they take."""
    if not gpus_per_node or gpus_per_node < 1:
        return f"{gpus} GPUs of {cluster}"
    nodes = -(-gpus // gpus_per_node)
    if nodes * gpus_per_node == gpus:
        return f"{gpus} GPU{'s' if gpus != 1 else ''} ({nodes} x {cluster})"
    return f"{gpus} GPU{'s' if gpus != 1 else ''} of {nodes} x {cluster} ({gpus_per_node} GPUs per node)"


_SIZES = {"tp": "tensor", "pp": "pipeline", "dp": "data", "cp": "context", "ep": "expert", "etp": "expert tensor"}
_RECOMPUTE = {
    "norc": "no activation recompute",
    "sel": "selective activation recompute",
    "full": "full activation recompute",
}


def legend(labels: list[str]) -> str:
    """What the abbreviations in these plan labels (``PlanConfig.short()``) mean; only those that appear."""
    tokens = {t for label in labels for t in label.split()}
    heads = {t.rstrip("0123456789") for t in tokens} | tokens  # "z2" -> "z"; "fp8" stays whole too
    sizes = [k for k in _SIZES if k in heads]
    parts = [f"{' '.join(sizes)} = {', '.join(_SIZES[k] for k in sizes)} parallel sizes"] if sizes else []
    if "mb" in heads:
        parts.append("mbN = N sequences per micro-batch")
    if "v" in heads:
        parts.append("vN = N interleaved model chunks per pipeline rank")
    parts += [f"{k} = {v}" for k, v in _RECOMPUTE.items() if k in heads]
    if "z" in heads:
        parts.append("zN = ZeRO stage N (z1 shards optimizer states, z2 also gradients, z3 also weights)")
    if "fp8" in heads:
        parts.append("fp8 = FP8 GEMMs (Transformer Engine)")
    return "plan: " + "; ".join(parts)


def _export(console: InertConsole, ex: Export | None) -> None:
    if ex is None:
        return
    console.print(f"\n[bold]{ex.format} export[/bold]")
    console.print(ex.text, markup=False, highlight=False)
    for note in ex.notes:
        console.print(f"[dim]note: {escape(note)}[/dim]")


def _band(pred: Prediction) -> str:
    b = pred.error_band
    if b is None:
        return "-"
    return b.label() if b.validated else f"[yellow]{b.label()}[/yellow]"


def _fits(pred: Prediction) -> str:
    """yes / NO / uncertain with the validated memory band (fit_verdict.py)."""
    if pred.fit is None:
        return "yes" if pred.fits else "[red]NO[/red]"
    word = {"yes": "yes", "no": "[red]NO[/red]", "uncertain": "[yellow]uncertain[/yellow]"}[pred.fit.verdict]
    return f"{word} (±{pred.fit.band:.0%}: {pred.fit.low_gib:.1f}-{pred.fit.high_gib:.1f} GiB)"


def print_prediction(pred: Prediction, ex: Export | None = None, gpus_per_node: int | None = None) -> None:
    console = _console()
    # Model and cluster names come from the user's --model/--cluster (a file's name field): text, not markup.
    head = Table(
        title=escape(f"{pred.model} on {gpus_label(pred.gpus, pred.cluster, gpus_per_node)}: {pred.plan.short()}")
    )
    head.add_column("metric")
    head.add_column("value", justify="right")
    rows = [
        ("step time", f"{pred.step_time_s:.3f} s"),
        ("tokens/s", f"{pred.tokens_per_s:,.0f}"),
        ("MFU / HFU", f"{pred.mfu:.1%} / {pred.hfu:.1%}"),
        ("validated error", _band(pred)),
        ("peak memory", f"{pred.peak_mem_gb:.1f} of {pred.hbm_gb:g} GiB (pipeline rank {pred.memory.stage})"),
        ("fits", _fits(pred)),
        ("global batch / micro-batches", f"{pred.global_batch} / {pred.num_microbatches}"),
        ("bubble", f"{pred.bubble_fraction:.1%}"),
    ]
    for k, v in rows:
        head.add_row(k, v)
    console.print(head)
    console.print(legend([pred.plan.short()]), highlight=False)

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
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    _export(console, ex)


def indistinguishable(res: SearchResult) -> str | None:
    """A line saying which top plans the simulator cannot tell apart: their predicted step times differ by less
    than its validated error (plans 0.8% apart were ranked under a ±21% band without a word)."""
    band = res.plans[0].prediction.error_band if res.plans else None
    if band is None or not band.validated or not band.mape or len(res.plans) < 2:
        return None
    best = res.plans[0].prediction.step_time_s
    close = [r for r in res.plans[1:] if (r.prediction.step_time_s - best) / best < band.mape]
    if not close:
        return None
    spread = (close[-1].prediction.step_time_s - best) / best
    ranks = ", ".join(f"#{r.rank}" for r in [res.plans[0], *close])
    return (
        f"{ranks} are indistinguishable: their predicted step times differ by at most {spread:.1%}, under "
        f"the ±{band.mape:.0%} validated error; time them on the cluster (plan export) to choose"
    )


def print_search(res: SearchResult, ex: Export | None, db_url: str | None, stored: int) -> None:
    console = _console()
    per_node = res.gpus // res.nodes if res.nodes else None
    title = (
        f"best plans for {res.model} on {gpus_label(res.gpus, res.cluster, per_node)}, global batch {res.global_batch}"
    )
    t = Table(title=escape(title))
    for col, just in (
        ("#", "right"),
        ("plan", "left"),
        ("step s", "right"),
        ("tokens/s", "right"),
        ("MFU", "right"),
        ("±err", "right"),
        ("GiB", "right"),
        ("where the time goes", "left"),
    ):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in res.plans:
        p = r.prediction
        label = p.plan.short() + (r" \[enqueued]" if r.source == "enqueued" else "")  # \[ : literal, not Rich markup
        b = p.error_band
        err = f"±{b.mape:.0%}" if b and b.validated and b.mape else "n/v"
        t.add_row(
            str(r.rank),
            label,
            f"{p.step_time_s:.2f}",
            f"{p.tokens_per_s:,.0f}",
            f"{p.mfu:.1%}",
            err,
            f"{p.peak_mem_gb:.1f}" + ("?" if p.fit and p.fit.verdict == "uncertain" else ""),
            time_split(p, 2).removeprefix("time: "),
        )
    console.print(t)
    shown = [r.prediction.plan.short() for r in res.plans]
    console.print(legend(shown), highlight=False)
    console.print(
        "step s = predicted seconds per step; GiB = peak memory per GPU; ±err = the simulator's measured "
        "error for this GPU family, precision and model kind (n/v: not validated); GiB? = may not "
        "fit: the validated memory band crosses HBM",
        highlight=False,
    )
    ranks = [r.rank for r in res.plans]
    if ranks and ranks != list(range(1, len(ranks) + 1)):
        console.print(
            f"# = rank among all {res.feasible} fitting plans; a gap is a faster plan with the same "
            "layout (tp, pp, dp, cp, ep) as one shown, left out so each row is another layout",
            highlight=False,
        )
    console.print("[bold]why[/bold]")
    for r in res.plans:
        for line in r.why[2:]:
            console.print(hanging(f"  #{r.rank} {line}", console.width), markup=False, highlight=False)
    band = res.plans[0].prediction.error_band if res.plans else None
    if band is not None:
        console.print(f"validated error of these predictions: {band.label()}")
    tie = indistinguishable(res)
    if tie:
        console.print(tie, highlight=False)
    for note in res.plans[0].prediction.notes if res.plans else []:
        console.print(f"[yellow]note (#1):[/yellow] {escape(note)}")
    console.print(
        f"{res.method} search ({res.framework}, {res.precision}): {res.evaluated} plans evaluated "
        f"of {res.space_size}, {res.feasible} fit, {res.elapsed_s:.1f} s wall, {res.cpu_s:.1f} s CPU"
    )
    for e in res.enqueued:
        console.print(f"enqueued {e.plan.short()}: {e.status} {e.message}", markup=False)  # may hold "[..]"
    if db_url:
        console.print(f"stored {stored} plans in {db_url}", markup=False)
    _export(console, ex)


# A number stays with its unit ("0.0955 s", "6.7 GiB") and a name or comparison with its value ("rank 0",
# "dp 4", "(vs 8)"):
# folded by the console at 80 columns, "0.372 s vs 0.0955" ended one line and "s" began the next.
_GLUED = re.compile(
    r"(?<=\d) (?=(?:s|ms|GiB|GB|TB|tok/s)\b)|(?<=\(vs) |(?<=\d) (?=\(vs)"
    r"|(?:(?<=\brank)|(?<=\bzero)|(?<=\b[tpdce]p)) (?=\d)"
)


def hanging(text: str, width: int, indent: int = 6) -> str:
    """``text`` wrapped to ``width`` with later lines indented, never between a number and its unit."""
    glued = _GLUED.sub("\u00a0", text)  # textwrap breaks only at ASCII whitespace
    lines = textwrap.wrap(
        glued,
        width=max(width, 40),
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
        drop_whitespace=True,
    )
    return "\n".join(lines).replace("\u00a0", " ")
