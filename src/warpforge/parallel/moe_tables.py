"""More published MoE layouts of the same models: NVIDIA's Megatron-Core MoE model zoo on DGX-H100.

``presets/moe_modelzoo_h100.yaml`` holds Qwen3-235B-A22B under four layouts (cross-node EP 32 with PP 8,
intra-node EP 8 with Megatron-FSDP, EP 8 with PP 32, TP 4 with EP 8), with the measured step time as
published. They join NVIDIA's NeMo rows as ``NemoCase`` objects of release ``modelzoo`` (so
leave-one-release-out holds them out together) and model key ``Qwen3-235B-A22B`` (so
leave-one-model-out holds them out with that model's NeMo rows). Assumptions the page does not state,
declared before any prediction: Megatron-Core's defaults of ``nemo.py`` (distributed optimizer with
overlap, SP and TP-comm overlap when TP > 1, cuDNN attention); "norm, act" (Megatron's fine-grained
recompute of norms and activations) maps to the planner's ``selective``, an empty cell to none; FSDP "On"
is Megatron-FSDP (``zero=3``); "DeepEP" and "A2A" name the dispatcher; balanced routing (load factor 1).

Example::

    >>> cases = modelzoo_cases(Path("/nonexistent"))  # the model's shape comes from nemo_models.csv
    >>> cases
    []
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from warpforge.parallel.nemo import Excluded, NemoCase, nemo_cases, nemo_model
from warpforge.parallel.specs import PlanConfig, Recompute, load_cluster

RELEASE = "modelzoo"


def _raw() -> dict[str, Any]:
    text = resources.files("warpforge.parallel").joinpath("presets").joinpath("moe_modelzoo_h100.yaml")
    data: dict[str, Any] = yaml.safe_load(text.read_text())
    return data


def _recompute(cell: str) -> Recompute:
    cell = cell.strip().lower()
    if not cell:
        return "none"
    return "full" if cell == "full" else "selective"


def modelzoo_cases(root: Path, models: dict[str, dict[str, str]] | None = None) -> list[NemoCase]:
    """The model zoo's rows as cases (empty when ``nemo_models.csv`` is not under ``root``)."""
    raw = _raw()
    if models is None:
        path = root / "nemo_models.csv"
        if not path.is_file():
            return []
        import csv

        with path.open(newline="") as fh:
            models = {r["model"]: r for r in csv.DictReader(fh)}
    mrow = models.get(raw["model_key"])
    if mrow is None:
        return []
    out = []
    for i, r in enumerate(raw["rows"]):
        if r.get("excluded"):
            continue
        model = nemo_model(mrow, int(r["seq"]))
        tp, pp, cp, ep = int(r["tp"]), int(r["pp"]), int(r["cp"]), int(r["ep"])
        plan = PlanConfig(
            tp=tp, pp=pp, dp=int(r["dp"]), cp=cp, ep=ep, micro_batch=int(r["mbs"]), global_batch=int(r["gbs"]),
            recompute=_recompute(str(r["recompute"])), zero=3 if r["fsdp"] else 1,
            interleave=int(r["vpp"]) if pp > 1 and int(r["vpp"]) > 1 else 1, sequence_parallel=tp > 1,
            overlap_tp_comm=tp > 1, expert_tp=int(r["etp"]), precision="bf16",
            moe_dispatcher="deepep" if str(r["dispatcher"]).lower() == "deepep" else "alltoall",
        )
        gpus = int(r["gpus"])
        label = f"{RELEASE} {raw['model_key']} BF16 {gpus}g #{i + 1}"
        out.append(NemoCase(label, RELEASE, raw["model_key"], "Megatron-Core (model zoo)", "bf16", "moe", model,
                            load_cluster("dgx-h100", nodes=max(1, gpus // 8)), plan, float(r["step_s"])))
    return out


def h100_cases(root: Path) -> tuple[list[NemoCase], list[Excluded]]:
    """Every published DGX-H100 case the report scores: NVIDIA's NeMo tables, then the model zoo's rows."""
    cases, excluded = nemo_cases(root)
    return cases + modelzoo_cases(root), excluded
