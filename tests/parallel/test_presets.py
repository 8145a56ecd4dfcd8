"""Every preset's best plan fits in memory by the simulator's accounting, and the GPT-style presets' also by
Korthikanti et al.'s formulas computed here independently (issue 18's 'done when')."""

from __future__ import annotations

import pytest

from warpforge.parallel import load_cluster, load_model
from warpforge.parallel.pipeline import in_flight_chunks, stage_layers
from warpforge.parallel.search import search_plans
from warpforge.parallel.specs import PlanConfig, preset_names

GIB = 2.0**30
# (cluster preset, nodes, precision) per model preset: big enough for the model to fit.
SIZES = {
    "gpt3-175b": ("dgx-a100", 16, "bf16"),
    "gpt-1t": ("dgx-h100", 64, "fp8"),
    "llama3-8b": ("dgx-h100", 1, "fp8"),
    "llama3-70b": ("dgx-h100", 8, "fp8"),
    "llama3-405b": ("dgx-h100", 64, "bf16"),
    "mixtral-8x7b": ("dgx-h100", 4, "bf16"),
    "deepseek-v3-like": ("dgx-h100", 128, "fp8"),
}


def _korthikanti_gib(name: str, plan: PlanConfig) -> float:
    """First pipeline stage: 18 B/param mixed-precision Adam (sharded by the ZeRO stage) + activations per
    layer s*b*h*(10 + 24/t) or 34/t with SP (FlashAttention / selective: no score term), times the layers in
    flight at the 1F1B peak (L/p layers x p micro-batches; interleaved: x (1 + (p-1)/(p v)))."""
    m = load_model(name)
    t, p, d, c = plan.tp, plan.pp, plan.dp, plan.cp
    h, s, b = m.hidden, m.seq / c, plan.micro_batch
    per_layer = 12 * h * h + 13 * h  # GPT: attention 4h^2 + MLP 8h^2, biases and norms
    layers0 = stage_layers(m.layers, p)[0]
    params = (layers0 * per_layer + m.vocab * h) / t
    shard = d * c
    states = params * (
        2 / (shard if plan.zero >= 3 else 1)
        + 4 / (shard if plan.zero >= 2 else 1)
        + 12 / (shard if plan.zero >= 1 else 1)
    )
    sbh = s * b * h
    if plan.recompute == "full":
        act = in_flight_chunks(
            0, p, plan.num_microbatches(m), plan.interleave
        ) * layers0 / plan.interleave * 2 * sbh / (t if plan.sp else 1) + sbh * (10 + 24 / t + 5 * m.heads * s / h)
    else:
        one = sbh * (34 / t if plan.sp else 10 + 24 / t)
        act = one * in_flight_chunks(0, p, plan.num_microbatches(m), plan.interleave) * layers0 / plan.interleave
    return (states + act) / GIB


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SIZES))
def test_best_plan_of_every_preset_fits(name: str) -> None:
    assert set(SIZES) >= {n for n in preset_names("model") if load_model(n).name == n}
    cl, nodes, precision = SIZES[name]
    cluster = load_cluster(cl, nodes=nodes)
    res = search_plans(load_model(name), cluster, trials=150, top=1, precision=precision)  # type: ignore[arg-type]
    best = res.plans[0].prediction
    assert best.fits and best.peak_mem_gb <= 0.95 * cluster.hbm_gb
    if name in ("gpt3-175b", "gpt-1t"):  # GeLU, MHA, ffn = 4h: Korthikanti's formulas apply
        assert _korthikanti_gib(name, best.plan) <= cluster.hbm_gb
