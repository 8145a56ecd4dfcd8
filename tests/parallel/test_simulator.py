"""Simulator sanity: monotonicity, pipeline bubbles, ZeRO, breakdown consistency, invalid plans."""

from __future__ import annotations

import pytest

from warpforge.parallel import InvalidPlanError, PlanConfig, load_cluster, load_model, predict
from warpforge.parallel.comm import Group, Network
from warpforge.parallel.pipeline import bubble_fraction, in_flight_chunks, pipeline_time, stage_layers
from warpforge.parallel.specs import ModelSpec

H100x8 = load_cluster("dgx-h100", nodes=8)
L70 = load_model("llama3-70b")


def test_more_recompute_less_memory_more_time() -> None:
    # Unfused attention: selective recompute drops the a*s^2 scores, full keeps only layer inputs.
    preds = [
        predict(L70, H100x8, PlanConfig(tp=8, pp=4, dp=2, recompute=rc, flash_attention=False))
        for rc in ("none", "selective", "full")
    ]
    mems = [p.peak_mem_gb for p in preds]
    times = [p.step_time_s for p in preds]
    assert mems[0] > mems[1] > mems[2]
    assert times[0] < times[1] < times[2]
    assert preds[0].hfu == pytest.approx(preds[0].mfu) and preds[2].hfu > preds[2].mfu


def test_full_recompute_with_flash_attention() -> None:
    none, full = (predict(L70, H100x8, PlanConfig(tp=8, pp=4, dp=2, recompute=rc)) for rc in ("none", "full"))
    assert full.peak_mem_gb < none.peak_mem_gb and full.step_time_s > none.step_time_s
    # Recompute repeats the forward: roughly a third more layer work.
    assert 1.15 < full.step_time_s / none.step_time_s < 1.45


def test_zero_stages_shard_more_memory() -> None:
    mems = [predict(L70, H100x8, PlanConfig(tp=8, pp=1, dp=8, zero=z, recompute="full")).memory for z in range(4)]
    totals = [m.total() for m in mems]
    assert totals[0] > totals[1] > totals[2] > totals[3]
    assert mems[1].optimizer == pytest.approx(mems[0].optimizer / 8)
    assert mems[2].grads == pytest.approx(mems[1].grads / 8)
    assert mems[3].weights < mems[2].weights


@pytest.mark.parametrize(("p", "m"), [(2, 8), (4, 4), (8, 32), (16, 64)])
def test_1f1b_bubble_fraction(p: int, m: int) -> None:
    total, bubble = pipeline_time([1.0] * p, m, v=1)
    assert bubble / total == pytest.approx((p - 1) / (m + p - 1))
    assert bubble_fraction(p, m) == pytest.approx((p - 1) / (m + p - 1))
    total_v, bubble_v = pipeline_time([1.0] * p, m, v=2)
    assert bubble_v / total_v == pytest.approx((p - 1) / (2 * m + p - 1))


def test_simulated_bubble_matches_formula() -> None:
    # Tiny vocabulary (head ~free), DP = 1 (no gradient reduction): the pipeline is the whole step.
    m = ModelSpec(name="even", layers=32, hidden=4096, heads=32, vocab=128, seq=2048)
    c = load_cluster("dgx-a100", nodes=1)
    for pp, mb_count, v in ((4, 8, 1), (8, 16, 1), (4, 8, 2)):
        plan = PlanConfig(tp=1, pp=pp, dp=1, global_batch=mb_count, recompute="full", interleave=v)
        pred = predict(m, c, plan)
        assert pred.num_microbatches == mb_count
        assert pred.bubble_fraction == pytest.approx(bubble_fraction(pp, mb_count, v), rel=0.05)


