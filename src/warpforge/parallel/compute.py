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
from warpforge.parallel.gpus import gpu_model
from warpforge.parallel.ring import RingCost, ring_cost
from warpforge.parallel.specs import ClusterSpec, ModelSpec, PlanConfig

BF16 = 2  # bytes per activation/weight element
TP_OVERLAP_EXPOSED = 0.25  # with TP overlap, a quarter of the TP traffic (first/last of 4 chunks) shows
# Transformer Engine's userbuffers as Megatron-Core runs them (TE initialize_ub defaults): the reduce-scatters
# after proj / fc2 forward ("pipeline") split each GEMM into 4 chunks and take 16 SMs from it for the
# communication kernels (set_sm_margin); all-gathers run as a ring exchange on copy engines (1 SM).
UB_PIPELINE_SPLITS = 4
UB_PIPELINE_SMS = 16
DEFAULT_SMS = 132  # an H100 SXM's, for a GPU the table does not know
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
        return Hw(
            cluster.peak_tflops * 1e12 * scale,
            cluster.hbm_tbps * 1e12 * calib.mem_eff,
            calib,
            (cluster.fp8_tflops or 0.0) * 1e12 * scale,
            attn,
        )

    def g(self, d: float) -> float:
        return d / (d + self.calib.gemm_half_dim)

    def gemm(
        self, m: float, n: float, k: float, batch: float = 1.0, *, fp8: bool = False, grouped: bool = False
    ) -> float:
        """Seconds for ``batch`` GEMMs of (m x k) @ (k x n), bf16 or FP8 (1-byte inputs, bf16 output);
        ``grouped`` = one grouped GEMM over ``batch`` experts (MoE), at ``grouped_gemm_eff`` of the rate."""
        if m <= 0 or n <= 0 or k <= 0:
            return 0.0
        peak, base, in_b = (
            (self.fp8_flops, self.calib.fp8_gemm_eff, 1.0)
            if fp8 and self.fp8_flops
            else (self.flops, self.calib.gemm_eff, BF16)
        )
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


def layer_cost(model: ModelSpec, plan: PlanConfig, cluster: ClusterSpec, calib: Calibration, *, moe: bool) -> LayerCost:
    """Cost of one transformer layer (dense or MoE) for one micro-batch on one GPU.

    Only TP, CP, EP, micro-batch, recompute, SP and FlashAttention matter here, so a search that varies
    PP, DP, ZeRO and interleaving reuses one evaluation (cached)."""
    key = (
        plan.tp,
        plan.cp,
        plan.ep,
        plan.micro_batch,
        plan.recompute,
        plan.sp,
        plan.flash_attention,
        plan.precision,
        plan.etp,
        plan.moe_load_factor,
        plan.overlap_tp_comm,
        plan.moe_dispatcher,
        plan.framework,
        plan.compiled,
        plan.moe_a2a_overlap,
        plan.recompute_modules,
    )
    return _layer_cost_cached(model, cluster, calib, key, moe)


@lru_cache(maxsize=4096)
def _layer_cost_cached(
    model: ModelSpec, cluster: ClusterSpec, calib: Calibration, key: tuple[Any, ...], moe: bool
) -> LayerCost:
    tp, cp, ep, mb, recompute, sp, fa, precision, etp, load, tpo, disp, fw, compiled, a2a_ov, modules = key
    plan = PlanConfig(
        tp=tp,
        cp=cp,
        ep=ep,
        micro_batch=mb,
        recompute=recompute,
        sequence_parallel=sp,
        flash_attention=fa,
        precision=precision,
        expert_tp=etp,
        moe_load_factor=load,
        overlap_tp_comm=tpo,
        moe_dispatcher=disp,
        framework=fw,
        compiled=compiled,
        moe_a2a_overlap=a2a_ov,
        recompute_modules=modules,
    )
    return _layer_cost(model, plan, cluster, calib, moe=moe)


