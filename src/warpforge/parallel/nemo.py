"""NVIDIA's published DGX-H100 pre-training tables (``shared/parallel/nemo_h100_pretrain.csv``) as cases.

Every usable row becomes a ``NemoCase``: the model (from ``nemo_models.csv``), a DGX-H100 cluster of the
row's size, the plan as published, and the measured step time
``gbs * seq / (tokens_per_s_per_gpu * gpus)`` (tokens/s, not NVIDIA's TFLOP/s: the FLOP formula changed
between releases; see the data's README). Assumptions the tables do not state, declared here once and
chosen before looking at errors:

* Megatron-Core rows: distributed optimizer (ZeRO-1) with gradient-reduce and parameter-gather overlap,
  sequence parallelism and TP communication overlap (the performance recipes' ``tp_comm_overlap``) when
  TP > 1, FlashAttention (cuDNN fused attention), selective recompute (the
  Megatron-Bridge recipes' default); FSDP > 0 (Megatron-FSDP) is ZeRO-3. AutoModel rows (PyTorch FSDP2):
  ZeRO-3; recompute and (for MoE) EP are not always stated: no recompute when the plan fits in 80 GiB by
  the simulator's FSDP2 accounting (``memory_fsdp.py``), else full recompute
  (the run fitted); an empty EP cell on a MoE row is
  EP = gcd(experts, FSDP degree), since with EP 1 GPT-OSS-120B's bf16 experts alone (234 GB) could not be
  gathered on an 80 GB GPU. (These two AutoModel rules were written after seeing those rows' errors under
  the literal reading: +342% for GPT-OSS-120B, -36% with 115 GiB predicted for Llama-3.1-70B.)
* Precision: the page label. The 25.09 table has none: dense rows there are taken as FP8 (725-763 model
  TFLOP/s per GPU is 73-77% of the dense BF16 peak, above any BF16 row of any table), DeepSeek-V3 as BF16
  (its parenthesised cell is the FP8 one), and the Qwen3 rows stay "unstated" (reported apart, never
  scored against a target).
* Excluded: rows without tokens/s (the 24.03.01 long-sequence page gives TFLOP/s only, no micro-batch),
  hybrid Mamba models (Nemotron-3 Nano/Super/Ultra: the simulator has no Mamba layer), and inconsistent
  source rows (``inconsistent_rows``: the same model, GPU count and layout published by two releases with
  throughputs 1.5x apart, while every other repeated layout agrees within 1.06x).
* MoE dispatch: DeepEP (one copy per remote node) for AutoModel rows, whose notes name DeepEP. Megatron
  rows take the dispatcher, the 1F1B all-to-all overlap and any named recompute modules from NVIDIA's
  performance recipe of that release (``presets/nemo_moe_recipes.yaml``, read from Megatron-Bridge's
  scripts/performance at the commit that published the table); rows it does not list: all-to-all, no
  overlap.
* MoE rows were measured with balanced routing, so the plan keeps the default load factor of 1.

Example::

    >>> from pathlib import Path
    >>> nemo_step_time(gbs=128, seq=8192, tokens_per_s_per_gpu=14451, gpus=8)  # doctest: +ELLIPSIS
    9.07...
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from warpforge.parallel.simulator import peak_memory_gib
from warpforge.parallel.specs import ClusterSpec, ModelSpec, PlanConfig, Recompute, RecomputeModule, load_cluster

MODULES: dict[str, RecomputeModule] = {
    "core_attn": "core_attn",
    "layernorm": "layernorm",
    "norm": "layernorm",
    "moe_act": "moe_act",
    "act": "moe_act",
    "moe": "moe",
}

HYBRID_MAMBA = ("Nemotron-3-Nano", "Nemotron-3-Super", "Nemotron-3-Ultra")
# What each category is scored on (dense BF16, dense FP8, MoE), as the targets name them.
CATEGORIES = ("dense-bf16", "dense-fp8", "moe", "unstated")


@dataclass(frozen=True)
class NemoCase:
    """One published DGX-H100 row."""

    label: str
    release: str
    model_key: str
    framework: str
    precision: str  # "bf16" | "fp8" | "unstated"
    category: str  # one of CATEGORIES
    model: ModelSpec
    cluster: ClusterSpec
    plan: PlanConfig
    measured_s: float


@dataclass(frozen=True)
class Excluded:
    label: str
    reason: str


def nemo_step_time(gbs: int, seq: int, tokens_per_s_per_gpu: float, gpus: int) -> float:
    """Seconds per step from the published per-GPU throughput."""
    return gbs * seq / (tokens_per_s_per_gpu * gpus)


def _int(s: str, default: int = 0) -> int:
    s = (s or "").strip()
    return int(float(s)) if s else default


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def nemo_model(r: dict[str, str], seq: int) -> ModelSpec:
    """A ``ModelSpec`` from a ``nemo_models.csv`` row (MoE when ``num_experts`` is set)."""
    note = r.get("note", "").lower()
    gated = "squared-relu" not in note and "gelu" not in note  # Llama/Qwen/DeepSeek/GPT-OSS: SwiGLU
    experts = _int(r["num_experts"])
    fields: dict[str, Any] = dict(
        name=r["model"],
        layers=_int(r["layers"]),
        hidden=_int(r["hidden"]),
        heads=_int(r["heads"]),
        kv_heads=_int(r["kv_heads"]) or None,
        vocab=_int(r["vocab"]),
        seq=seq,
        activation="swiglu" if gated else "gelu",
        tied_embeddings=False,
    )
    if experts:
        fields.update(
            experts=experts,
            top_k=_int(r["top_k"]),
            moe_ffn=_int(r["ffn"]),
            ffn=_int(r["dense_ffn"]) or _int(r["ffn"]),
            first_dense_layers=_int(r["first_k_dense"]),
        )
        shared = _int(r["shared_ffn"])
        if shared:
            fields["shared_experts"] = max(1, round(shared / _int(r["ffn"])))
    else:
        fields["ffn"] = _int(r["ffn"])
    fields.update(_extra_model_fields(r))
    return ModelSpec(**fields)


def _extra_model_fields(r: dict[str, str]) -> dict[str, Any]:
    """The head dim where it is set apart from hidden / heads (Qwen3, GPT-OSS)."""
    hd = _int(r.get("head_dim", ""))
    if hd and hd * _int(r["heads"]) != _int(r["hidden"]):
        return {"kv_channels": hd}
    return {}


def recompute_of(cell: str) -> tuple[Recompute, tuple[RecomputeModule, ...] | None]:
    """Megatron's published recompute setting as (recompute, modules): "" none, "full" full, else the
    selective modules named (an unknown name raises: a row must not be costed as something it did not run).

    >>> recompute_of("norm, act")
    ('selective', ('layernorm', 'moe_act'))
    """
    cell = cell.strip().lower()
    if not cell:
        return "none", None
    if cell == "full":
        return "full", None
    mods = tuple(MODULES[m.strip()] for m in cell.split(","))
    return "selective", (None if mods == ("core_attn",) else mods)


@lru_cache(maxsize=1)
def recipe_settings() -> dict[tuple[str, str], dict[str, Any]]:
    """(release, model key) -> the MoE settings of NVIDIA's performance recipe (nemo_moe_recipes.yaml)."""
    text = resources.files("warpforge.parallel").joinpath("presets").joinpath("nemo_moe_recipes.yaml")
    data: dict[str, Any] = yaml.safe_load(text.read_text())
    return {(str(r["release"]), str(r["model"])): r for r in data["rows"]}


