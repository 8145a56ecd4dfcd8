"""Issue 18's modelling: FP8, MoE folding / load / dispatch, TP overlap, uneven interleaving, error bands,
frameworks, and the Llama 3 405B layout's memory. Expected values are worked out by hand from shapes."""

from __future__ import annotations

import json

import pytest

from warpforge.parallel import InvalidPlanError, PlanConfig, load_cluster, load_model, predict
from warpforge.parallel.bands import error_band
from warpforge.parallel.calibration import calibration_for
from warpforge.parallel.comm import Group, Network
from warpforge.parallel.compute import layer_cost
from warpforge.parallel.errors import SpecError
from warpforge.parallel.export import export_plan
from warpforge.parallel.memory import GIB
from warpforge.parallel.pipeline import stage_layers
from warpforge.parallel.search import search_plans
from warpforge.parallel.specs import ModelSpec

H100 = load_cluster("dgx-h100")
L8 = load_model("llama3-8b")


def test_fp8_needs_fp8_tensor_cores() -> None:
    with pytest.raises(InvalidPlanError, match="no FP8"):
        predict(L8, load_cluster("dgx-a100"), PlanConfig(dp=8, precision="fp8"))


def test_fp8_is_faster_and_keeps_an_fp8_weight_cache() -> None:
    bf, f8 = (predict(L8, H100, PlanConfig(dp=8, precision=p)) for p in ("bf16", "fp8"))  # type: ignore[arg-type]
    assert f8.time.compute < 0.8 * bf.time.compute  # GEMMs at the FP8 rate
    assert f8.time.memory_bound > bf.time.memory_bound  # casts and amax updates
    # Llama-3-8B per layer: attention 4096*(4096+2*1024) + 4096*4096 = 41,943,040; SwiGLU MLP
    # 3*4096*14336 = 176,160,768; norms 8,192: 218,112,000 x 32 layers = 6,979,584,000 weights, 2 B each
    # (FP8 copy + transpose); embeddings and LM head stay BF16.
    assert f8.memory.weights - bf.memory.weights == pytest.approx(2 * 6_979_584_000 / GIB, rel=1e-6)
    assert f8.memory.activations < bf.memory.activations  # GEMM inputs saved in FP8


def test_expert_tp_folding_allows_ep_over_tp_ranks() -> None:
    qwen = ModelSpec(
        name="qwen3-235b",
        layers=94,
        hidden=4096,
        heads=64,
        kv_heads=4,
        kv_channels=128,
        ffn=1536,
        moe_ffn=1536,
        experts=128,
        top_k=8,
        vocab=151936,
        seq=4096,
        activation="swiglu",
    )
    assert qwen.q_width == 8192
    c = load_cluster("dgx-h100", nodes=32)
    plan = PlanConfig(tp=2, pp=8, dp=16, ep=32, global_batch=2048, interleave=4, precision="fp8")
    with pytest.raises(InvalidPlanError, match="expert TP 2 x EP 32"):
        predict(qwen, c, plan)
    p = predict(qwen, c, plan.model_copy(update={"expert_tp": 1}))
    assert p.time.ep_comm > 0 and p.step_time_s > 0


def test_load_factor_slows_the_busiest_rank() -> None:
    mix, c = load_model("mixtral-8x7b"), load_cluster("dgx-h100", nodes=2)
    base = PlanConfig(tp=1, pp=1, dp=16, ep=8, global_batch=256)
    even, skew = (predict(mix, c, base.model_copy(update={"moe_load_factor": f})) for f in (1.0, 1.5))
    assert skew.time.ep_comm > 1.3 * even.time.ep_comm and skew.time.compute > even.time.compute
    assert any("balanced expert routing" in n for n in even.notes)


