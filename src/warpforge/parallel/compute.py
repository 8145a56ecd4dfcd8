"""Per-layer cost of one micro-batch on one GPU: GEMMs, attention, memory-bound kernels, TP/CP/EP traffic.

GEMM time is a roofline with size-dependent efficiency: ``max(flops / (peak * eff), bytes / HBM)`` plus
a per-kernel overhead, where ``eff = gemm_eff * g(m) * g(n) * g(k)`` and ``g(d) = d / (d + d_half)``
models tile under-fill of small dimensions (a 384-wide GEMM on A100 runs ~11% slower than a 4096-wide one
with ``d_half = 48``). Memory-bound kernels (norms, residual adds, dropout, activation functions,
unfused softmax, cross-entropy) cost their bytes over the calibrated HBM bandwidth.

Example::

    >>> from warpforge.parallel.specs import load_model, load_cluster, PlanConfig
    >>> from warpforge.parallel.calibration import calibration_for
    >>> m, c = load_model("gpt3-175b"), load_cluster("dgx-a100")
    >>> cost = layer_cost(m, PlanConfig(tp=8), c, calibration_for(c), moe=False)
    >>> cost.fwd > 0 and cost.bwd > cost.fwd
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from warpforge.parallel.calibration import Calibration
from warpforge.parallel.comm import Group, Network
from warpforge.parallel.ring import ring_cost
from warpforge.parallel.specs import ClusterSpec, ModelSpec, PlanConfig

BF16 = 2  # bytes per activation/weight element
TP_OVERLAP_EXPOSED = 0.25  # with TP overlap, a quarter of the TP traffic (first/last of 4 chunks) shows
MOE_OPS = 20  # extra kernels per MoE layer forward (routing, permutation, all-to-all bookkeeping)


EAGER_KERNELS = 29  # torchtitan block forward, eager: 2 RMSNorms x 7, RoPE 2 x 4, repeat_kv 2, copy 1, SwiGLU 2,
#                     residual adds 2 (counted from torchtitan's Llama code)


# PyTorch's SDPA flash backend is FlashAttention-2; Transformer Engine, whose rate the H100 fit measured,
# runs cuDNN's fused attention on Hopper. FlashAttention-3 paper (Shah et al., arXiv 2407.08608), "Attention
# forward speed, head dim 128 (H100 80GB SXM5)": FlashAttention-2 370, cuDNN 600 TFLOP/s at 8K tokens.
SDPA_FLASH_VS_TE = 370.0 / 600.0
TE_CUDNN_FAMILIES = frozenset({"h100", "h200", "b200", "gb200"})  # where TE's attention is cuDNN's


def compiled_layout_bytes(model: ModelSpec) -> float:
    """HBM bytes per token that torch.compile cannot fuse away in torchtitan's block, forward: the copies
    between extern kernels (SDPA and the matmuls are not Inductor code). RoPE fused with its write
    (read and write q and k, 4 B per element); ``repeat_kv`` materialises K and V at the query width for
    SDPA (read 2kv, write 2q, each); the attention output is made contiguous for ``wo`` (read + write,
    4q). Transformer Engine needs none of the copies (grouped heads and its layout are native)."""
    q, kv = model.q_width, model.n_kv_heads * model.head_dim
    return 4.0 * (q + kv) + 2 * (2.0 * kv + 2.0 * q) + 4.0 * q


def eager_pointwise_bytes(model: ModelSpec) -> float:
    """HBM bytes per token of one eager torchtitan block's pointwise kernels, forward (read + write):
    each RMSNorm upcasts to fp32 and runs pow, mean, rsqrt, two multiplies and a downcast as separate
    kernels (36h bytes); RoPE upcasts q and k, multiplies in complex fp32 and downcasts (20 bytes per
    element); repeat_kv copies k and v to all heads (2kv + 2q each); the attention output is made
    contiguous (4q); SiLU and the gate multiply run apart (10f); two residual adds (12h).
    Compiled, Inductor fuses these into the 10h + 3f bf16 passes the default model counts."""
    h, q, f = model.hidden, model.q_width, model.ffn_dim
    kv = model.n_kv_heads * model.head_dim
    return 2 * 36.0 * h + 12.0 * h + 20.0 * (q + kv) + 2 * (2.0 * kv + 2.0 * q) + 4.0 * q + 10.0 * f


@dataclass(frozen=True)
class Hw:
    """Calibrated hardware rates for one GPU."""

    flops: float  # peak FLOP/s (bf16)
    hbm: float  # achieved bytes/s for memory-bound kernels
    calib: Calibration
    fp8_flops: float = 0.0  # peak FP8 FLOP/s (0: none)
    attn_flops: float = 0.0  # peak the attention kernels' efficiency applies to (0: ``flops``)

    @staticmethod
    def of(cluster: ClusterSpec, calib: Calibration, framework: str = "megatron") -> Hw:
        scale = cluster.compute_scale()  # power-capped or clock-limited GPUs (ClusterSpec.compute_scale)
        attn = cluster.peak_tflops * 1e12 * scale
        if framework == "torchtitan":
            # PyTorch's cuBLAS/torchao GEMMs vs Transformer Engine's, which the H100 fit saw; its attention
            # is SDPA's FlashAttention-2, slower than TE's cuDNN kernel on Hopper by a measured ratio.
            scale *= calib.torchtitan_gemm_scale
            if cluster.gpu_family in TE_CUDNN_FAMILIES:
                attn *= SDPA_FLASH_VS_TE
            else:
                attn *= calib.torchtitan_gemm_scale
        return Hw(cluster.peak_tflops * 1e12 * scale, cluster.hbm_tbps * 1e12 * calib.mem_eff, calib,
                  (cluster.fp8_tflops or 0.0) * 1e12 * scale, attn)

    def g(self, d: float) -> float:
        return d / (d + self.calib.gemm_half_dim)

    def gemm(self, m: float, n: float, k: float, batch: float = 1.0, *, fp8: bool = False,
             grouped: bool = False) -> float:
        """Seconds for ``batch`` GEMMs of (m x k) @ (k x n), bf16 or FP8 (1-byte inputs, bf16 output);
        ``grouped`` = one grouped GEMM over ``batch`` experts (MoE), at ``grouped_gemm_eff`` of the rate."""
        if m <= 0 or n <= 0 or k <= 0:
            return 0.0
        peak, base, in_b = ((self.fp8_flops, self.calib.fp8_gemm_eff, 1.0) if fp8 and self.fp8_flops
                            else (self.flops, self.calib.gemm_eff, BF16))
        eff = base * self.g(m) * self.g(n) * self.g(k)
        if grouped:
            eff *= self.calib.grouped_gemm_eff * m / (m + self.calib.grouped_half_tokens)
            if fp8 and self.fp8_flops:
                eff *= self.calib.fp8_grouped_scale
        compute = 2.0 * m * n * k * batch / (peak * eff)
        traffic = (in_b * (m * k + k * n) + BF16 * m * n) * batch / self.hbm
        return max(compute, traffic) + self.calib.kernel_us * 1e-6

    def mem(self, nbytes: float, kernels: int) -> float:
        """Seconds for memory-bound kernels moving ``nbytes`` in total."""
        return nbytes / self.hbm + kernels * self.calib.kernel_us * 1e-6


@dataclass(frozen=True)
class LayerCost:
    """Seconds (and FLOPs) for one layer and one micro-batch on one GPU; comm is what is exposed."""

    fwd_compute: float
    fwd_mem: float
    fwd_comm: float  # TP + CP + EP
    bwd_compute: float
    bwd_mem: float
    bwd_comm: float
    host_stall: float  # forward + backward time the GPU waits for the host to issue kernels
    recompute: float  # extra forward work during backward, its communication included
    tp_comm: float  # the TP share of fwd_comm + bwd_comm
    cp_comm: float
    ep_comm: float
    model_flops: float  # forward FLOPs by the model formula (no recompute), this GPU's share
    recompute_flops: float

    @property
    def fwd(self) -> float:
        return self.fwd_compute + self.fwd_mem + self.fwd_comm + self.host_stall / 3

    @property
    def bwd(self) -> float:
        return self.bwd_compute + self.bwd_mem + self.bwd_comm + self.recompute + 2 * self.host_stall / 3

    @property
    def total(self) -> float:
        return self.fwd + self.bwd


def groups(plan: PlanConfig, gpus_per_node: int) -> dict[str, Group]:
    """Communicators in Megatron's rank order (TP, CP, DP/EP, PP)."""
    tp, cp = plan.tp, plan.cp
    return {
        "tp": Group.of(tp, 1, gpus_per_node),
        "cp": Group.of(cp, tp, gpus_per_node),
        "dp": Group.of(plan.dp * cp, tp, gpus_per_node),  # gradients reduce over DP x CP
        # Experts (Megatron's MoE parallel folding): ETP innermost, then EP, then expert-data-parallel,
        # over the same TP x CP x DP ranks; with ETP = TP this is EP carved out of CP x DP.
        "etp": Group.of(plan.etp, 1, gpus_per_node),
        "ep": Group.of(plan.ep, plan.etp, gpus_per_node),
        "edp": Group.of(max(1, tp * cp * plan.dp // (plan.etp * plan.ep)), plan.etp * plan.ep, gpus_per_node),
    }


def layer_cost(
    model: ModelSpec, plan: PlanConfig, cluster: ClusterSpec, calib: Calibration, *, moe: bool
) -> LayerCost:
    """Cost of one transformer layer (dense or MoE) for one micro-batch on one GPU.

    Only TP, CP, EP, micro-batch, recompute, SP and FlashAttention matter here, so a search that varies
    PP, DP, ZeRO and interleaving reuses one evaluation (cached)."""
    key = (plan.tp, plan.cp, plan.ep, plan.micro_batch, plan.recompute, plan.sp, plan.flash_attention,
           plan.precision, plan.etp, plan.moe_load_factor, plan.overlap_tp_comm, plan.moe_dispatcher,
           plan.framework, plan.compiled, plan.moe_a2a_overlap, plan.recompute_modules)
    return _layer_cost_cached(model, cluster, calib, key, moe)


@lru_cache(maxsize=4096)
def _layer_cost_cached(
    model: ModelSpec, cluster: ClusterSpec, calib: Calibration, key: tuple[Any, ...], moe: bool
) -> LayerCost:
    tp, cp, ep, mb, recompute, sp, fa, precision, etp, load, tpo, disp, fw, compiled, a2a_ov, modules = key
    plan = PlanConfig(tp=tp, cp=cp, ep=ep, micro_batch=mb, recompute=recompute, sequence_parallel=sp,
                      flash_attention=fa, precision=precision, expert_tp=etp, moe_load_factor=load,
                      overlap_tp_comm=tpo, moe_dispatcher=disp, framework=fw, compiled=compiled,
                      moe_a2a_overlap=a2a_ov, recompute_modules=modules)
    return _layer_cost(model, plan, cluster, calib, moe=moe)


def _layer_cost(
    model: ModelSpec, plan: PlanConfig, cluster: ClusterSpec, calib: Calibration, *, moe: bool
) -> LayerCost:
    hw, net = Hw.of(cluster, calib, plan.framework), Network.of(cluster, calib)
    grp = groups(plan, cluster.gpus_per_node)
    t, b, h, a = plan.tp, plan.micro_batch, model.hidden, model.heads
    s_loc, s = model.seq / plan.cp, model.seq
    tokens = b * s_loc
    kv = model.n_kv_heads * model.head_dim
    sp_div = t if plan.sp else 1

    # --- GEMMs (forward); backward = dgrad + wgrad = 2x the same shapes. FP8 (Transformer Engine) covers
    # the linear layers; the router, attention core and LM head stay BF16.
    fp8 = plan.precision == "fp8"
    q = model.q_width
    gemm = hw.gemm(tokens, (q + 2 * kv) / t, h, fp8=fp8) + hw.gemm(tokens, h, q / t, fp8=fp8)
    cast_in = tokens * (h + q / t)  # elements entering FP8 GEMMs (forward), for the cast cost below
    cast_out = tokens * ((q + 2 * kv) / t + h)  # gradient elements entering FP8 GEMMs (backward)
    up = model.mlp_mats - 1  # gate+up fused for SwiGLU
    a2a_fwd = etp_fwd = moe_gemm = moe_flops = 0.0
    if moe:
        fe, et = model.expert_ffn, plan.etp
        e_loc = model.experts / plan.ep
        # Tokens entering the MoE block on this GPU: its sequence-parallel shard, all-gathered over the
        # expert-TP group. The busiest rank gets ``moe_load_factor`` x the balanced share.
        tok_in = tokens / sp_div * et
        routed = tok_in * model.top_k * plan.moe_load_factor
        tokens_e = plan.ep * routed / model.experts  # per local expert (balanced dispatch: in = out)
        moe_gemm = hw.gemm(tokens / sp_div, model.experts, h)  # router
        moe_gemm += (hw.gemm(tokens_e, up * fe / et, h, e_loc, fp8=fp8, grouped=True)
                     + hw.gemm(tokens_e, h, fe / et, e_loc, fp8=fp8, grouped=True))
        moe_flops = 2.0 * routed * (up + 1) * fe / et * h
        cast_in += routed * (h + fe / et)  # routed token-expert pairs processed here
        cast_out += routed * (up * fe / et + h)
        if model.shared_experts:
            fs = model.shared_experts * fe
            moe_gemm += hw.gemm(tokens, up * fs / t, h, fp8=fp8) + hw.gemm(tokens, h, fs / t, fp8=fp8)
            moe_flops += 2.0 * tokens * (up + 1) * fs / t * h
            cast_in += tokens * (h + fs / t)
            cast_out += tokens * (up * fs / t + h)
        act_width = routed / tokens * fe / et * t + model.shared_experts * fe  # per token, before / t
        mlp_params = model.moe_mlp_params(model.top_k)
        if plan.ep > 1:
            # Dispatch + combine: each GPU sends its routed tokens (bf16) over the EP group.
            if plan.moe_dispatcher == "deepep":
                a2a_fwd = 2 * net.dispatch_dedup(BF16 * h, routed / model.top_k / et, model.top_k, grp["ep"])
            else:
                a2a_fwd = 2 * net.all_to_all(BF16 * routed * h / et, grp["ep"])
            # Megatron's 1F1B all-to-all overlap runs one micro-batch's dispatch/combine under another's
            # compute: a calibrated share is hidden (NVIDIA measured 36.55% of the communication time
            # hidden on Qwen3-30B-A3B, 16 H100, against 0.11% with the overlap off). Off by default.
            if plan.moe_a2a_overlap:
                a2a_fwd *= 1.0 - calib.ep_overlap
        if et > 1:
            # Expert TP: gather the dispatched tokens over ETP before the experts, reduce-scatter after.
            etp_bytes = BF16 * routed * h
            etp_fwd = net.all_gather(etp_bytes, grp["etp"]) + net.reduce_scatter(etp_bytes, grp["etp"])
        gemm += moe_gemm
    else:
        f = model.ffn_dim
        gemm += hw.gemm(tokens, up * f / t, h, fp8=fp8) + hw.gemm(tokens, h, f / t, fp8=fp8)
        cast_in += tokens * (h + f / t)
        cast_out += tokens * (up * f / t + h)
        act_width = f
        mlp_params = model.dense_mlp_params()
    # torchtitan's selective "op" recompute replays every other matmul of the block's seven (wk, wo, w3).
    sac_gemm = (hw.gemm(tokens, kv / t, h, fp8=fp8) + hw.gemm(tokens, h, q / t, fp8=fp8)
                + (hw.gemm(tokens, model.ffn_dim / t, h, fp8=fp8) if not moe else 0.0))

    # --- attention core: 2 batched GEMMs (QK^T, AV) over a/t heads.
    attn_flops = 4.0 * b * s_loc * s * q / t  # non-causal count, Megatron's FLOP convention
    score_elems = b * (a / t) * s_loc * s
    if plan.flash_attention:
        # FlashAttention skips the masked half of a causal product; backward recomputes S: 2.5x fwd.
        tt_eff = calib.torchtitan_attn_eff if plan.framework == "torchtitan" else None
        eff = (tt_eff or calib.attn_eff) * hw.g(s_loc)
        attn_fwd = 0.5 * attn_flops / ((hw.attn_flops or hw.flops) * eff) + calib.kernel_us * 1e-6
        attn_bwd = 2.5 * (attn_fwd - calib.kernel_us * 1e-6) + calib.kernel_us * 1e-6
        softmax_fwd = softmax_bwd = 0.0
    else:
        batch = b * a / t
        attn_fwd = hw.gemm(s_loc, s, model.head_dim, batch) + hw.gemm(s_loc, model.head_dim, s, batch)
        attn_bwd = 2 * attn_fwd
        # scale+mask+softmax fused (read+write), dropout (read+write + 1-byte mask): 2 or 4.5 passes.
        passes = 4.5 if model.dropout else 2.0
        softmax_fwd = hw.mem(BF16 * score_elems * passes, 2 if model.dropout else 1)
        softmax_bwd = 1.5 * softmax_fwd  # read y and dy, write dx: 3 passes for forward's 2

    # --- memory-bound elementwise kernels (bf16 passes over [tokens, width] tensors).
    # Per layer: 2 norms (read+write: 4 passes), 2 residual adds (read 2 + write 1: 6 passes) and,
    # with dropout, two 1-byte masks (1 pass): on tokens/t when sequence-parallel, else replicated.
    rep_passes = 10 + (1 if model.dropout else 0)
    act_passes = (3 if model.activation == "swiglu" else 2) * act_width / t  # read in, write out
    elem_bytes = BF16 * tokens * (rep_passes * h / sp_div + act_passes)
    kernels = 6
    norm_bytes, act_bytes_fwd = BF16 * tokens * 4 * h / sp_div, BF16 * tokens * act_passes
    permute_bytes = 0.0
    if moe:
        permute_bytes = BF16 * routed * h * 4 / et  # permute + un-permute (read + write each)
        elem_bytes += permute_bytes
        kernels += 2
    eager_tt = plan.framework == "torchtitan" and not plan.compiled
    if eager_tt:
        # Eager torchtitan runs every pointwise op as its own kernel, in fp32 where the code upcasts.
        elem_bytes = tokens * eager_pointwise_bytes(model) / t
        kernels = EAGER_KERNELS
    elif plan.framework == "torchtitan":
        # Compiled: Inductor fuses the norms, residual adds and SwiGLU into the passes counted above, but
        # not the layout copies between SDPA and the matmuls (extern kernels) nor RoPE's pass.
        elem_bytes += tokens * compiled_layout_bytes(model) / t
        kernels += 4
    cast_fwd = cast_bwd = 0.0
    if fp8:
        # Casts to FP8: TE fuses the quantisation of GEMM inputs into the preceding norm / activation, but
        # writes a transposed FP8 copy for the weight gradient (1 B/element) and updates amax/scales
        # (one small kernel per GEMM); backward quantises every incoming gradient (read 2 B, write FP8 and
        # its transpose, 2 B). Weight casts happen once per step (cached over micro-batches): ignored.
        n_gemms = 4 + (2 if moe and model.shared_experts else 0)
        cast_fwd = hw.mem(1.0 * cast_in, n_gemms)
        cast_bwd = hw.mem(4.0 * cast_out, n_gemms)
        if moe:
            # Per-expert issue of the FP8 expert GEMMs: two GEMMs forward, dgrad + wgrad of each backward.
            e_loc = model.experts / plan.ep
            cast_fwd += 2 * e_loc * calib.fp8_expert_us * 1e-6
            cast_bwd += 4 * e_loc * calib.fp8_expert_us * 1e-6
    fwd_mem = hw.mem(elem_bytes, kernels) + softmax_fwd + cast_fwd
    # Backward of norms, activations and dropout reads the saved input and dy and writes dx (3 passes for
    # forward's 2); residual adds pass gradients through without a kernel: ~1.5x forward's traffic.
    bwd_mem = hw.mem(1.5 * elem_bytes, 2 * kernels) + softmax_bwd + cast_bwd

    # --- TP: 2 all-reduces per layer forward and 2 backward (with SP: all-gather + reduce-scatter
    # pairs of the same volume, twice the latency).
    act_bytes = BF16 * tokens * h
    # torchtitan under Float8 uses torchao's Float8ColwiseParallel / Float8RowwiseParallel: inputs (and in
    # backward the incoming gradients) are cast to FP8 before the all-gather, so gathers move 1 B per
    # element; reduce-scatters stay bf16.
    ag_bytes = act_bytes / 2 if fp8 and plan.framework == "torchtitan" else act_bytes
    if plan.tp > 1:
        if plan.sp:
            tp_one = net.all_gather(ag_bytes, grp["tp"]) + net.reduce_scatter(act_bytes, grp["tp"])
        else:
            tp_one = net.all_reduce(act_bytes, grp["tp"])
    else:
        tp_one = 0.0
    tp_fwd = 2 * tp_one

    # --- CP: ring attention as each framework runs it (ring.py): the exchange and what hides it, the
    # per-step merges; torchtitan exchanges K/V at the query width (repeat_kv runs before SDPA).
    ring = ring_cost(framework=plan.framework, cp=plan.cp, q_elems=b * s_loc * q / t,
                     kv_elems=b * s_loc * (q if plan.framework == "torchtitan" else kv) / t,
                     attn_fwd=attn_fwd, attn_bwd=attn_bwd, net=net, group=grp["cp"], hbm=hw.hbm,
                     kernel_s=calib.kernel_us * 1e-6)
    cp_fwd, cp_bwd = ring.fwd_comm, ring.bwd_comm
    fwd_mem += ring.fwd_mem
    bwd_mem += ring.bwd_mem

    # --- EP: all-to-all dispatch + combine (and the expert-TP gather/scatter), forward and backward.
    ep_fwd = a2a_fwd + etp_fwd

    fwd_compute = gemm + attn_fwd
    tp_bwd = tp_fwd
    if plan.overlap_tp_comm and plan.tp > 1 and plan.framework == "torchtitan" and plan.sp:
        # PyTorch's async TP (Inductor's micro-pipeline TP pass on the forward and backward graphs:
        # symm_mem.fused_all_gather_matmul / fused_matmul_reduce_scatter): the all-gather's local shard
        # is multiplied first and each remote shard's copy hides under the previous shard's matmul; the
        # reduce-scatter sends each chunk as it is produced, so its last chunk (1/tp) shows, and every rank
        # then sums the tp chunks it received (read tp chunks, write one: memory-bound). Two fused
        # reduce-scatters per layer forward and two backward.
        rs_one = net.reduce_scatter(act_bytes, grp["tp"])
        floor = 2 * rs_one / plan.tp
        tp_fwd = max(tp_fwd - gemm, floor)
        tp_bwd = max(tp_bwd - 2 * gemm, floor)
        reduce = hw.mem(2 * act_bytes * (1 + 1 / plan.tp), 2)
        fwd_mem += reduce
        bwd_mem += reduce
    elif plan.overlap_tp_comm and plan.tp > 1:
        # TP communication overlap (Transformer Engine userbuffers): the all-gathers and reduce-scatters
        # run in chunks under the linear GEMMs; the first and last chunk stay exposed.
        tp_fwd = max(tp_fwd - gemm, TP_OVERLAP_EXPOSED * tp_fwd)
        tp_bwd = max(tp_bwd - 2 * gemm, TP_OVERLAP_EXPOSED * tp_bwd)
    fwd_comm = tp_fwd + cp_fwd + ep_fwd
    bwd_comm = tp_bwd + cp_bwd + ep_fwd

    # --- host floor: eager PyTorch issues kernels one by one; a layer whose GPU work is shorter than
    # the host's issue time waits on the host (small models, small micro-batches, large TP).
    n_ops = 4 + (1 if plan.flash_attention else 4) + kernels + (4 if fp8 else 0)
    # A dropless MoE layer launches ~20 kernels beyond its GEMMs: router scores and top-k, aux loss,
    # token permutation (sort, gather, scatter), split-size exchange for the all-to-all, un-permutation.
    n_ops += (MOE_OPS + (2 if model.shared_experts else 0)) if moe else 0
    n_ops += (4 if plan.sp else 2) if plan.tp > 1 else 0
    host_fwd = n_ops * calib.host_us * 1e-6
    # Collectives run on the GPU while the host keeps issuing, so they count towards the GPU side.
    fwd_stall = max(0.0, host_fwd - (fwd_compute + fwd_mem + fwd_comm))
    bwd_stall = max(0.0, 2 * host_fwd - (2 * gemm + attn_bwd + bwd_mem + bwd_comm))  # autograd: ~2 per op

    model_flops = 2.0 * tokens * (model.attention_params() + mlp_params) / t + attn_flops
    if plan.recompute == "full":
        recompute = fwd_compute + fwd_mem + fwd_comm + fwd_stall
        recompute_flops = model_flops
    elif plan.recompute == "selective" and plan.framework == "torchtitan":
        recompute = sac_gemm + fwd_mem
        recompute_flops = 2.0 * tokens * (h * kv + q * h + (0 if moe else h * model.ffn_dim)) / t
    elif plan.recompute == "selective":
        recompute = recompute_flops = 0.0
        mods = plan.modules
        if "core_attn" in mods:
            recompute += attn_fwd + softmax_fwd
            recompute_flops += attn_flops
        if "layernorm" in mods:
            recompute += hw.mem(norm_bytes, 2)
        if moe and "moe" in mods:
            # The whole MoE layer again: router, permutation, dispatch and combine, experts.
            recompute += moe_gemm + hw.mem(permute_bytes + act_bytes_fwd, 4) + ep_fwd
            recompute_flops += moe_flops
        elif moe and "moe_act" in mods:
            recompute += hw.mem(act_bytes_fwd, 1)
    else:
        recompute = recompute_flops = 0.0

    return LayerCost(
        fwd_compute=fwd_compute,
        fwd_mem=fwd_mem,
        fwd_comm=fwd_comm,
        bwd_compute=2 * gemm + attn_bwd,
        bwd_mem=bwd_mem,
        bwd_comm=bwd_comm,
        host_stall=fwd_stall + bwd_stall,
        recompute=recompute,
        tp_comm=tp_fwd + tp_bwd,
        cp_comm=cp_fwd + cp_bwd,
        ep_comm=2 * ep_fwd,
        model_flops=model_flops,
        recompute_flops=recompute_flops,
    )


@dataclass(frozen=True)
class HeadCost:
    """The LM head (output GEMM + vocab-parallel cross-entropy) for one micro-batch."""

    fwd: float
    bwd: float
    model_flops: float


def head_cost(model: ModelSpec, plan: PlanConfig, cluster: ClusterSpec, calib: Calibration) -> HeadCost:
    hw = Hw.of(cluster, calib, plan.framework)
    tokens = plan.micro_batch * model.seq / plan.cp
    v_loc = model.vocab / plan.tp
    gemm = hw.gemm(tokens, v_loc, model.hidden)
    # Cross-entropy in fp32: softmax statistics and the gradient are two read+write passes (16 B/logit).
    ce = hw.mem(16.0 * tokens * v_loc, 3)
    flops = 2.0 * tokens * model.hidden * v_loc
    return HeadCost(fwd=gemm + ce, bwd=2 * gemm + ce, model_flops=flops)
