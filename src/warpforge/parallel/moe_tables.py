"""More published MoE layouts on DGX-H100: the Megatron-Core MoE model zoo and NVIDIA's measured studies.

Two transcriptions join NVIDIA's NeMo rows as ``NemoCase`` objects:

* ``presets/moe_modelzoo_h100.yaml``: Qwen3-235B-A22B under several 4K layouts (release ``modelzoo``);
* ``presets/moe_published_h100.yaml``: the model zoo's long-context Qwen3-235B table (16K-128K with CP, its
  rate given in TFLOP/s only), and Megatron-Bridge's measured H100 studies (release ``mbridge-skills``):
  Qwen3-30B-A3B on 16 GPUs with and without EP overlap, Moonlight-16B-A3B on 8 GPUs under several
  recompute sets. Each row names its source and commit; excluded rows keep the page's reason.

The release is the leave-one-release-out group, the model key the leave-one-model-out group. Assumptions
the pages do not state, declared before any prediction: Megatron-Core's defaults of ``nemo.py``
(distributed optimizer with overlap, cuDNN attention); "norm, act" / "layernorm, moe_act" are Megatron's
recompute modules of that name (``PlanConfig.recompute_modules``), an empty cell none; FSDP "On" is
Megatron-FSDP (``zero=3``); DeepEP and HybridEP (the NVLink-domain-aware successor; one node's 8 GPUs here)
are costed alike, one copy per remote node; forced-balance routing is load factor 1.

Where a page gives model TFLOP/s but no step time, the step time is Megatron-LM's own FLOP count for the
step over that rate (``megatron_step_flops``): the model zoo's 4K rows, which give both, check the formula.

Example::

    >>> cases = modelzoo_cases(Path("/nonexistent"))  # the model's shape comes from nemo_models.csv
    >>> cases
    []
"""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from warpforge.parallel.nemo import Excluded, NemoCase, nemo_cases, nemo_model, recompute_of
from warpforge.parallel.specs import ModelSpec, PlanConfig, load_cluster

RELEASE = "modelzoo"


def _raw(name: str) -> dict[str, Any]:
    text = resources.files("warpforge.parallel").joinpath("presets").joinpath(name)
    data: dict[str, Any] = yaml.safe_load(text.read_text())
    return data


def published_table() -> dict[str, Any]:
    """``presets/moe_published_h100.yaml`` as data (models, sources, rows)."""
    return _raw("moe_published_h100.yaml")


def megatron_step_flops(model: ModelSpec, gbs: int) -> float:
    """Megatron-LM's model FLOPs of one step (``num_floating_point_operations`` in
    megatron/training/training.py since commit d4f9a6f, GQA/MHA branch): 3 x 2 x 2 per GEMM parameter
    and token, causal attention counted half, routed experts x top-k, shared experts, the LM head. This is
    the count behind Megatron's logged TFLOP/s, not the planner's MFU convention (full attention)."""
    L, h, s = model.layers, model.hidden, model.seq
    moe_l = model.moe_layers if model.is_moe else 0
    dense_l = L - moe_l
    g = 1.5 if model.activation == "swiglu" else 1.0
    mlp = dense_l * model.ffn_dim * g
    if moe_l:
        mlp += moe_l * (model.expert_ffn * model.top_k + model.shared_experts * model.expert_ffn) * g
    q_ratio = model.q_width / h
    attn = L * h * h * (1 + model.n_kv_heads / model.heads + s / h / 2) * q_ratio
    per_token = 12 * h * mlp + 12 * attn + 6 * h * model.vocab
    return float(gbs * s * per_token)


def _models(root: Path) -> dict[str, dict[str, str]]:
    path = root / "nemo_models.csv"
    if not path.is_file():
        return {}
    with path.open(newline="") as fh:
        return {r["model"]: r for r in csv.DictReader(fh)}


