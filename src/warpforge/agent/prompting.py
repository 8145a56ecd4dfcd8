"""Prompts from evidence, rendered from Jinja2 templates in ``agent/prompts/``, under a token budget.

The system prompt states the variant contract with one complete example (``prompts/example_variant.txt``,
itself a valid variant of the test task ``double``). The user prompt is a list of sections, each with a
priority: the task (reference source, shapes, dtypes, FLOPs and bytes), the GPU, the parent's source with
its measured times and %-of-speed-of-light, a digested bottleneck, the lineage's recent failures (one line
each), the other variants' standing, and past winners from the database. When the estimate exceeds the
budget, the lowest-priority sections are dropped first and their names are recorded (``Prompt.cut``).

Tokens are estimated as characters / 4 (no tokenizer dependency: the estimate only has to keep prompts
well inside a context window; the server's ``usage`` is what is stored and billed).

Example::

    >>> prompt = build_prompt(task, history, parent=None, budget_tokens=6000)   # doctest: +SKIP
    >>> [m["role"] for m in prompt.messages], prompt.cut                        # doctest: +SKIP
    (['system', 'user'], ())
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from warpforge.agent.prompt_weights import weights_section
from warpforge.kernels.taskdef import Task, dtype_name

PROMPTS = Path(__file__).parent / "prompts"
CHARS_PER_TOKEN = 4
# Architecture facts the GPU data table (data/gpus.json) lacks, from NVIDIA's data sheets and tuning guides.
ARCH_FACTS = {
    "sm_80": "Ampere (A100): 108 SMs, up to 164 KiB shared memory per SM (163 KiB per block), 65536 registers "
    "per SM (255 per thread), 40 MB L2, cp.async pipelining (num_stages).",
    "sm_89": "Ada (L4/L40/RTX 4090): up to 100 KiB shared memory per SM, 65536 registers per SM, fp8 tensor cores.",
    "sm_90": "Hopper (H100/H200): 132 SMs (SXM), up to 228 KiB shared memory per SM (227 KiB per block), 65536 "
    "registers per SM (255 per thread), 50 MB L2, TMA and warp-group MMA (wgmma).",
}


@dataclass(frozen=True)
class Section:
    title: str
    body: str
    priority: int  # higher survives longer under the budget; 100 = never cut

    @property
    def tokens(self) -> int:
        return (len(self.title) + len(self.body)) // CHARS_PER_TOKEN + 4


@dataclass(frozen=True)
class Prompt:
    messages: tuple[Mapping[str, str], ...]
    cut: tuple[str, ...]  # titles of sections dropped to fit the budget
    tokens: int  # estimated


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(PROMPTS)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def example_variant() -> str:
    return (PROMPTS / "example_variant.txt").read_text().strip()


@lru_cache(maxsize=1)
def strict_rules() -> dict[str, str]:
    """The evaluator's strict static rules, worded for the system prompt from the evaluator's own allowlists
    (evaluator/static/grammar/ and vocab.py: read, never copied), so a candidate is never rejected for a rule it
    was not told."""
    from warpforge.evaluator.static import grammar as st
    from warpforge.evaluator.static.checks import ALLOWED_TORCH

    def names(items: Any, fmt: str = "`{}`") -> str:
        return ", ".join(fmt.format(x) for x in sorted(items))

    nodes = {
        "Import": "import",
        "ImportFrom": "from-import",
        "Global": "global",
        "Nonlocal": "nonlocal",
        "Lambda": "lambda",
        "Try": "try",
        "With": "with",
        "ClassDef": "class",
        "AsyncFunctionDef": "async def",
        "Await": "await",
        "Yield": "yield",
        "YieldFrom": "yield from",
    }
    return {
        "imports": names(name for name, _ in st.IMPORTS) + " (and `__future__`)",
        "triton": names(st.TRITON_CALLS | {"jit", "language"}),
        "torch": names(ALLOWED_TORCH),
        "names": names(st.FORBIDDEN_NAMES),
        "calls": names(st.DYNAMIC_CALLS, "`{}()`"),
        "host_reads": names((h for h in st.HOST_READS if not h.startswith("_")), "`.{}()`"),
        "jit_builtins": names(b for b in st.JIT_BUILTINS if b not in ("True", "False", "None")),
        "jit_attrs": names(st.JIT_BANNED_ATTRS, "`.{}`"),
        "jit_nodes": ", ".join(nodes.get(n.__name__, n.__name__) for n in st.JIT_BANNED_NODES),
    }


def render(name: str, **context: Any) -> str:
    return _env().get_template(name).render(**context).strip()


def task_section(task: Task, source_limit: int = 6000) -> Section:
    try:
        source = task.path.read_text()
    except OSError:
        source = "(task source unavailable)"
    if len(source) > source_limit:
        source = source[:source_limit] + "\n# ... (cut)"
    rows = []
    for shape in task.shapes:
        for dtype in task.dtypes[:1]:
            rows.append(
                f"- {json.dumps(shape)}: {task.flops(shape, dtype):.3g} FLOP, "
                f"{task.bytes_moved(shape, dtype):.3g} bytes ({dtype_name(dtype)})"
            )
    body = (
        f"`{task.name}`: {task.description}\n\nReference (the ground truth; inputs come from make_inputs):\n"
        f"```python\n{source.strip()}\n```\n\nDtypes checked: {', '.join(dtype_name(d) for d in task.dtypes)}. "
        f"Benchmark shapes (objective = geometric mean of p50 times):\n"
        + "\n".join(rows)
        + f"\nExtra correctness-only shapes: {json.dumps(task.check_shapes)}"
    )
    return Section("Task", body, 100)


def gpu_section(gpu: str | None, target: str) -> Section:
    from warpforge.evaluator.gpus import peaks_for

    lines = []
    peaks = peaks_for(gpu) if gpu else None
    if gpu and peaks:
        lines.append(
            f"Times come from {gpu}: {peaks.hbm_tbps:g} TB/s HBM, {peaks.tensor_tflops:g} TFLOP/s "
            f"fp16/bf16 tensor cores, {peaks.fp32_tflops:g} TFLOP/s fp32 (ridge point "
            f"{peaks.tensor_tflops / peaks.hbm_tbps:.0f} FLOP/byte on tensor cores)."
        )
    elif gpu:
        lines.append(f"Times come from {gpu} (no peak figures on file).")
    else:
        lines.append("No GPU times yet: results so far are correctness checks (Triton interpreter) only.")
    lines.append(f"Target architecture {target}: {ARCH_FACTS.get(target, 'no facts on file')}")
    return Section("GPU", "\n".join(lines), 90)


def bottleneck(parent: Any, task: Task, gpu: str | None) -> str:
    """One paragraph: memory-, compute- or latency-bound, from roofline position and resources."""
    from warpforge.evaluator.gpus import peaks_for

    notes = []
    shape, dtype = task.shapes[0], task.dtypes[0]
    intensity = task.flops(shape, dtype) / max(task.bytes_moved(shape, dtype), 1.0)
    peaks = peaks_for(gpu) if gpu else None
    if peaks is not None:
        ridge = peaks.tensor_tflops / peaks.hbm_tbps
        kind = "memory-bound" if intensity < ridge else "compute-bound"
        notes.append(f"Arithmetic intensity {intensity:.2g} FLOP/byte vs ridge {ridge:.0f}: the task is {kind}.")
    else:
        notes.append(f"Arithmetic intensity {intensity:.2g} FLOP/byte.")
    pct = getattr(parent, "roofline_pct", None)
    if pct is not None:
        if pct >= 70:
            notes.append(f"The parent reaches {pct:.0f}% of speed of light: only small gains remain.")
        elif pct < 30:
            notes.append(
                f"The parent reaches only {pct:.0f}% of speed of light: likely latency-bound (too little "
                "parallelism or work per program, serial loops, launch overhead)."
            )
        else:
            notes.append(f"The parent reaches {pct:.0f}% of speed of light.")
    res = getattr(parent, "resources", None) or {}
    if res.get("spill_bytes"):
        notes.append(
            f"Register spills: {res['spill_bytes']} bytes of local memory; smaller tiles or fewer live "
            "values per thread would help."
        )
    if res.get("registers") and int(res["registers"]) > 128:
        notes.append(
            f"{res['registers']} registers per thread limit occupancy to "
            f"{65536 // (int(res['registers']) * 32)} warps per SM."
        )
    if res.get("shared_bytes"):
        notes.append(f"Shared memory per block: {res['shared_bytes']} bytes.")
    if parent is not None and getattr(parent, "best_ms", None) is None:
        notes.append("Nothing measured on a GPU yet: aim for correctness on every shape first.")
    return " ".join(notes)


def parent_sections(parent: Any, task: Task, gpu: str | None) -> list[Section]:
    variant = parent.variant
    lines = [
        f"Variant `{variant.name}` (origin {parent.origin.kind}), evaluated {parent.evaluated} times, verdicts "
        + (", ".join(f"{k}: {n}" for k, n in sorted(parent.verdicts.items())) or "none yet")
        + "."
    ]
    if parent.best_ms is not None:
        lines.append(
            f"Best: {parent.best_ms:.4g} ms with {json.dumps(dict(parent.best_params or {}))}"
            + (f", {parent.best_speedup:.3g}x the reference" if parent.best_speedup else "")
            + (f", {parent.roofline_pct:.0f}% of speed of light" if parent.roofline_pct is not None else "")
        )
    for s in parent.shapes:
        lines.append(
            f"- {json.dumps(s.get('shape'))} {s.get('dtype', '')}: p50 {s.get('p50_ms')} ms, speedup "
            f"{s.get('speedup')}, {s.get('roofline_pct')}% of SOL"
        )
    out = [
        Section("Parent variant", "\n".join(lines) + f"\n```python\n{variant.source.strip()}\n```", 95),
        Section("Bottleneck", bottleneck(parent, task, gpu), 80),
    ]
    if parent.failures:
        fails = [
            f"- {f.verdict}"
            + (f" ({f.reason})" if f.reason else "")
            + f" with {json.dumps(dict(f.params))}: "
            + _first_line(str(f.message))
            for f in parent.failures[:5]
        ]
        out.append(Section("Recent failures of this lineage", "\n".join(fails), 70))
    return out


def _first_line(text: str, limit: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:limit]


def standing_section(history: Any, parent_hash: str | None, limit: int = 8) -> Section | None:
    rows = []
    for v in history.variants:
        if v.variant.source_hash == parent_hash:
            continue
        best = f"{v.best_ms:.4g} ms" if v.best_ms is not None else "not measured"
        rows.append(
            f"- `{v.variant.name}` ({v.origin.kind}): {v.evaluated} evaluated, ok "
            f"{v.verdicts.get('ok', 0)}, best {best}"
        )
    if not rows:
        return None
    return Section("Other variants in this campaign", "\n".join(rows[:limit]), 40)


def winners_section(winners: Sequence[str]) -> Section | None:
    if not winners:
        return None
    return Section("Past winners (other GPUs, similar tasks)", "\n".join(f"- {w}" for w in winners), 30)


def build_prompt(
    task: Task,
    history: Any,
    parent: Any,
    *,
    budget_tokens: int = 12000,
    target: str = "sm_90",
    winners: Sequence[str] = (),
    structured: bool = False,
) -> Prompt:
    """System + user messages for one proposal; sections over ``budget_tokens`` are cut, lowest priority first.
    ``structured``: the model answers a JSON object {rationale, source} (its structured-output setting)."""
    system = render(
        "system.j2", task_name=task.name, example=example_variant(), structured=structured, rules=strict_rules()
    )
    sections: list[Section] = [task_section(task), gpu_section(getattr(history, "gpu", None), target)]
    weights = weights_section(task)
    if weights is not None:
        sections.append(Section(*weights))
    if parent is not None:
        sections += parent_sections(parent, task, getattr(history, "gpu", None))
    for extra in (
        standing_section(history, parent.variant.source_hash if parent is not None else None),
        winners_section(winners),
    ):
        if extra is not None:
            sections.append(extra)
    return fit_prompt(
        system,
        sections,
        lambda kept: render("propose.j2", sections=kept, parent=parent, task_name=task.name),
        budget_tokens,
    )


def fit_prompt(
    system: str, sections: Sequence[Section], render_user: Callable[[list[Section]], str], budget_tokens: int
) -> Prompt:
    """Render the user message from ``sections``, dropping the lowest-priority one while the estimate is over
    ``budget_tokens`` (priority 100 is never cut); the dropped titles are ``Prompt.cut``."""
    kept, cut = list(sections), []
    while True:
        user = render_user(kept)
        tokens = (len(system) + len(user)) // CHARS_PER_TOKEN
        optional = [s for s in kept if s.priority < 100]
        if tokens <= budget_tokens or not optional:
            break
        lowest = min(optional, key=lambda s: s.priority)
        kept.remove(lowest)
        cut.append(lowest.title)
    return Prompt(({"role": "system", "content": system}, {"role": "user", "content": user}), tuple(cut), tokens)


def reask_message(outcome: str, message: str) -> str:
    return render("reask.j2", outcome=outcome, message=message)
