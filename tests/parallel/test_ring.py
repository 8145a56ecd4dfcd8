"""Context parallelism as it runs (ring.py), torchtitan's attention / compile / async-TP / FSDP-under-PP
mechanisms (compute.py, simulator.py), and the torchtitan held-out targets. Expected values are counted
here by hand or by brute force, or are published measurements; none is the code's own output."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from warpforge.parallel import load_cluster, load_model
from warpforge.parallel.calibration import calibration_for
from warpforge.parallel.comm import Group, Network
from warpforge.parallel.compute import Hw, compiled_layout_bytes, layer_cost
from warpforge.parallel.ring import exchanged_bytes, imbalance, ring_cost
from warpforge.parallel.simulator import predict
from warpforge.parallel.specs import PlanConfig
from warpforge.parallel.torchtitan_runs import load_runs, score

NET = Network(intra_bw=100e9, inter_bw=10e9, intra_lat=0.0, inter_lat=0.0)


def _causal_work(cp: int, balanced: bool, chunk: int = 8) -> list[int]:
    """Unmasked (query, key) pairs each rank computes for a causal sequence of 2*cp*chunk tokens."""
    n = 2 * cp * chunk
    mask = np.tril(np.ones((n, n), dtype=np.int64))
    pieces = np.arange(n).reshape(2 * cp, chunk)
    out = []
    for r in range(cp):
        rows = (
            np.concatenate([pieces[r], pieces[2 * cp - 1 - r]])
            if balanced
            else np.concatenate([pieces[2 * r], pieces[2 * r + 1]])
        )
        out.append(int(mask[rows].sum()))
    return out


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_causal_imbalance_matches_brute_force(cp: int) -> None:
    contiguous, head_tail = _causal_work(cp, False), _causal_work(cp, True)
    assert max(contiguous) / statistics.mean(contiguous) == pytest.approx(imbalance(cp, False), rel=0.02)
    assert max(head_tail) == min(head_tail)  # chunks i and 2cp-1-i: every rank the same work
    assert imbalance(cp, True) == 1.0


def test_torchtitan_all_gather_hides_only_behind_the_diagonal_step() -> None:
    # 4 ranks on one node, K and V blocks of 1e6 elements each (bf16): the all-gather moves 3/4 of
    # 4 x 4 MB at 100 GB/s = 120 us; the diagonal step is 1/4 of a 400 us attention forward = 100 us.
    g = Group(4, 4)
    rc = ring_cost(
        framework="torchtitan",
        cp=4,
        q_elems=1e6,
        kv_elems=1e6,
        attn_fwd=400e-6,
        attn_bwd=1000e-6,
        net=NET,
        group=g,
        hbm=1e12,
        kernel_s=0.0,
    )
    assert rc.fwd_comm == pytest.approx(20e-6)
    # Backward: the same gather behind a 250 us diagonal step (hidden: floor 3 x 2 us), plus dK/dV in fp32
    # (8 MB = 80 us per step) hidden behind each 250 us step (floor 2 us each).
    assert rc.bwd_comm == pytest.approx(6e-6 + 3 * 2e-6)
    # Merges: 3 steps x (38 B per output element + 4 B per K/V element x 2) + the final bf16 cast (6 B).
    assert rc.fwd_mem == pytest.approx((3 * (38 + 8) + 6) * 1e6 / 1e12)


def test_te_ring_sends_one_block_per_step_hidden_by_that_step() -> None:
    g = Group(2, 1)  # two nodes: InfiniBand at 10 GB/s
    # K+V of 1e6 elements each, bf16: 4 MB per step = 400 us against a 300 us step (600 us / 2): 100 us shows.
    rc = ring_cost(
        framework="megatron",
        cp=2,
        q_elems=1e6,
        kv_elems=1e6,
        attn_fwd=600e-6,
        attn_bwd=1500e-6,
        net=NET,
        group=g,
        hbm=1e12,
        kernel_s=0.0,
    )
    assert rc.fwd_comm == pytest.approx(100e-6)
    assert rc.bwd_comm == pytest.approx(800e-6 - 750e-6)
    assert rc.fwd_mem == rc.bwd_mem == 0.0


def test_exchanged_block_memory_by_hand() -> None:
    # torchtitan, CP 8, 1e6 output and K/V elements: forward 8 gathered K and V (2 x 2 B x 8) + fp32 out and
    # merge temporary (2 x 4 B) = 40 B; backward 32 + fp32 grad_q 4 + two fp32 dK/dV buffers (16) = 52 B.
    assert exchanged_bytes(framework="torchtitan", cp=8, q_elems=1e6, kv_elems=1e6) == pytest.approx(52e6)
    assert exchanged_bytes(framework="megatron", cp=8, q_elems=1e6, kv_elems=1e6) == pytest.approx(8e6)
    assert exchanged_bytes(framework="torchtitan", cp=1, q_elems=1e6, kv_elems=1e6) == 0.0


def test_torchtitan_exchanges_repeated_heads() -> None:
    """Llama 3 8B (32 query / 8 KV heads) with CP across nodes: torchtitan moves K/V at the query width."""
    m, c = load_model("llama3-8b", seq=131072), load_cluster("dgx-h100", nodes=2)
    cal = calibration_for(c)
    base = dict(tp=8, cp=2, micro_batch=1, recompute="full", zero=3)
    tt = layer_cost(m, PlanConfig(**base, framework="torchtitan"), c, cal, moe=False)
    mg = layer_cost(m, PlanConfig(**base), c, cal, moe=False)
    assert tt.cp_comm > mg.cp_comm


def test_sdpa_flash_rate_is_the_published_fa2_over_cudnn_ratio() -> None:
    # FlashAttention-3 paper, H100 SXM5, head dim 128, 8K tokens, forward: FA2 370, cuDNN 600 TFLOP/s.
    c = load_cluster("dgx-h100")
    cal = calibration_for(c)
    assert Hw.of(c, cal, "torchtitan").attn_flops / Hw.of(c, cal, "megatron").attn_flops == pytest.approx(370 / 600)


def test_compiled_layout_copies_llama3_8b_by_hand() -> None:
    # q = 4096, kv = 1024: RoPE 4 B x (q + kv) = 20,480; repeat_kv 2 x (2 x 1024 + 2 x 4096) = 20,480;
    # the contiguous attention output 4 x 4096 = 16,384.
    assert compiled_layout_bytes(load_model("llama3-8b")) == 57344


def test_torchtitan_fsdp_under_pp_gathers_once_per_step() -> None:
    """torchtitan keeps a PP stage unsharded over micro-batches: the exposed DP time does not grow with them."""
    m, c = load_model("llama3-70b"), load_cluster("dgx-h100", nodes=8)
    plans = [
        PlanConfig(tp=8, pp=4, dp=2, micro_batch=1, global_batch=gb, recompute="full", zero=3, framework="torchtitan")
        for gb in (8, 64)
    ]
    small, big = (predict(m, c, p).time.dp_comm for p in plans)
    assert big == pytest.approx(small, rel=1e-9)
    megatron = [predict(m, c, p.model_copy(update={"framework": "megatron"})).time.dp_comm for p in plans]
    assert megatron[1] > 2 * megatron[0]  # Megatron-FSDP (ZeRO-3) gathers per micro-batch


def test_torchtitan_held_out_targets() -> None:
    """The 15 held-out torchtitan H100 runs, typed as they ran: throughput MAPE <= 12%, memory <= 8%."""
    held = [score(r) for r in load_runs() if not r.train]
    tps = statistics.mean(abs(s.tps_per_gpu / s.run.tps_per_gpu - 1) for s in held)
    mem = statistics.mean(abs(s.memory_gib / s.run.memory_gib - 1) for s in held)
    assert len(held) == 15
    assert tps <= 0.12
    assert mem <= 0.08
    assert all(s.fits for s in held)