def test_deepep_dispatch_sends_one_copy_per_remote_node() -> None:
    net = Network(intra_bw=100.0, inter_bw=10.0, intra_lat=0.0, inter_lat=0.0)
    g = Group(size=16, per_node=8)  # two nodes
    # top-8 over 2 nodes: a token reaches the other node with probability 1 - 0.5^8 = 0.99609375.
    assert net.dispatch_dedup(1.0, 1000, 8, g) == pytest.approx(1000 * 0.99609375 / 10.0)
    # Plain all-to-all sends one copy per routed expert: 8 x 1000 tokens, half of them off node.
    assert net.all_to_all(8000.0, g) == pytest.approx(4000.0 / 10.0)


def test_tp_overlap_hides_most_tp_traffic() -> None:
    l70, c = load_model("llama3-70b"), load_cluster("dgx-h100", nodes=8)
    plain, over = (predict(l70, c, PlanConfig(tp=8, pp=4, dp=2, overlap_tp_comm=o)) for o in (False, True))
    assert 0.25 * plain.time.tp_comm <= over.time.tp_comm < plain.time.tp_comm


def test_uneven_interleaving_of_405b() -> None:
    # 126 layers over 16 stages, as Llama 3 405B was trained: the first and last stages hold 7, the
    # others 8 (they also carry the embedding and the LM head).
    assert stage_layers(126, 16) == [7] + [8] * 14 + [7]
    p = predict(
        load_model("llama3-405b"),
        load_cluster("dgx-h100", nodes=1024),
        PlanConfig(tp=8, pp=8, cp=2, dp=8, interleave=8, global_batch=1536, precision="fp8"),
    )
    assert p.step_time_s > 0
    text = export_plan(load_model("llama3-405b"), p.plan, "megatron").text
    assert "--account-for-embedding-in-pipeline-split" in text and "--num-virtual-stages-per-pipeline-rank 8" in text


def test_llama3_405b_paper_layout_fits_in_80_gb() -> None:
    """Llama 3 405B on 16K H100s: TP8, PP16 (7/8.../8/7 layers), DP128, micro-batch 1, 2,048 x 8K batch,
    FSDP sharding gradients and optimizer states but keeping weights after forward (ZeRO-2). With the
    default distributed optimizer (ZeRO-1) the fp32 gradients (11.9 GiB) do not fit: 82.6 GiB."""
    m, c = load_model("llama3-405b"), load_cluster("dgx-h100", nodes=2048)
    plan = PlanConfig(tp=8, pp=16, dp=128, micro_batch=1, global_batch=2048, zero=2)
    for v in (1, 2):
        p = predict(m, c, plan.model_copy(update={"interleave": v}))
        assert p.fits and p.peak_mem_gb <= 80, v
    z1 = predict(m, c, plan.model_copy(update={"zero": 1}))
    assert not z1.fits and z1.memory.grads == pytest.approx(11.88, abs=0.01)


def test_error_bands() -> None:
    h = error_band(H100, L8, PlanConfig(precision="fp8"))
    assert h.validated and h.mape is not None and h.mape <= 0.10 and h.n >= 30
    a = error_band(load_cluster("dgx-a100"), L8, PlanConfig())
    assert a.validated and a.mape is not None and a.mape <= 0.095
    p = predict(L8, load_cluster("dgx-h200"), PlanConfig(dp=8))
    assert p.error_band is not None and not p.error_band.validated
    assert any(n.startswith("not validated") for n in p.notes)
    assert p.summary()["error_band"]["validated"] is False


@pytest.mark.parametrize("fw", ["deepspeed", "torchtitan", "megatron"])
def test_framework_filter(fw: str) -> None:
    res = search_plans(L8, load_cluster("dgx-h100", nodes=2), global_batch=64, framework=fw, top=20, diverse=False)
    for r in res.plans:
        p = r.prediction.plan
        if fw == "deepspeed":
            assert p.cp == 1 and p.interleave == 1 and (p.pp == 1 or p.zero <= 1)
        if fw == "torchtitan":
            assert p.zero != 1