def _layer_cost(
    model: ModelSpec, plan: PlanConfig, cluster: ClusterSpec, calib: Calibration, *, moe: bool
) -> LayerCost:
    """One layer as the sum of its named terms (each a function below; the order of every sum is kept so
    the split changes no prediction)."""
    L = _Layer.of(model, plan, cluster, calib)
    qkv_gemm, out_gemm, casts = attention_projections(L)
    mlp = moe_mlp(L, casts) if moe else dense_mlp(L, casts)
    gemm = qkv_gemm + out_gemm + mlp.gemm
    attn = attention_core(L)
    elem = elementwise(L, mlp, moe)
    cast_fwd, cast_bwd = fp8_casts(L, mlp.casts, moe)
    fwd_mem = L.hw.mem(elem.nbytes, elem.kernels) + attn.softmax_fwd + cast_fwd
    # Backward of norms, activations and dropout reads the saved input and dy and writes dx (3 passes for
    # forward's 2); residual adds pass gradients through without a kernel: ~1.5x forward's traffic.
    bwd_mem = L.hw.mem(1.5 * elem.nbytes, 2 * elem.kernels) + attn.softmax_bwd + cast_bwd

    ring = context_parallel(L, attn)
    fwd_mem += ring.fwd_mem
    bwd_mem += ring.bwd_mem
    ep_fwd = mlp.dispatch + mlp.expert_tp  # EP all-to-all and the expert-TP gather/scatter, forward

    fwd_compute = gemm + attn.fwd
    linear = None if moe else (qkv_gemm, out_gemm, mlp.up_gemm, mlp.down_gemm)
    tp_fwd, tp_bwd, tp_mem = tp_exposed(L, tp_collectives(L), gemm, linear)
    fwd_mem += tp_mem
    bwd_mem += tp_mem
    fwd_comm = tp_fwd + ring.fwd_comm + ep_fwd
    bwd_comm = tp_bwd + ring.bwd_comm + ep_fwd

    bwd_compute = 2 * gemm + attn.bwd
    fwd_stall, bwd_stall = host_stall(
        L, elem.kernels, moe, fwd_compute + fwd_mem + fwd_comm, bwd_compute + bwd_mem + bwd_comm
    )
    model_flops = 2.0 * L.tokens * (model.attention_params() + mlp.params) / plan.tp + attn.flops
    recompute, recompute_flops = recompute_cost(
        L,
        moe,
        replay_fwd=fwd_compute + fwd_mem + fwd_comm + fwd_stall,
        fwd_mem=fwd_mem,
        attn=attn,
        elem=elem,
        mlp=mlp,
        ep_fwd=ep_fwd,
        model_flops=model_flops,
    )

    return LayerCost(
        fwd_compute=fwd_compute,
        fwd_mem=fwd_mem,
        fwd_comm=fwd_comm,
        bwd_compute=bwd_compute,
        bwd_mem=bwd_mem,
        bwd_comm=bwd_comm,
        host_stall=fwd_stall + bwd_stall,
        recompute=recompute,
        tp_comm=tp_fwd + tp_bwd,
        cp_comm=ring.fwd_comm + ring.bwd_comm,
        ep_comm=2 * ep_fwd,
        model_flops=model_flops,
        recompute_flops=recompute_flops,
    )


@dataclass(frozen=True)
class _Layer:
    """What every cost term of one layer reads: the rates, the communicators and one micro-batch's shapes
    on one GPU."""

    model: ModelSpec
    plan: PlanConfig
    calib: Calibration
    hw: Hw
    net: Network
    grp: dict[str, Group]
    tokens: float  # micro-batch x local sequence (s / cp)
    s_loc: float
    kv: int  # K (or V) projection width: kv heads x head dim
    sp_div: int  # tp with sequence parallelism (the replicated work is split), else 1
    fp8: bool  # the linear layers' GEMMs in FP8 (Transformer Engine); router, attention, LM head stay BF16
    up: int  # up-projection matrices per MLP (gate + up fused for SwiGLU: 2; GeLU: 1)
    sms: int  # the GPU's SM count (presets/gpus.yaml)

    @staticmethod
    def of(model: ModelSpec, plan: PlanConfig, cluster: ClusterSpec, calib: Calibration) -> _Layer:
        s_loc = model.seq / plan.cp
        known = gpu_model(cluster.gpu)
        return _Layer(
            model,
            plan,
            calib,
            Hw.of(cluster, calib, plan.framework),
            Network.of(cluster, calib),
            groups(plan, cluster.gpus_per_node),
            plan.micro_batch * s_loc,
            s_loc,
            model.n_kv_heads * model.head_dim,
            plan.tp if plan.sp else 1,
            plan.precision == "fp8",
            model.mlp_mats - 1,
            known.sms if known else DEFAULT_SMS,
        )