def test_breakdown_adds_up_and_throughput_consistent() -> None:
    for plan in (
        PlanConfig(tp=8, pp=4, dp=2, interleave=2),
        PlanConfig(tp=2, cp=4, pp=2, dp=4, zero=3),
        PlanConfig(tp=8, pp=1, dp=8, recompute="full", overlap_grad_reduce=False),
    ):
        p = predict(L70, H100x8, plan)
        assert p.time.total() == pytest.approx(p.step_time_s, rel=1e-9)
        assert p.tokens_per_s == pytest.approx(p.global_batch * L70.seq / p.step_time_s)
        assert p.memory.total() == pytest.approx(p.peak_mem_gb)
        assert 0 < p.mfu <= p.hfu < 1


def test_interleaving_and_in_flight_activations() -> None:
    # Korthikanti et al.: the first rank of an interleaved pipeline holds L * (1 + (p-1)/(p v)) layers.
    p, v, layers = 8, 3, 96
    chunks = in_flight_chunks(0, p, m=64, v=v)
    assert chunks * (layers / p) / v == pytest.approx(layers * (1 + (p - 1) / (p * v)))
    assert in_flight_chunks(0, 4, m=2, v=1) == 2 and in_flight_chunks(3, 4, m=8, v=1) == 1
    assert stage_layers(61, 16) == [2] + [4] * 14 + [3] and sum(stage_layers(126, 16)) == 126


def test_communication_costs() -> None:
    net = Network(intra_bw=225e9, inter_bw=21e9, intra_lat=10e-6, inter_lat=20e-6)
    intra = net.all_reduce(1e9, Group(8, 8))
    assert intra == pytest.approx(2 * (10e-6 + 7 / 8 * 1e9 / 225e9))
    assert net.all_reduce(1e9, Group(16, 8)) > intra  # crossing InfiniBand costs more
    assert net.all_reduce(1e9, Group(1, 1)) == 0.0
    assert Group.of(8, 8, 8) == Group(8, 1) and Group.of(4, 2, 8) == Group(4, 4)
    tp1, tp8 = (predict(L70, H100x8, PlanConfig(tp=t, pp=8 // t, dp=8, recompute="full")).time.tp_comm for t in (1, 8))
    assert tp1 == 0 and tp8 > 0


def test_moe_expert_parallelism() -> None:
    mix = load_model("mixtral-8x7b")
    c = load_cluster("dgx-h100", nodes=2)
    ep1, ep8 = (predict(mix, c, PlanConfig(tp=1, pp=2, dp=8, ep=e, recompute="full")) for e in (1, 8))
    assert ep8.memory.weights < ep1.memory.weights / 3
    assert ep8.time.ep_comm > 0 and ep1.time.ep_comm == 0
    with pytest.raises(InvalidPlanError, match="mixture-of-experts"):
        predict(L70, H100x8, PlanConfig(tp=8, pp=1, dp=8, ep=2))


def test_context_parallel_splits_activations() -> None:
    cp1, cp2 = (predict(L70, H100x8, PlanConfig(tp=8, cp=c, pp=4, dp=2 // c, recompute="none")) for c in (1, 2))
    assert cp2.memory.activations == pytest.approx(cp1.memory.activations / 2)
    assert cp2.time.cp_comm > 0 and cp1.time.cp_comm == 0


@pytest.mark.parametrize(
    ("plan", "match"),
    [
        (PlanConfig(tp=3, pp=1, dp=1), "heads 64 not divisible by TP 3"),
        (PlanConfig(tp=16, pp=1, dp=4), "kv_heads 8 not divisible by TP 16"),
        (PlanConfig(tp=8, pp=3, dp=2, interleave=30), "interleave 30 x PP 3 exceeds"),
        (PlanConfig(tp=8, pp=1, dp=1, interleave=2), "needs PP > 1"),
        (PlanConfig(tp=8, pp=8, dp=2), "needs 128 GPUs"),
        (PlanConfig(tp=8, pp=1, dp=8, micro_batch=3), "not divisible by DP 8 x micro-batch 3"),
    ],
)
def test_invalid_plans_say_what_to_change(plan: PlanConfig, match: str) -> None:
    with pytest.raises(InvalidPlanError, match=match) as exc:
        predict(L70, H100x8, plan)
    assert "\n" not in str(exc.value) and exc.value.exit_code == 2