def _precision(r: dict[str, str], moe: bool) -> str:
    p = r["precision"].strip().upper()
    if p.startswith("FP8"):
        return "fp8"
    if p == "BF16":
        return "bf16"
    if r["model_key"] == "DeepSeek-V3":
        return "bf16"
    return "unstated" if moe else "fp8"


def _plan(r: dict[str, str], model: ModelSpec, precision: str) -> PlanConfig:
    gpus, tp, pp, cp = _int(r["gpus"]), _int(r["tp"], 1), _int(r["pp"], 1), _int(r["cp"], 1)
    ep, vp, fsdp, mbs = _int(r["ep"], 1), _int(r["vp"], 1), _int(r["fsdp"]), _int(r["mbs"], 1)
    automodel = "AutoModel" in r["framework"]
    dp = gpus // (tp * pp * cp)
    if automodel and model.is_moe and not r["ep"].strip():
        ep = math.gcd(model.experts, fsdp or dp)
    plan = PlanConfig(
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        ep=ep,
        micro_batch=mbs,
        global_batch=_int(r["gbs"]),
        recompute="none" if automodel else "selective",
        zero=3 if (fsdp or automodel) else 1,
        interleave=_interleave(model, pp, vp),
        sequence_parallel=tp > 1,
        flash_attention=True,
        overlap_grad_reduce=True,
        overlap_tp_comm=tp > 1 and not automodel,
        **_extra_plan_fields(precision),
        # Megatron-Bridge's MoE recipes fold experts with expert TP 1 (EP over TP x DP x CP ranks).
        expert_tp=1 if model.is_moe else None,
        moe_dispatcher="deepep" if automodel else "alltoall",  # AutoModel's notes: "kernels: TE + DeepEP"
    )
    recipe = recipe_settings().get((r["release"], r["model_key"])) if model.is_moe and not automodel else None
    if recipe is not None:
        update: dict[str, Any] = {
            "moe_a2a_overlap": bool(recipe["a2a_overlap"]),
            "moe_dispatcher": "alltoall" if recipe["dispatcher"] == "alltoall" else "deepep",
        }
        if recipe.get("recompute"):
            update["recompute"], update["recompute_modules"] = recompute_of(str(recipe["recompute"]))
        plan = plan.model_copy(update=update)
    # AutoModel trains with PyTorch FSDP2: its memory is FSDP2's (memory_fsdp.py), not Megatron's.
    if automodel and peak_memory_gib(model, plan.model_copy(update={"framework": "torchtitan"})) > 80:
        plan = plan.model_copy(update={"recompute": "full"})
    return plan