@dataclass(frozen=True)
class Casts:
    """Elements entering FP8 GEMMs: inputs in forward (``inp``), incoming gradients in backward (``out``)."""

    inp: float
    out: float

    def plus(self, inp: float, out: float) -> Casts:
        return Casts(self.inp + inp, self.out + out)


def attention_projections(L: _Layer) -> tuple[float, float, Casts]:
    """Forward seconds of the QKV and the output projection (TP-split); backward is dgrad + wgrad = 2x."""
    t, h, q, kv, fp8 = L.plan.tp, L.model.hidden, L.model.q_width, L.kv, L.fp8
    qkv, out = L.hw.gemm(L.tokens, (q + 2 * kv) / t, h, fp8=fp8), L.hw.gemm(L.tokens, h, q / t, fp8=fp8)
    return qkv, out, Casts(L.tokens * (h + q / t), L.tokens * ((q + 2 * kv) / t + h))


@dataclass(frozen=True)
class Mlp:
    """The MLP (dense) or MoE block of one layer, forward."""

    gemm: float  # seconds: up/down GEMMs (MoE: router + grouped experts + shared experts)
    casts: Casts  # FP8 cast elements so far (attention projections included)
    act_width: float  # activation-function width per token, before the TP split
    params: int  # weights a token multiplies (model FLOPs)
    flops: float = 0.0  # MoE: expert + shared FLOPs on this GPU (what recomputing the MoE layer replays)
    routed: float = 0.0  # MoE: token-expert pairs on this GPU (busiest rank)
    dispatch: float = 0.0  # MoE: EP all-to-all dispatch + combine, exposed
    expert_tp: float = 0.0  # MoE: expert-TP all-gather + reduce-scatter
    up_gemm: float = 0.0  # dense: the up (fc1, gate + up) and down (fc2) GEMMs apart, for TP overlap
    down_gemm: float = 0.0


def dense_mlp(L: _Layer, casts: Casts) -> Mlp:
    t, h, f, fp8 = L.plan.tp, L.model.hidden, L.model.ffn_dim, L.fp8
    fc1, fc2 = L.hw.gemm(L.tokens, L.up * f / t, h, fp8=fp8), L.hw.gemm(L.tokens, h, f / t, fp8=fp8)
    casts = casts.plus(L.tokens * (h + f / t), L.tokens * (L.up * f / t + h))
    return Mlp(fc1 + fc2, casts, f, L.model.dense_mlp_params(), up_gemm=fc1, down_gemm=fc2)


def moe_mlp(L: _Layer, casts: Casts) -> Mlp:
    """Router, grouped expert GEMMs (at ``grouped_gemm_eff`` x m / (m + ``grouped_half_tokens``) for m tokens
    per local expert), shared experts TP-split like a dense MLP, and the EP / expert-TP traffic."""
    model, plan, hw, fp8, up = L.model, L.plan, L.hw, L.fp8, L.up
    t, h, tokens = plan.tp, model.hidden, L.tokens
    fe, et = model.expert_ffn, plan.etp
    e_loc = model.experts / plan.ep
    # Tokens entering the MoE block on this GPU: its sequence-parallel shard, all-gathered over the
    # expert-TP group. The busiest rank gets ``moe_load_factor`` x the balanced share.
    tok_in = tokens / L.sp_div * et
    routed = tok_in * model.top_k * plan.moe_load_factor
    tokens_e = plan.ep * routed / model.experts  # per local expert (balanced dispatch: in = out)
    gemm = hw.gemm(tokens / L.sp_div, model.experts, h)  # router
    gemm += hw.gemm(tokens_e, up * fe / et, h, e_loc, fp8=fp8, grouped=True) + hw.gemm(
        tokens_e, h, fe / et, e_loc, fp8=fp8, grouped=True
    )
    flops = 2.0 * routed * (up + 1) * fe / et * h
    casts = casts.plus(routed * (h + fe / et), routed * (up * fe / et + h))  # routed pairs processed here
    if model.shared_experts:
        fs = model.shared_experts * fe
        gemm += hw.gemm(tokens, up * fs / t, h, fp8=fp8) + hw.gemm(tokens, h, fs / t, fp8=fp8)
        flops += 2.0 * tokens * (up + 1) * fs / t * h
        casts = casts.plus(tokens * (h + fs / t), tokens * (up * fs / t + h))
    act_width = routed / tokens * fe / et * t + model.shared_experts * fe  # per token, before / t
    return Mlp(
        gemm,
        casts,
        act_width,
        model.moe_mlp_params(model.top_k),
        flops,
        routed,
        moe_dispatch(L, routed),
        expert_tp_comm(L, routed),
    )


