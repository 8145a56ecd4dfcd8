"""Plan prompts from the simulator's evidence (Jinja2 templates in ``prompts/`` beside this module), under a
token budget.

The system prompt states what a plan is and the answer format (parallel/plan_agent/parse.py). The user prompt is a list
of sections (``prompting.Section``, cut lowest priority first by ``prompting.fit_prompt``): the model spec, the
cluster spec and the search's fixed settings (never cut), then the best plans so far with the simulator's
breakdown of each (compute, memory-bound kernels, recompute, each collective, pipeline bubble, optimizer; memory
per GPU by weights, gradients, optimizer states, activations, logits), and the model's own earlier proposals
with what became of them (rank, or why they do not fit / cannot run). Nothing in a prompt depends on timing,
so the same evidence gives the same prompt (``--llm-replay`` checks it).

Example::

    >>> prompt = build_plan_prompt(view, best=res.feasible_predictions[:5], earlier=[])   # doctest: +SKIP
    >>> [m["role"] for m in prompt.messages]                                             # doctest: +SKIP
    ['system', 'user']
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from warpforge.agent.prompting import Prompt, Section, fit_prompt
from warpforge.parallel.explain import LABELS
from warpforge.parallel.prediction import Prediction
from warpforge.parallel.specs import ClusterSpec, ModelSpec

PROMPTS = Path(__file__).parent / "prompts"


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(PROMPTS)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def _render(name: str, **context: Any) -> str:
    return _env().get_template(name).render(**context).strip()


@dataclass(frozen=True)
class SearchView:
    """What the prompt says about the search: the specs and its fixed settings."""

    model: ModelSpec
    cluster: ClusterSpec
    global_batch: int
    precision: str
    usable_gb: float
    axes: dict[str, list[Any]]  # search.space_axes: candidate values per axis
    evaluated: int  # plans the baseline search simulated
    feasible: int  # of which fit


@dataclass(frozen=True)
class EarlierProposal:
    """One earlier proposal of the model, as the next prompt shows it."""

    label: str  # PlanConfig.short(), or the raw JSON when it never became a plan
    outcome: str  # plan_parse.PLAN_OUTCOMES
    message: str


def model_section(m: ModelSpec) -> Section:
    lines = [
        f"{m.name}: {m.num_params() / 1e9:.1f} B parameters, {m.layers} layers, hidden {m.hidden}, "
        f"{m.heads} heads ({m.n_kv_heads} KV heads, head dim {m.head_dim}), FFN {m.ffn_dim} ({m.activation}), "
        f"vocab {m.vocab}, sequence {m.seq}" + (", tied embeddings" if m.tied_embeddings else "")
    ]
    if m.is_moe:
        lines.append(
            f"MoE: {m.experts} experts, top-{m.top_k}, expert FFN {m.expert_ffn}, {m.shared_experts} "
            f"shared, {m.first_dense_layers} dense first layers; {m.active_params() / 1e9:.1f} B active"
        )
    return Section("Model", "\n".join(lines), 100)


def cluster_section(c: ClusterSpec) -> Section:
    fp8 = f", {c.fp8_tflops:g} TFLOP/s fp8" if c.fp8_tflops else ""
    return Section(
        "Cluster",
        (
            f"{c.name}: {c.nodes} nodes x {c.gpus_per_node} {c.gpu} = {c.total_gpus} GPUs; {c.hbm_gb:g} GiB HBM at "
            f"{c.hbm_tbps:g} TB/s, {c.peak_tflops:g} TFLOP/s bf16 dense{fp8}; intra-node {c.intra_gbps:g} GB/s "
            f"({c.intra_latency_us:g} us), inter-node {c.inter_gbps:g} GB/s per GPU ({c.inter_latency_us:g} us)"
        ),
        100,
    )


def search_section(v: SearchView) -> Section:
    axes = "; ".join(f"{k} {v.axes[k]}" for k in ("tp", "pp", "cp", "ep") if k in v.axes)
    return Section(
        "Search",
        (
            f"Global batch {v.global_batch} sequences (fixed), precision {v.precision} (fixed). A plan must use all "
            f"{v.cluster.total_gpus} GPUs and fit in {v.usable_gb:.1f} GiB per GPU (the rest of HBM is kept free). "
            f"Structurally valid values: {axes}. The search simulated {v.evaluated} plans; {v.feasible} fit."
        ),
        100,
    )


def _secs(x: float) -> str:
    return f"{x:.4g} s" if x >= 0.1 else f"{x * 1e3:.3g} ms"


def plan_fields(plan: Any) -> str:
    """The plan as the answer format writes it: the fields that differ from the defaults (JSON)."""
    fields = plan.model_dump(exclude_defaults=True, exclude={"global_batch", "precision"})
    if fields.get("expert_tp") == plan.tp:
        fields.pop("expert_tp")  # the default spelled out
    return json.dumps(fields)


def plan_breakdown(p: Prediction, rank: int, why: str = "") -> str:
    """One plan as the model sees it: settings, headline, where the time and the memory go."""
    t = p.time.model_dump()
    parts = [f"{LABELS[k]} {_secs(t[k])}" for k in LABELS if t.get(k, 0.0) > 0]
    mem = p.memory
    lines = [
        f"#{rank} `{p.plan.short()}` {plan_fields(p.plan)}",
        f"  step {p.step_time_s:.4g} s, {p.tokens_per_s:,.0f} tokens/s, MFU {p.mfu:.1%}, "
        f"{p.num_microbatches} micro-batches, bubble {p.bubble_fraction:.1%} of the step",
        "  time per step: " + ", ".join(parts),
        f"  memory per GPU (GiB, pipeline rank {mem.stage}): weights {mem.weights:.1f}, grads {mem.grads:.1f}, "
        f"optimizer {mem.optimizer:.1f}, activations {mem.activations:.1f}, logits {mem.logits:.1f}, "
        f"overhead {mem.overhead:.1f}; peak {p.peak_mem_gb:.1f} of {p.hbm_gb:g}",
    ]
    if why:
        lines.append(f"  {why}")
    return "\n".join(lines)


def best_section(best: Sequence[tuple[int, Prediction, str]]) -> Section | None:
    if not best:
        return None
    return Section(
        "Best plans so far (simulated, fastest first)",
        "\n".join(plan_breakdown(p, rank, why) for rank, p, why in best),
        90,
    )


def earlier_section(earlier: Sequence[EarlierProposal], limit: int = 24) -> Section | None:
    if not earlier:
        return None
    rows = [f"- `{e.label}`: {e.outcome}" + (f" ({e.message})" if e.message else "") for e in earlier[-limit:]]
    return Section("Your earlier proposals and what became of them", "\n".join(rows), 80)


def does_not_fit_message(p: Prediction, usable_gb: float) -> str:
    """Why a plan does not fit, in one line: how much it needs and the shares that take the memory."""
    mem = p.memory
    shares = sorted(
        ((getattr(mem, k), k) for k in ("weights", "grads", "optimizer", "activations", "logits")), reverse=True
    )
    top = ", ".join(f"{k} {v:.1f}" for v, k in shares[:3])
    return f"needs {p.peak_mem_gb:.1f} GiB per GPU, usable {usable_gb:.1f} (largest: {top})"


def build_plan_prompt(
    view: SearchView,
    *,
    best: Sequence[tuple[int, Prediction, str]],
    earlier: Sequence[EarlierProposal],
    max_plans: int,
    budget_tokens: int = 12000,
    structured: bool = False,
) -> Prompt:
    """System + user messages for one plan proposal; ``best`` holds (rank, prediction, one line of why)."""
    system = _render("system.j2", max_plans=max_plans, structured=structured)
    sections = [model_section(view.model), cluster_section(view.cluster), search_section(view)]
    sections += [s for s in (best_section(best), earlier_section(earlier)) if s is not None]
    return fit_prompt(
        system,
        sections,
        lambda kept: _render(
            "propose.j2",
            sections=kept,
            max_plans=max_plans,
            model_name=view.model.name,
            gpus=view.cluster.total_gpus,
            usable_gb=f"{view.usable_gb:.1f}",
        ),
        budget_tokens,
    )


def plan_reask_message(outcome: str, message: str) -> str:
    return _render("reask.j2", outcome=outcome, message=message)
