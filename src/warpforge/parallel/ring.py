"""Context parallelism as it runs: ring attention's exchange, its overlap, its merges and its memory.

With CP the sequence is split over ``cp`` ranks; each rank keeps its queries and meets every rank's keys
and values over ``cp`` steps. What each step costs depends on whose implementation runs:

* **Megatron / Transformer Engine** (``AttnFuncWithCPAndKVP2P``): a ring of point-to-point sends, one K/V
  block (the GQA width: TE attends grouped heads without repeating them) per step, each send hidden under
  that step's attention kernel; backward sends K/V and dK/dV per step. The per-step softmax corrections
  are fused into TE's kernels: no extra traffic is counted.
* **torchtitan / PyTorch** (``torch.distributed.tensor.experimental._attention``, torch of Dec 2024, the
  version of torchtitan's published runs): ``_cp_options`` defaults to ``rotate_method=ALL_GATHER``,
  ``enable_load_balance=True``, ``convert_to_f32=True``.

  - torchtitan's Llama repeats K/V to every query head (``repeat_kv``) before SDPA, so the exchanged
    blocks have the query width, not the KV width (4x for Llama 3's 32 / 8 heads).
  - ``_AllGatherRotater`` all-gathers every rank's K/V once, launched at step 0 and waited at step 1: only
    the first (diagonal) step's kernel hides it. Backward all-gathers K/V again the same way, and rotates
    the accumulated fp32 dK/dV to the next rank after every step (``ALL_TO_ALL`` rotater), waited after
    the next step's kernel: hidden per step.
  - ``_SDPAMerger`` merges each step's output in fp32 as separate kernels: ``out.to(float32)`` (6 B per
    output element), ``out - sigmoid(lse_b - lse) * (out - block_out)`` (12 + 8 + 12 B): 38 B per element
    per step; ``torch.cat([k, v])`` of the block before each exchange (4 B per K/V element). Backward
    accumulates ``grad_query`` in fp32 (10 B per element), adds each step's dK/dV into the received fp32
    buffer through ``_partial_update`` (chunk + add + ``torch.cat``: ~13 B per element) and concatenates
    them for the send (8 B), plus the bf16 K/V cat (4 B).

**Causal load balance.** Causal attention on contiguous chunks gives rank r work for r + 1/2 blocks: the
last rank does ``cp - 1/2`` blocks while the balanced share is ``cp / 2`` (``imbalance``). Both frameworks
balance by giving each rank chunks ``i`` and ``2cp - 1 - i`` (Megatron always; PyTorch by
``enable_load_balance``), so every step after the first computes half a block.

**Memory of the exchanged blocks** (``exchanged_bytes``): with the all-gather, every rank's K/V (bf16) lives
during the layer's attention, with the fp32 output and LSE accumulators (4 B per output element, twice
while a merge runs); in backward, the fp32 dK/dV buffers (received and the concatenated send) and fp32
``grad_query``.

Example::

    >>> round(imbalance(8, balanced=False), 3), imbalance(8, balanced=True)
    (1.875, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass

from warpforge.parallel.comm import Group, Network

MERGE_FWD_B = 38.0  # fp32 merge of one step's output, per output element (module docstring)
KV_CAT_B = 4.0  # bf16 torch.cat of K and V before each exchange, per K/V element
GRAD_Q_B = 10.0  # fp32 grad_query += bf16 step gradient, per element
GRAD_KV_B = 13.0 + 8.0  # _partial_update into the fp32 dK/dV buffer + the fp32 cat for the send
FP32 = 4.0
BF16 = 2.0


def imbalance(cp: int, balanced: bool) -> float:
    """Attention work of the busiest CP rank over the balanced share ``cp / 2`` blocks (causal)."""
    if cp <= 1 or balanced:
        return 1.0
    return (cp - 0.5) / (cp / 2.0)


@dataclass(frozen=True)
class RingCost:
    """Seconds one layer's ring attention adds for one micro-batch, beyond the attention kernels."""

    fwd_comm: float  # exposed exchange, forward
    bwd_comm: float  # exposed exchange, backward
    fwd_mem: float  # merges and copies, forward (memory-bound)
    bwd_mem: float  # accumulations and copies, backward


def ring_cost(
    *,
    framework: str,
    cp: int,
    q_elems: float,
    kv_elems: float,
    attn_fwd: float,
    attn_bwd: float,
    net: Network,
    group: Group,
    hbm: float,
    kernel_s: float,
) -> RingCost:
    """Ring attention over ``cp`` ranks for one layer and micro-batch on one GPU.

    ``q_elems``: elements of this rank's output (tokens x query width / TP); ``kv_elems``: elements of one
    of its K or V blocks as the exchange sees them (the query width for torchtitan's repeated heads);
    ``attn_fwd`` / ``attn_bwd``: the attention kernels' seconds over all steps (balanced)."""
    if cp <= 1:
        return RingCost(0.0, 0.0, 0.0, 0.0)
    steps = cp - 1
    floor = steps * 2e-6  # a launch and a wait per step even when the data is tiny
    inter = group.nodes > 1
    # Every step after the diagonal one computes half a block: the diagonal step is 1/cp of the work.
    diag_f, step_f = attn_fwd / cp, attn_fwd / cp
    diag_b, step_b = attn_bwd / cp, attn_bwd / cp
    kv_bytes = 2 * BF16 * kv_elems  # K and V of one rank
    if framework == "torchtitan":
        gather = net.all_gather(kv_bytes * cp, group)
        fwd = max(gather - diag_f, floor)
        dkv = net.p2p(2 * FP32 * kv_elems, inter)  # accumulated fp32 dK/dV to the next rank
        bwd = max(gather - diag_b, floor) + steps * max(dkv - step_b, 2e-6)
        fwd_bytes = steps * (MERGE_FWD_B * q_elems + KV_CAT_B * 2 * kv_elems) + 6.0 * q_elems
        bwd_bytes = steps * (GRAD_Q_B * q_elems + GRAD_KV_B * 2 * kv_elems + KV_CAT_B * 2 * kv_elems)
        n_kernels = 6
        return RingCost(
            fwd, bwd, fwd_bytes / hbm + steps * n_kernels * kernel_s, bwd_bytes / hbm + steps * n_kernels * kernel_s
        )
    one = net.p2p(kv_bytes, inter)
    fwd = steps * max(one - step_f, 2e-6)
    bwd = steps * max(2 * one - step_b, 2e-6)  # K/V and dK/dV
    return RingCost(fwd, bwd, 0.0, 0.0)


def exchanged_bytes(*, framework: str, cp: int, q_elems: float, kv_elems: float) -> float:
    """Transient bytes one layer's ring attention holds beyond its saved activations (peak of forward
    and backward): torchtitan's all-gathered K/V and fp32 accumulators; TE's two K/V receive buffers."""
    if cp <= 1:
        return 0.0
    if framework == "torchtitan":
        fwd = 2 * BF16 * kv_elems * cp + 2 * FP32 * q_elems  # gathered K/V + fp32 out and the merge temp
        bwd = 2 * BF16 * kv_elems * cp + FP32 * q_elems + 2 * 2 * FP32 * kv_elems  # + grad_q, dK/dV x2
        return max(fwd, bwd)
    return 2 * 2 * BF16 * kv_elems  # double-buffered K/V of the next step