def moe_dispatch(L: _Layer, routed: float) -> float:
    """EP all-to-all dispatch + combine, forward: each GPU sends its routed tokens (bf16) over the EP group."""
    model, plan, h, et = L.model, L.plan, L.model.hidden, L.plan.etp
    if plan.ep <= 1:
        return 0.0
    if plan.moe_dispatcher == "deepep":
        a2a = 2 * L.net.dispatch_dedup(BF16 * h, routed / model.top_k / et, model.top_k, L.grp["ep"])
    else:
        a2a = 2 * L.net.all_to_all(BF16 * routed * h / et, L.grp["ep"])
    # Megatron's 1F1B all-to-all overlap runs one micro-batch's dispatch/combine under another's
    # compute: a calibrated share is hidden (NVIDIA measured 36.55% of the communication time
    # hidden on Qwen3-30B-A3B, 16 H100, against 0.11% with the overlap off). Off by default.
    if plan.moe_a2a_overlap:
        a2a *= 1.0 - L.calib.ep_overlap
    return a2a


def expert_tp_comm(L: _Layer, routed: float) -> float:
    """Expert TP: gather the dispatched tokens over ETP before the experts, reduce-scatter after."""
    if L.plan.etp <= 1:
        return 0.0
    etp_bytes = BF16 * routed * L.model.hidden
    return L.net.all_gather(etp_bytes, L.grp["etp"]) + L.net.reduce_scatter(etp_bytes, L.grp["etp"])


def torchtitan_sac_gemms(L: _Layer, moe: bool) -> float:
    """torchtitan's selective "op" recompute replays every other matmul of the block's seven (wk, wo, w3)."""
    t, h, q, fp8 = L.plan.tp, L.model.hidden, L.model.q_width, L.fp8
    return (
        L.hw.gemm(L.tokens, L.kv / t, h, fp8=fp8)
        + L.hw.gemm(L.tokens, h, q / t, fp8=fp8)
        + (L.hw.gemm(L.tokens, L.model.ffn_dim / t, h, fp8=fp8) if not moe else 0.0)
    )


@dataclass(frozen=True)
class AttentionCore:
    """QK^T, softmax and AV over a / t heads: seconds forward / backward and Megatron's FLOP count."""

    fwd: float
    bwd: float
    softmax_fwd: float  # unfused attention's memory-bound passes over the scores (0 with FlashAttention)
    softmax_bwd: float
    flops: float  # non-causal count, Megatron's convention


def attention_core(L: _Layer) -> AttentionCore:
    model, plan, hw, calib = L.model, L.plan, L.hw, L.calib
    t, b, s, s_loc = plan.tp, plan.micro_batch, model.seq, L.s_loc
    flops = 4.0 * b * s_loc * s * model.q_width / t
    if plan.flash_attention:
        # FlashAttention skips the masked half of a causal product; backward recomputes S: 2.5x fwd.
        tt_eff = calib.torchtitan_attn_eff if plan.framework == "torchtitan" else None
        eff = (tt_eff or calib.attn_eff) * hw.g(s_loc)
        fwd = 0.5 * flops / ((hw.attn_flops or hw.flops) * eff) + calib.kernel_us * 1e-6
        bwd = 2.5 * (fwd - calib.kernel_us * 1e-6) + calib.kernel_us * 1e-6
        return AttentionCore(fwd, bwd, 0.0, 0.0, flops)
    batch = b * model.heads / t
    fwd = hw.gemm(s_loc, s, model.head_dim, batch) + hw.gemm(s_loc, model.head_dim, s, batch)
    # scale+mask+softmax fused (read+write), dropout (read+write + 1-byte mask): 2 or 4.5 passes.
    passes = 4.5 if model.dropout else 2.0
    score_elems = b * (model.heads / t) * s_loc * s
    softmax_fwd = hw.mem(BF16 * score_elems * passes, 2 if model.dropout else 1)
    # softmax backward reads y and dy and writes dx: 3 passes for forward's 2
    return AttentionCore(fwd, 2 * fwd, softmax_fwd, 1.5 * softmax_fwd, flops)