def _interleave(model: ModelSpec, pp: int, vp: int) -> int:
    """Virtual stages as published (uneven chunks allowed, as Megatron-Bridge's layouts do)."""
    return vp if vp > 1 and pp > 1 else 1


def _extra_plan_fields(precision: str) -> dict[str, Any]:
    return {"precision": "fp8" if precision == "fp8" else "bf16"}


INCONSISTENT_RATIO = 1.5  # repeated layouts agree within 1.06x across releases; two pairs differ by 1.8-2x


def inconsistent_rows(rows: list[dict[str, str]]) -> dict[int, str]:
    """Rows whose throughput disagrees with another release's row of the same model, GPU count and layout
    (tp, pp, cp, vp, ep, fsdp, micro-batch, global batch, sequence) by more than ``INCONSISTENT_RATIO``:
    index -> reason. Every member of such a group is flagged: the tables do not say which one is right.
    Decided from the published numbers alone, never from the simulator's errors."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, r in enumerate(rows):
        if not r["tokens_per_s_per_gpu"].strip():
            continue
        key = tuple(r[k] for k in ("model_key", "gpus", "gbs", "mbs", "seq", "tp", "pp", "cp", "vp", "ep", "fsdp"))
        groups.setdefault(key, []).append(i)
    out: dict[int, str] = {}
    for idx in groups.values():
        tps = {i: float(rows[i]["tokens_per_s_per_gpu"]) for i in idx}
        if len(idx) > 1 and max(tps.values()) > INCONSISTENT_RATIO * min(tps.values()):
            seen = ", ".join(f"{rows[i]['release']} {rows[i]['precision'] or '?'} {tps[i]:g}" for i in idx)
            for i in idx:
                out[i] = f"inconsistent source rows: same model, GPUs and layout, per-GPU throughput {seen}"
    return out


def nemo_cases(root: Path) -> tuple[list[NemoCase], list[Excluded]]:
    """(usable rows as cases, excluded rows with the reason)."""
    models = {r["model"]: r for r in _rows(root / "nemo_models.csv")}
    cases: list[NemoCase] = []
    excluded: list[Excluded] = []
    rows = _rows(root / "nemo_h100_pretrain.csv")
    clash = inconsistent_rows(rows)
    for i, r in enumerate(rows):
        label = f"{r['release']} {r['model_key']} {r['precision'] or '?'} {r['gpus']}g"
        if i in clash:
            excluded.append(Excluded(label, clash[i]))
            continue
        if r["model_key"].startswith(HYBRID_MAMBA):
            excluded.append(Excluded(label, "hybrid Mamba model (no Mamba layer in the simulator)"))
            continue
        if not r["tokens_per_s_per_gpu"].strip() or not r["mbs"].strip():
            excluded.append(Excluded(label, "no tokens/s or micro-batch on the page"))
            continue
        mrow = models.get(r["model_key"])
        if mrow is None or not mrow["layers"]:
            excluded.append(Excluded(label, "model shape not known"))
            continue
        seq = _int(r["seq"])
        model = nemo_model(mrow, seq)
        precision = _precision(r, model.is_moe)
        category = "moe" if model.is_moe else f"dense-{precision}"
        if precision == "unstated":
            category = "unstated"
        plan = _plan(r, model, precision)
        gpus = _int(r["gpus"])
        cluster = load_cluster("dgx-h100", nodes=max(1, gpus // 8))
        measured = nemo_step_time(plan.batch(model), seq, float(r["tokens_per_s_per_gpu"]), gpus)
        cases.append(
            NemoCase(
                label, r["release"], r["model_key"], r["framework"], precision, category, model, cluster, plan, measured
            )
        )
    return cases, excluded
