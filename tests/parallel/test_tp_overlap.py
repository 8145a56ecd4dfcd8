"""TP=8 with sequence parallelism as Megatron-Core runs it: which collectives show, against which GEMM."""

from __future__ import annotations

import pytest

from warpforge.parallel.calibration import calibration_for
from warpforge.parallel.compute import Hw, layer_cost
from warpforge.parallel.specs import ModelSpec, PlanConfig, load_cluster

H100 = load_cluster("dgx-h100")
CAL = calibration_for(H100)
# A 7,168-wide GeLU model at 4K tokens split 8 ways: QKV and fc1/fc2 slices outlast one collective, the
# output projection's 896-wide slice does not (its FLOPs per byte moved are h / tp).
M = ModelSpec(name="g", layers=4, hidden=7168, heads=56, ffn=4 * 7168, vocab=32000, seq=4096)


def _collective(h: int = 7168) -> float:
    """One all-gather (or reduce-scatter) of a [4096, h] bf16 tensor over 8 NVLink GPUs, by hand."""
    nbytes = 2 * 4096 * h
    return H100.intra_latency_us * 1e-6 + 7 / 8 * nbytes / (H100.intra_gbps * 1e9 * CAL.intra_bw_eff)


def _gemms() -> tuple[float, float, float, float]:
    hw, t, h, f = Hw.of(H100, CAL), 8, 7168, 4 * 7168
    return (hw.gemm(4096, 3 * h / t, h), hw.gemm(4096, h, h / t), hw.gemm(4096, f / t, h), hw.gemm(4096, h, f / t))


def test_without_overlap_backward_hides_the_bulk_collectives() -> None:
    """Forward: 2 all-gathers + 2 reduce-scatters show. Backward: the 2 gradient all-gathers show; the
    re-gather of QKV's / fc1's input and their input-gradient reduce-scatter run under dgrad / wgrad."""
    lc = layer_cost(M, PlanConfig(tp=8, micro_batch=1), H100, CAL, moe=False)
    c, (qkv, _, fc1, _) = _collective(), _gemms()
    assert qkv > c and fc1 > c  # the premise: QKV's and fc1's dgrad / wgrad outlast a collective
    assert lc.tp_comm == pytest.approx(4 * c + 2 * c, rel=1e-9)


def test_userbuffers_leave_the_pipelined_reduce_scatter_tails_and_their_sm_cost() -> None:
    """TE userbuffers: a ring-exchange all-gather shows only where a chunk's transfer (c / 7) outlasts a
    chunk's GEMM (G / 8); a forward reduce-scatter shows its last of 4 chunks plus what its GEMM cannot
    cover of the other 3, and its GEMM runs on 132 - 16 SMs meanwhile; the bulk ones hide behind their GEMM."""
    lc = layer_cost(M, PlanConfig(tp=8, micro_batch=1, overlap_tp_comm=True), H100, CAL, moe=False)
    c, (qkv, out, fc1, fc2) = _collective(), _gemms()
    assert qkv / 8 > c / 7 and fc1 / 8 > c / 7 and fc2 / 8 > c / 7 and fc2 > c  # hidden
    assert out < c and out / 8 < c / 7  # the 896-wide output projection cannot hide its collectives
    forward = (c / 4 + 3 / 4 * (c - out) + out * 16 / 116) + (c / 4 + fc2 * 16 / 116)
    backward = 7 * (c / 7 - out / 8)  # the gradient all-gather before the output projection's dgrad
    assert lc.tp_comm == pytest.approx(forward + backward, rel=1e-9)
    assert lc.tp_comm < layer_cost(M, PlanConfig(tp=8, micro_batch=1), H100, CAL, moe=False).tp_comm / 3


def test_narrow_slices_leave_more_of_the_traffic_exposed() -> None:
    """Per collective, a 4,096-wide model at TP 8 (512-wide slices) shows more than a 16,384-wide one (whose
    exposed share is mostly the SM cost of the pipelined reduce-scatters)."""

    def exposed_per_collective(h: int) -> float:
        m = M.model_copy(update={"hidden": h, "heads": h // 128, "ffn": 4 * h})
        return layer_cost(m, PlanConfig(tp=8, overlap_tp_comm=True), H100, CAL, moe=False).tp_comm / _collective(h)

    assert exposed_per_collective(4096) > 1.1 * exposed_per_collective(16384)