@dataclass(frozen=True)
class Elementwise:
    """Memory-bound kernels of one layer, forward: bytes moved and kernel count."""

    nbytes: float
    kernels: int
    norm_bytes: float  # the two norms' share (what recomputing "layernorm" replays)
    act_bytes: float  # the activation function's share (what recomputing "moe_act" replays)
    permute_bytes: float  # MoE token permutation and un-permutation


def elementwise(L: _Layer, mlp: Mlp, moe: bool) -> Elementwise:
    """bf16 passes over [tokens, width] tensors: 2 norms (read+write: 4 passes), 2 residual adds (read 2 +
    write 1: 6 passes) and, with dropout, two 1-byte masks (1 pass), on tokens/t when sequence-parallel,
    else replicated; the activation function on the TP-split width; as each framework runs them."""
    model, plan, tokens, h, t = L.model, L.plan, L.tokens, L.model.hidden, L.plan.tp
    rep_passes = 10 + (1 if model.dropout else 0)
    act_passes = (3 if model.activation == "swiglu" else 2) * mlp.act_width / t  # read in, write out
    nbytes = BF16 * tokens * (rep_passes * h / L.sp_div + act_passes)
    kernels = 6
    norm_bytes, act_bytes = BF16 * tokens * 4 * h / L.sp_div, BF16 * tokens * act_passes
    permute_bytes = 0.0
    if moe:
        permute_bytes = BF16 * mlp.routed * h * 4 / plan.etp  # permute + un-permute (read + write each)
        nbytes += permute_bytes
        kernels += 2
    if plan.framework == "torchtitan" and not plan.compiled:
        # Eager torchtitan runs every pointwise op as its own kernel, in fp32 where the code upcasts.
        nbytes = tokens * eager_pointwise_bytes(model) / t
        kernels = EAGER_KERNELS
    elif plan.framework == "torchtitan":
        # Compiled: Inductor fuses the norms, residual adds and SwiGLU into the passes counted above, but
        # not the layout copies between SDPA and the matmuls (extern kernels) nor RoPE's pass.
        nbytes += tokens * compiled_layout_bytes(model) / t
        kernels += 4
    return Elementwise(nbytes, kernels, norm_bytes, act_bytes, permute_bytes)


def fp8_casts(L: _Layer, casts: Casts, moe: bool) -> tuple[float, float]:
    """Seconds forward / backward of the casts to FP8 (0 in BF16).

    TE fuses the quantisation of GEMM inputs into the preceding norm / activation, but writes a
    transposed FP8 copy for the weight gradient (1 B/element) and updates amax/scales (one small kernel per
    GEMM); backward quantises every incoming gradient (read 2 B, write FP8 and its transpose, 2 B). Weight
    casts happen once per step (cached over micro-batches): ignored."""
    if not L.fp8:
        return 0.0, 0.0
    model = L.model
    n_gemms = 4 + (2 if moe and model.shared_experts else 0)
    fwd = L.hw.mem(1.0 * casts.inp, n_gemms)
    bwd = L.hw.mem(4.0 * casts.out, n_gemms)
    if moe:
        # Per-expert issue of the FP8 expert GEMMs: two GEMMs forward, dgrad + wgrad of each backward.
        e_loc = model.experts / L.plan.ep
        fwd += 2 * e_loc * L.calib.fp8_expert_us * 1e-6
        bwd += 4 * e_loc * L.calib.fp8_expert_us * 1e-6
    return fwd, bwd


def context_parallel(L: _Layer, attn: AttentionCore) -> RingCost:
    """CP: ring attention as each framework runs it (ring.py): the exchange and what hides it, the per-step
    merges; torchtitan exchanges K/V at the query width (repeat_kv runs before SDPA)."""
    plan, q, t, b = L.plan, L.model.q_width, L.plan.tp, L.plan.micro_batch
    return ring_cost(
        framework=plan.framework,
        cp=plan.cp,
        q_elems=b * L.s_loc * q / t,
        kv_elems=b * L.s_loc * (q if plan.framework == "torchtitan" else L.kv) / t,
        attn_fwd=attn.fwd,
        attn_bwd=attn.bwd,
        net=L.net,
        group=L.grp["cp"],
        hbm=L.hw.hbm,
        kernel_s=L.calib.kernel_us * 1e-6,
    )