def test_deepspeed_export_and_refusals() -> None:
    ex = export_plan(L8, PlanConfig(tp=2, pp=1, dp=4, zero=2, micro_batch=2, global_batch=64), "deepspeed")
    cfg = json.loads(ex.text)
    assert cfg["zero_optimization"]["stage"] == 2 and cfg["train_micro_batch_size_per_gpu"] == 2
    assert cfg["gradient_accumulation_steps"] == 64 // (4 * 2)
    with pytest.raises(SpecError, match="context parallelism"):
        export_plan(L8, PlanConfig(cp=2, dp=4), "deepspeed")
    with pytest.raises(SpecError, match="does not train in fp8"):
        search_plans(L8, H100, framework="deepspeed", precision="fp8")


def test_explicit_first_and_last_stage_layers() -> None:
    m, c = load_model("llama3-405b"), load_cluster("dgx-h100", nodes=256)
    base = PlanConfig(tp=8, pp=16, dp=16, global_batch=2048, zero=2)
    assert base.model_copy(update={"pp_first_layers": 8, "pp_last_layers": 6}).stage_layers(126) == [8] + [8] * 14 + [6]
    default = predict(m, c, base)
    same = predict(m, c, base.model_copy(update={"pp_first_layers": 7, "pp_last_layers": 7}))
    assert same.step_time_s == pytest.approx(default.step_time_s)  # 7 + 14 x 8 + 7 is the default split
    with pytest.raises(InvalidPlanError, match="do not split evenly"):
        predict(m, c, base.model_copy(update={"pp_first_layers": 6, "pp_last_layers": 6}))
    args = export_plan(m, base.model_copy(update={"pp_first_layers": 8, "pp_last_layers": 6}), "megatron").args
    assert "--decoder-first-pipeline-num-layers 8" in args and "--decoder-last-pipeline-num-layers 6" in args


def test_grouped_gemm_rate_halves_at_grouped_half_tokens() -> None:
    """A grouped GEMM with ``grouped_half_tokens`` = K runs at m / (m + K) of the rate it has with K = 0:
    at m = K tokens per expert it takes twice as long (compute-bound shapes; the launch latency apart)."""
    from warpforge.parallel.calibration import calibration_for
    from warpforge.parallel.compute import Hw

    cluster = load_cluster("dgx-h100")
    base = calibration_for(cluster).with_params(grouped_half_tokens=0.0, kernel_us=0.0)
    m = 1024.0
    t0 = Hw.of(cluster, base).gemm(m, 4096, 4096, 8, grouped=True)
    t1 = Hw.of(cluster, base.with_params(grouped_half_tokens=m)).gemm(m, 4096, 4096, 8, grouped=True)
    plain = Hw.of(cluster, base.with_params(grouped_half_tokens=m)).gemm(m, 4096, 4096, 8)
    assert t1 == pytest.approx(2.0 * t0)
    assert plain < t1  # one (batched) dense GEMM of the same shape does not pay it


def test_fp8_expert_time_is_per_local_expert_and_pass() -> None:
    """``fp8_expert_us`` adds 2 passes forward and 4 backward per local expert to an FP8 MoE layer (more local
    experts, more time), nothing to BF16 MoE layers or to dense FP8 layers."""
    m = load_model("mixtral-8x7b")  # 8 experts
    base = calibration_for(H100).with_params(fp8_expert_us=0.0)
    cal = base.with_params(fp8_expert_us=50.0)
    for ep, e_loc in ((2, 4), (8, 1)):
        plan = PlanConfig(dp=8, ep=ep, precision="fp8")
        a, b = (layer_cost(m, plan, H100, c, moe=True) for c in (base, cal))
        assert b.fwd_mem - a.fwd_mem == pytest.approx(2 * e_loc * 50e-6)
        assert b.bwd_mem - a.bwd_mem == pytest.approx(4 * e_loc * 50e-6)
    bf = PlanConfig(dp=8, ep=2)
    assert layer_cost(m, bf, H100, cal, moe=True) == layer_cost(m, bf, H100, base, moe=True)
    dense = PlanConfig(dp=8, precision="fp8")
    assert layer_cost(L8, dense, H100, cal, moe=False) == layer_cost(L8, dense, H100, base, moe=False)
