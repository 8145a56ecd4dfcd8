"""Memory model against Korthikanti et al. (formula and the published per-GPU figures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from warpforge.parallel import PlanConfig, load_model
from warpforge.parallel.memory import GIB, activation_bytes_per_layer
from warpforge.parallel.simulator import memory_by_rank
from warpforge.parallel.validation import memory_cases

GPT3 = load_model("gpt3-175b")


@pytest.mark.parametrize(
    ("sp", "recompute", "flash", "coefficient"),
    [
        # s*b*h * (10 + 24/t + 5as/(ht)) without SP; 34/t with SP + selective (Korthikanti eq. 5, 6).
        (False, "none", False, 10 + 24 / 8 + 5 * 96 * 2048 / (12288 * 8)),
        (True, "none", False, 34 / 8 + 5 * 96 * 2048 / (12288 * 8)),
        (True, "selective", False, 34 / 8),
        (True, "none", True, 34 / 8),  # FlashAttention keeps no a*s^2 scores either
    ],
)
def test_activation_formula(sp: bool, recompute: str, flash: bool, coefficient: float) -> None:
    plan = PlanConfig(tp=8, sequence_parallel=sp, recompute=recompute, flash_attention=flash)  # type: ignore[arg-type]
    per_layer = activation_bytes_per_layer(GPT3, plan)
    assert per_layer / (GPT3.seq * GPT3.hidden) == pytest.approx(coefficient)


def test_mixed_precision_adam_is_18_bytes_per_parameter() -> None:
    m = load_model("llama3-8b")
    mem = memory_by_rank(m, PlanConfig(tp=1, pp=1, dp=1, zero=0, global_batch=1))[0]
    states = mem.weights + mem.grads + mem.optimizer
    assert states == pytest.approx(18 * m.num_params(), rel=1e-6)


def test_matches_korthikanti_per_gpu_memory(shared_parallel: Path) -> None:
    """Target: at most 10% error on the first stage's states, activations and totals."""
    for mc in memory_cases(shared_parallel):
        base, spsel = memory_by_rank(mc.model, mc.base)[0], memory_by_rank(mc.model, mc.sp_sel)[0]
        states = (base.weights + base.grads + base.optimizer) / GIB
        assert states == pytest.approx(mc.states_gib, rel=0.10), mc.label
        assert base.activations / GIB == pytest.approx(mc.act_base_gib, rel=0.10), mc.label
        assert spsel.activations / GIB == pytest.approx(mc.act_sp_sel_gib, rel=0.10), mc.label
        total = states + spsel.activations / GIB
        assert total == pytest.approx(mc.states_gib + mc.act_sp_sel_gib, rel=0.10), mc.label