def tp_collectives(L: _Layer) -> float:
    """TP traffic of one layer forward, before any overlap: 2 all-reduces (with SP: all-gather +
    reduce-scatter pairs of the same volume, twice the latency)."""
    if L.plan.tp <= 1:
        return 0.0
    act_bytes = BF16 * L.tokens * L.model.hidden
    # torchtitan under Float8 uses torchao's Float8ColwiseParallel / Float8RowwiseParallel: inputs (and in
    # backward the incoming gradients) are cast to FP8 before the all-gather, so gathers move 1 B per
    # element; reduce-scatters stay bf16.
    ag_bytes = act_bytes / 2 if L.fp8 and L.plan.framework == "torchtitan" else act_bytes
    if L.plan.sp:
        tp_one = L.net.all_gather(ag_bytes, L.grp["tp"]) + L.net.reduce_scatter(act_bytes, L.grp["tp"])
    else:
        tp_one = L.net.all_reduce(act_bytes, L.grp["tp"])
    return 2 * tp_one


def tp_exposed(
    L: _Layer, tp_fwd: float, gemm: float, linear: tuple[float, float, float, float] | None = None
) -> tuple[float, float, float]:
    """(forward, backward) TP seconds left exposed, and memory-bound seconds the overlap adds to each.

    ``linear``: a dense layer's four forward GEMM times (QKV, output projection, fc1, fc2); with sequence
    parallelism under Megatron they set what each collective hides behind (``megatron_sp_exposed``)."""
    plan = L.plan
    tp_bwd = tp_fwd
    if plan.overlap_tp_comm and plan.tp > 1 and plan.framework == "torchtitan" and plan.sp:
        # PyTorch's async TP (Inductor's micro-pipeline TP pass on the forward and backward graphs:
        # symm_mem.fused_all_gather_matmul / fused_matmul_reduce_scatter): the all-gather's local shard
        # is multiplied first and each remote shard's copy hides under the previous shard's matmul; the
        # reduce-scatter sends each chunk as it is produced, so its last chunk (1/tp) shows, and every rank
        # then sums the tp chunks it received (read tp chunks, write one: memory-bound). Two fused
        # reduce-scatters per layer forward and two backward.
        act_bytes = BF16 * L.tokens * L.model.hidden
        rs_one = L.net.reduce_scatter(act_bytes, L.grp["tp"])
        floor = 2 * rs_one / plan.tp
        reduce = L.hw.mem(2 * act_bytes * (1 + 1 / plan.tp), 2)
        return max(tp_fwd - gemm, floor), max(tp_bwd - 2 * gemm, floor), reduce
    if linear is not None and plan.tp > 1 and plan.sp and plan.framework != "torchtitan":
        fwd, bwd = megatron_sp_exposed(L, linear)
        return fwd, bwd, 0.0
    if plan.overlap_tp_comm and plan.tp > 1:
        # TP communication overlap (Transformer Engine userbuffers): the all-gathers and reduce-scatters
        # run in chunks under the linear GEMMs; the first and last chunk stay exposed.
        return (
            max(tp_fwd - gemm, TP_OVERLAP_EXPOSED * tp_fwd),
            max(tp_bwd - 2 * gemm, TP_OVERLAP_EXPOSED * tp_bwd),
            0.0,
        )
    return tp_fwd, tp_bwd, 0.0