def modelzoo_cases(root: Path, models: dict[str, dict[str, str]] | None = None) -> list[NemoCase]:
    """The model zoo's 4K rows as cases (empty when ``nemo_models.csv`` is not under ``root``)."""
    raw = _raw("moe_modelzoo_h100.yaml")
    models = _models(root) if models is None else models
    mrow = models.get(raw["model_key"])
    if mrow is None:
        return []
    out = []
    for i, r in enumerate(raw["rows"]):
        if r.get("excluded"):
            continue
        model = nemo_model(mrow, int(r["seq"]))
        tp, pp, cp, ep = int(r["tp"]), int(r["pp"]), int(r["cp"]), int(r["ep"])
        recompute, modules = recompute_of(str(r["recompute"]))
        plan = PlanConfig(
            tp=tp,
            pp=pp,
            dp=int(r["dp"]),
            cp=cp,
            ep=ep,
            micro_batch=int(r["mbs"]),
            global_batch=int(r["gbs"]),
            recompute=recompute,
            recompute_modules=modules,
            zero=3 if r["fsdp"] else 1,
            interleave=int(r["vpp"]) if pp > 1 and int(r["vpp"]) > 1 else 1,
            sequence_parallel=tp > 1,
            overlap_tp_comm=bool(raw["tp_comm_overlap"]) and tp > 1,
            expert_tp=int(r["etp"]),
            precision="bf16",
            moe_dispatcher="deepep" if str(r["dispatcher"]).lower() == "deepep" else "alltoall",
            moe_a2a_overlap=bool(r.get("a2a_overlap", False)),
        )
        gpus = int(r["gpus"])
        label = f"{RELEASE} {raw['model_key']} BF16 {gpus}g #{i + 1}"
        out.append(
            NemoCase(
                label,
                RELEASE,
                raw["model_key"],
                "Megatron-Core (model zoo)",
                "bf16",
                "moe",
                model,
                load_cluster("dgx-h100", nodes=max(1, gpus // 8)),
                plan,
                float(r["step_s"]),
            )
        )
    return out


def _model_rows(root: Path, table: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Model shapes: the shared ``nemo_models.csv`` plus the table's own (same columns, with their source)."""
    models = _models(root)
    for name, m in table.get("models", {}).items():
        models.setdefault(name, {"model": name, **{k: str(v) for k, v in m.items()}})
    return models


def published_cases(root: Path) -> tuple[list[NemoCase], list[Excluded]]:
    """``moe_published_h100.yaml``'s rows: (scored cases, excluded rows with the page's reason). Empty when
    ``nemo_models.csv`` is not under ``root`` (the Qwen3 shapes come from it)."""
    table = published_table()
    if not (root / "nemo_models.csv").is_file():
        return [], []
    models = _model_rows(root, table)
    cases: list[NemoCase] = []
    excluded: list[Excluded] = []
    for i, r in enumerate(table["rows"]):
        src = table["sources"][r["source"]]
        gpus = int(r["gpus"])
        label = f"{src['release']} {r['model']} BF16 {gpus}g s{int(r['seq']) // 1024}k #{i + 1}"
        if r.get("excluded"):
            excluded.append(Excluded(label, str(r["excluded"])))
            continue
        model = nemo_model(models[r["model"]], int(r["seq"]))
        tp, pp, cp, ep = int(r["tp"]), int(r["pp"]), int(r["cp"]), int(r["ep"])
        recompute, modules = recompute_of(str(r["recompute"]))
        plan = PlanConfig(
            tp=tp,
            pp=pp,
            dp=gpus // (tp * pp * cp),
            cp=cp,
            ep=ep,
            micro_batch=int(r["mbs"]),
            global_batch=int(r["gbs"]),
            recompute=recompute,
            recompute_modules=modules,
            zero=1,
            interleave=int(r["vpp"]) if pp > 1 and int(r["vpp"]) > 1 else 1,
            sequence_parallel=bool(r.get("sp", tp > 1)),
            overlap_tp_comm=bool(r["tp_overlap"]) and tp > 1,
            expert_tp=int(r["etp"]),
            precision="bf16",
            moe_dispatcher="alltoall" if r["dispatcher"] == "alltoall" else "deepep",
            moe_a2a_overlap=bool(r["a2a_overlap"]),
        )
        step = (
            float(r["step_s"])
            if "step_s" in r
            else megatron_step_flops(model, int(r["gbs"])) / (gpus * float(r["tflops"]) * 1e12)
        )
        cases.append(
            NemoCase(
                label,
                src["release"],
                r["model"],
                "Megatron-Core (NVIDIA study)",
                "bf16",
                "moe",
                model,
                load_cluster("dgx-h100", nodes=max(1, gpus // 8)),
                plan,
                step,
            )
        )
    return cases, excluded


def h100_cases(root: Path) -> tuple[list[NemoCase], list[Excluded]]:
    """Every published DGX-H100 case the report scores: NVIDIA's NeMo tables, the model zoo's rows, then
    NVIDIA's other published MoE measurements."""
    cases, excluded = nemo_cases(root)
    more, more_excluded = published_cases(root)
    return cases + modelzoo_cases(root) + more, excluded + more_excluded
