"""Kernels and configs together: a transformers config read as the planner's model spec, and the planner's
best parallel plans for it on a cluster, for the same report as the kernels.

The config's fields map one to one onto :class:`~warpforge.parallel.specs.ModelSpec` (layers, widths, heads,
KV heads, head dim, vocabulary, tied embeddings, routed experts); the sequence length is the run's
``--seq`` unless ``--plan-seq`` says the training job's. A gated MLP (``hidden_act`` silu, as Llama, Qwen,
Mistral and Gemma build it) is the planner's ``swiglu``, else ``gelu``.

Example::

    >>> spec = model_spec(Qwen3Config(hidden_size=4096, ...), seq=4096)      # doctest: +SKIP
    >>> rows = best_plans(spec, "dgx-h100", nodes=2)                          # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from warpforge.errors import UsageError
from warpforge.parallel.specs import ModelSpec


class PlanRow(BaseModel):
    """One ranked plan of the planner, as the optimize report shows it."""

    rank: int
    plan: str  # the layout in the planner's short form (tp/pp/dp/cp, micro-batch, recompute, ...)
    tokens_per_s: float
    step_time_s: float
    mfu: float
    peak_mem_gb: float
    hbm_gb: float
    fits: str  # the planner's memory verdict: yes | no | uncertain


class PlanSection(BaseModel):
    model: ModelSpec
    cluster: str
    nodes: int
    gpus: int
    global_batch: int
    plans: list[PlanRow]
    basis: str = "the planner's predictions (warpforge plan): calibrated on published measurements, not measured here"


def _get(config: Any, *names: str, default: Any = None) -> Any:
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return value
    return default


def model_spec(config: Any, seq: int, name: str = "") -> ModelSpec:
    """The planner's spec of a transformers config (see module doc); UsageError when a field it needs is absent."""
    hidden = _get(config, "hidden_size", "n_embd", "d_model")
    layers = _get(config, "num_hidden_layers", "n_layer", "num_layers")
    heads = _get(config, "num_attention_heads", "n_head")
    vocab = _get(config, "vocab_size")
    missing = [
        n
        for n, v in (
            ("hidden_size", hidden),
            ("num_hidden_layers", layers),
            ("num_attention_heads", heads),
            ("vocab_size", vocab),
        )
        if v is None
    ]
    if missing:
        raise UsageError(f"--cluster: the config has no {', '.join(missing)}, so the planner cannot model it")
    head_dim = _get(config, "head_dim")
    experts = int(_get(config, "num_experts", "num_local_experts", "n_routed_experts", default=0) or 0)
    act = str(_get(config, "hidden_act", "activation_function", default="gelu"))
    fields: dict[str, Any] = {
        "name": name or str(_get(config, "model_type", default="custom")),
        "layers": int(layers),
        "hidden": int(hidden),
        "heads": int(heads),
        "vocab": int(vocab),
        "seq": int(seq),
        "kv_heads": _get(config, "num_key_value_heads"),
        "ffn": _get(config, "intermediate_size", "n_inner"),
        "activation": "swiglu" if act in ("silu", "swish") else "gelu",
        "tied_embeddings": bool(_get(config, "tie_word_embeddings", default=False)),
    }
    if head_dim is not None and int(head_dim) * int(heads) != int(hidden):
        fields["kv_channels"] = int(head_dim)
    if experts > 1:
        fields.update(
            experts=experts,
            top_k=int(_get(config, "num_experts_per_tok", default=1)),
            moe_ffn=_get(config, "moe_intermediate_size"),
            shared_experts=int(_get(config, "n_shared_experts", default=0) or 0),
        )
    return ModelSpec(**fields)


def best_plans(
    model: ModelSpec, cluster: str, nodes: int | None, global_batch: int | None = None, top: int = 3
) -> PlanSection:
    """The planner's ``top`` plans for ``model`` on ``cluster`` (a preset name or a YAML file)."""
    from warpforge.parallel.search import search_plans
    from warpforge.parallel.specs import load_cluster

    spec = load_cluster(cluster, nodes=nodes)
    result = search_plans(model, spec, global_batch=global_batch, top=top)
    rows = [
        PlanRow(
            rank=r.rank,
            plan=r.prediction.plan.short(),
            tokens_per_s=round(r.prediction.tokens_per_s, 1),
            step_time_s=round(r.prediction.step_time_s, 4),
            mfu=round(r.prediction.mfu, 4),
            peak_mem_gb=round(r.prediction.peak_mem_gb, 2),
            hbm_gb=round(r.prediction.hbm_gb, 2),
            fits=r.prediction.fit.verdict if r.prediction.fit else ("yes" if r.prediction.fits else "no"),
        )
        for r in result.plans
    ]
    return PlanSection(
        model=model,
        cluster=result.cluster,
        nodes=result.nodes,
        gpus=result.gpus,
        global_batch=result.global_batch,
        plans=rows,
    )