def megatron_sp_exposed(L: _Layer, linear: tuple[float, float, float, float]) -> tuple[float, float]:
    """Exposed TP seconds (forward, backward) of a dense layer under Megatron's sequence parallelism, each
    collective against the GEMM it runs beside. Every collective moves one [tokens, hidden] bf16 tensor.

    Forward: all-gather before QKV and fc1, reduce-scatter after the output projection and fc2. Backward
    (Megatron's linear layers, TE's and its own): the gradient of each reduce-scatter is an all-gather
    before the output projection's / fc2's dgrad; a column-parallel layer (QKV, fc1) re-gathers its
    saved input while its dgrad GEMM runs and reduce-scatters its input gradient while its wgrad GEMM
    runs (bulk overlap): 6 collectives backward for 4 forward.

    Without ``overlap_tp_comm`` the forward collectives and the two backward all-gathers show; the bulk
    ones show only what their GEMM cannot cover. With it (Transformer Engine's userbuffers, TE's
    defaults): the all-gathers run as a ring exchange, each of the tp - 1 remote chunks arriving while the
    previous chunk's GEMM runs (the local chunk goes first); the forward reduce-scatters are pipelined
    over 4 chunks of their GEMM (the last chunk's share shows) and take 16 SMs from that GEMM meanwhile."""
    t, grp = L.plan.tp, L.grp["tp"]
    qkv, out, fc1, fc2 = linear
    c = L.net.all_gather(BF16 * L.tokens * L.model.hidden, grp)

    def bulk(gemm: float) -> float:
        return max(0.0, c - gemm)

    backward_bulk = 2 * bulk(qkv) + 2 * bulk(fc1)
    if not L.plan.overlap_tp_comm:
        return 4 * c, 2 * c + backward_bulk

    def ring(gemm: float) -> float:
        return (t - 1) * max(0.0, c / (t - 1) - gemm / t)

    def pipeline(gemm: float) -> float:
        k = UB_PIPELINE_SPLITS
        margin = gemm * UB_PIPELINE_SMS / (L.sms - UB_PIPELINE_SMS)  # the GEMM on the SMs left to it
        return c / k + (k - 1) / k * max(0.0, c - gemm) + margin

    return ring(qkv) + pipeline(out) + ring(fc1) + pipeline(fc2), ring(fc2) + ring(out) + backward_bulk


def host_stall(L: _Layer, kernels: int, moe: bool, gpu_fwd: float, gpu_bwd: float) -> tuple[float, float]:
    """Seconds the GPU waits for the host, forward and backward: eager PyTorch issues kernels one by one;
    a layer whose GPU work is shorter than the host's issue time waits on the host (small models, small
    micro-batches, large TP). Collectives run on the GPU while the host keeps issuing, so ``gpu_*``
    include them."""
    plan = L.plan
    n_ops = 4 + (1 if plan.flash_attention else 4) + kernels + (4 if L.fp8 else 0)
    # A dropless MoE layer launches ~20 kernels beyond its GEMMs: router scores and top-k, aux loss,
    # token permutation (sort, gather, scatter), split-size exchange for the all-to-all, un-permutation.
    n_ops += (MOE_OPS + (2 if L.model.shared_experts else 0)) if moe else 0
    n_ops += (4 if plan.sp else 2) if plan.tp > 1 else 0
    host_fwd = n_ops * L.calib.host_us * 1e-6
    # autograd issues ~2 kernels per forward op
    return max(0.0, host_fwd - gpu_fwd), max(0.0, 2 * host_fwd - gpu_bwd)


def recompute_cost(
    L: _Layer,
    moe: bool,
    *,
    replay_fwd: float,
    fwd_mem: float,
    attn: AttentionCore,
    elem: Elementwise,
    mlp: Mlp,
    ep_fwd: float,
    model_flops: float,
) -> tuple[float, float]:
    """(seconds, FLOPs) of the forward work backward replays: all of it (full), torchtitan's selective "op"
    policy, or Megatron's selective recompute modules."""
    plan, model, tokens, h = L.plan, L.model, L.tokens, L.model.hidden
    if plan.recompute == "full":
        return replay_fwd, model_flops
    if plan.recompute == "selective" and plan.framework == "torchtitan":
        flops = 2.0 * tokens * (h * L.kv + model.q_width * h + (0 if moe else h * model.ffn_dim)) / plan.tp
        return torchtitan_sac_gemms(L, moe) + fwd_mem, flops
    if plan.recompute != "selective":
        return 0.0, 0.0
    seconds = flops = 0.0
    mods = plan.modules
    if "core_attn" in mods:
        seconds += attn.fwd + attn.softmax_fwd
        flops += attn.flops
    if "layernorm" in mods:
        seconds += L.hw.mem(elem.norm_bytes, 2)
    if moe and "moe" in mods:
        # The whole MoE layer again: router, permutation, dispatch and combine, experts.
        seconds += mlp.gemm + L.hw.mem(elem.permute_bytes + elem.act_bytes, 4) + ep_fwd
        flops += mlp.flops
    elif moe and "moe_act" in mods:
        seconds += L.hw.mem(elem.act_bytes, 1)
    return seconds, flops


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
