"""The analytical simulator: plan validation and ``predict(model, cluster, plan) -> Prediction``.

Step time = pipeline time of the slowest stage (1F1B or interleaved, with bubbles and point-to-point
sends) + exposed data-parallel gradient reduction (hidden behind the last backward when overlapped) +
the optimizer step. Peak memory is the maximum over the first, second and last pipeline ranks (the first
holds the most in-flight activations, the last the LM head and its logits).

Example::

    >>> from warpforge.parallel import predict, load_model, load_cluster, PlanConfig
    >>> p = predict(load_model("gpt3-175b"), load_cluster("dgx-a100", nodes=8),
    ...             PlanConfig(tp=8, pp=8, micro_batch=1, recompute="selective"))
    >>> 0.2 < p.mfu < 0.7
    True
"""

from __future__ import annotations

from warpforge.parallel.bands import error_band
from warpforge.parallel.calibration import Calibration, calibration_for
from warpforge.parallel.comm import Group, Network
from warpforge.parallel.compute import Hw, groups, head_cost, layer_cost
from warpforge.parallel.errors import InvalidPlanError
from warpforge.parallel.fit_verdict import verdict
from warpforge.parallel.frameworks import FRAMEWORKS
from warpforge.parallel.hardware import hardware_info
from warpforge.parallel.memory import GIB, StageMemory, stage_memory, stage_params
from warpforge.parallel.memory_deepspeed import deepspeed_stage_memory
from warpforge.parallel.memory_fsdp import fsdp_stage_memory
from warpforge.parallel.pipeline import in_flight_chunks, pipeline_time
from warpforge.parallel.prediction import MemoryBreakdown, Prediction, TimeBreakdown
from warpforge.parallel.specs import ClusterSpec, ModelSpec, PlanConfig

BUCKET_PARAMS = 40e6  # Megatron's gradient bucket: the last one cannot hide behind any backward
ADAM_BYTES = 32.0  # per local parameter: read grad+master+m+v (16), write master+m+v+bf16 (14), norm (2)


def check_plan(model: ModelSpec, cluster: ClusterSpec, plan: PlanConfig) -> None:
    """Raise InvalidPlanError (one line, says what to change) unless the plan can run at all."""
    t, heads, kvh = plan.tp, model.heads, model.n_kv_heads
    rules = [
        (heads % t == 0, f"heads {heads} not divisible by TP {t}; use a TP that divides {heads}"),
        (kvh % t == 0, f"kv_heads {kvh} not divisible by TP {t}; use a TP that divides {kvh}"),
        (model.ffn_dim % t == 0, f"ffn {model.ffn_dim} not divisible by TP {t}"),
        (plan.pp <= model.layers, f"PP {plan.pp} exceeds the model's {model.layers} layers"),
        (plan.interleave == 1 or plan.pp > 1, "--interleave needs PP > 1"),
        (
            plan.interleave == 1 or model.layers >= plan.pp * plan.interleave,
            f"interleave {plan.interleave} x PP {plan.pp} exceeds the model's {model.layers} layers",
        ),
        (plan.cp == 1 or model.seq % (2 * plan.cp) == 0, f"seq {model.seq} not divisible by 2 x CP {plan.cp}"),
        (plan.ep == 1 or model.is_moe, f"EP {plan.ep} needs a mixture-of-experts model"),
        (not model.is_moe or model.experts % plan.ep == 0, f"experts {model.experts} not divisible by EP {plan.ep}"),
        (plan.tp % plan.etp == 0, f"expert TP {plan.etp} must divide TP {plan.tp}"),
        (
            not model.is_moe or model.expert_ffn % plan.etp == 0,
            f"moe_ffn {model.expert_ffn} not divisible by expert TP {plan.etp}",
        ),
        (
            (plan.tp * plan.dp * plan.cp) % (plan.etp * plan.ep) == 0,
            f"expert TP {plan.etp} x EP {plan.ep} must divide TP x DP x CP = {plan.tp * plan.dp * plan.cp}; "
            "use a smaller EP or --expert-tp 1",
        ),
        (
            plan.precision == "bf16" or cluster.fp8_tflops is not None,
            f"{cluster.gpu} has no FP8 tensor cores (fp8_tflops unset); use --precision bf16",
        ),
        (
            plan.gpus <= cluster.total_gpus,
            f"plan needs {plan.gpus} GPUs (tp*pp*dp*cp) but cluster '{cluster.name}' has {cluster.total_gpus}; "
            f"pass --nodes {-(-plan.gpus // cluster.gpus_per_node)} or shrink the plan",
        ),
    ]
    for ok, msg in rules:
        if not ok:
            raise InvalidPlanError(msg)
    why = FRAMEWORKS[plan.framework].why_not(plan)
    if why:
        hint = "; use --zero 3 (FSDP), 2 or 0" if plan.framework == "torchtitan" and plan.zero == 1 else ""
        raise InvalidPlanError(why + hint)
    if plan.pp_first_layers is not None or plan.pp_last_layers is not None:
        try:
            plan.stage_layers(model.layers)
        except ValueError as exc:
            raise InvalidPlanError(f"{exc}; change --pp-first-layers / --pp-last-layers") from None
    gb = plan.batch(model)
    if gb % (plan.dp * plan.micro_batch):
        raise InvalidPlanError(f"global batch {gb} not divisible by DP {plan.dp} x micro-batch {plan.micro_batch}")
    m = gb // (plan.dp * plan.micro_batch)
    if plan.interleave > 1 and m % plan.pp:
        raise InvalidPlanError(f"interleaved schedule needs micro-batches ({m}) divisible by PP {plan.pp}")


def _moe_split(model: ModelSpec, layers: list[int]) -> list[tuple[int, int]]:
    """(dense, moe) layer counts per stage: the first ``first_dense_layers`` layers are dense."""
    out, start = [], 0
    for n in layers:
        moe = 0
        if model.is_moe:
            moe = max(0, start + n - max(start, model.first_dense_layers))
        out.append((n - moe, moe))
        start += n
    return out


def _dp_exposed(
    plan: PlanConfig,
    net: Network,
    grp: dict[str, Group],
    dense_p: float,
    expert_p: float,
    fwd_window: float,
    bwd_window: float,
    m: int,
    n_layers: int,
) -> float:
    """Seconds of data-parallel communication left on the critical path for one stage."""
    pairs = ((dense_p, grp["dp"]), (expert_p, grp["edp"]))
    if plan.zero >= 3 and plan.pp > 1 and plan.framework == "torchtitan":
        # torchtitan with PP keeps the stage unsharded across micro-batches (reshard_after_forward off)
        # and syncs gradients only in the last micro-batch's backward (the pipeline stage turns
        # requires_gradient_sync off before): one bf16 all-gather, prefetched under the first forward
        # but for its first layer, and one fp32 reduce-scatter under the last backward, per step.
        ag = sum(net.all_gather(2.0 * p, g) for p, g in pairs)
        rs = sum(net.reduce_scatter(4.0 * p, g) for p, g in pairs)
        hidden_ag = fwd_window if plan.overlap_grad_reduce else 0.0
        hidden_rs = bwd_window if plan.overlap_grad_reduce else 0.0
        return max(ag - hidden_ag, ag / n_layers) + max(rs - hidden_rs, rs / n_layers)
    if plan.zero >= 3:
        # FSDP: all-gather weights for forward and again for backward, reduce-scatter gradients, every
        # micro-batch, overlapped with that micro-batch's compute except for the first layer's gather.
        per_mb = sum(2 * net.all_gather(2.0 * p, g) + net.reduce_scatter(4.0 * p, g) for p, g in pairs)
        hidden = (bwd_window + fwd_window) if plan.overlap_grad_reduce else 0.0
        return m * max(per_mb - hidden, per_mb / n_layers)
    if plan.zero == 0:
        rs, ag = sum(net.all_reduce(4.0 * p, g) for p, g in pairs), 0.0
    else:  # distributed optimizer: reduce-scatter fp32 grads, all-gather updated bf16 params
        rs = sum(net.reduce_scatter(4.0 * p, g) for p, g in pairs)
        ag = sum(net.all_gather(2.0 * p, g) for p, g in pairs)
    if not plan.overlap_grad_reduce:
        return rs + ag
    # Overlapped: gradients reduce in buckets during the last micro-batch's backward, parameters gather
    # during the next step's first forward; the last bucket can hide behind nothing.
    bucket = min(1.0, BUCKET_PARAMS / max(dense_p + expert_p, 1.0))
    return max(rs - bwd_window, rs * bucket) + max(ag - fwd_window, ag * bucket)


def optimistic_assumptions(model: ModelSpec, plan: PlanConfig) -> list[str]:
    """Where a plan leans on an assumption the validation runs do not back."""
    out = []
    if plan.recompute == "none":
        out.append(
            "assumes no activation recompute: activations fit by the simulator's accounting only; "
            "allocator spikes may force selective recompute"
        )
    if plan.cp > 1 and model.seq / plan.cp < 4096:
        out.append(
            f"CP {plan.cp} at sequence {model.seq} leaves {model.seq // plan.cp} tokens per rank: "
            "ring attention hides its K/V exchange less at short chunks than modelled (validated CP "
            "runs use >= 4K tokens per rank)"
        )
    if model.is_moe and plan.moe_load_factor == 1.0:
        out.append(
            "assumes balanced expert routing (moe_load_factor 1, as NVIDIA's tables were measured); "
            "real routing is imbalanced: try moe_load_factor 1.2-1.5"
        )
    if plan.overlap_tp_comm and plan.tp > 1:
        out.append("assumes TP communication overlap (TE userbuffers / async TP)")
    return out


def memory_by_rank(
    model: ModelSpec, plan: PlanConfig, split: list[tuple[int, int]] | None = None, m: int | None = None
) -> dict[int, StageMemory]:
    """Memory of pipeline ranks 0, 1 and p-1 (the others never exceed these): rank 0 holds the most
    in-flight activations and the embedding, the last rank the LM head and its logits."""
    pp, v = plan.pp, plan.interleave
    split = split or _moe_split(model, plan.stage_layers(model.layers))
    m = m or plan.num_microbatches(model)
    out = {}
    for i in sorted({0, min(1, pp - 1), pp - 1}):
        nd, nm = split[i]
        chunks = in_flight_chunks(i, pp, m, v)
        embed, head = i == 0, i == pp - 1
        if plan.framework == "torchtitan":
            out[i] = fsdp_stage_memory(
                model,
                plan,
                dense_layers=nd,
                moe_layers=nm,
                embed=embed,
                head=head,
                in_flight_microbatches=chunks / v,
                compiled=plan.compiled,
                microbatches=m,
            )
        elif plan.framework == "deepspeed":
            out[i] = deepspeed_stage_memory(
                model,
                plan,
                dense_layers=nd,
                moe_layers=nm,
                embed=embed,
                head=head,
                in_flight_layers=chunks * (nd + nm) / v,
            )
        else:
            out[i] = stage_memory(
                model,
                plan,
                dense_layers=nd,
                moe_layers=nm,
                embed=embed,
                head=head,
                in_flight_layers=chunks * (nd + nm) / v,
            )
    return out


def peak_memory_gib(model: ModelSpec, plan: PlanConfig) -> float:
    """Peak GiB per GPU over pipeline ranks: the cheap half of ``predict`` (search filters on it)."""
    return max(mem.total for mem in memory_by_rank(model, plan).values()) / GIB


def predict(model: ModelSpec, cluster: ClusterSpec, plan: PlanConfig, calib: Calibration | None = None) -> Prediction:
    """Predict step time, throughput, MFU/HFU and peak memory per GPU of ``plan``."""
    check_plan(model, cluster, plan)
    calib = calib or calibration_for(cluster)
    hw, net = Hw.of(cluster, calib), Network.of(cluster, calib)
    grp = groups(plan, cluster.gpus_per_node)
    pp, v, gb = plan.pp, plan.interleave, plan.batch(model)
    m = gb // (plan.dp * plan.micro_batch)
    dense_c = layer_cost(model, plan, cluster, calib, moe=False)
    moe_c = layer_cost(model, plan, cluster, calib, moe=True) if model.is_moe else dense_c
    head = head_cost(model, plan, cluster, calib)

    # Pipeline p2p: the stage boundary activation, split over TP ranks (Megatron's scatter/gather).
    p2p_bytes = 2.0 * plan.micro_batch * (model.seq / plan.cp) * model.hidden / plan.tp
    p2p_one = net.p2p(p2p_bytes, inter_node=plan.gpus > cluster.gpus_per_node) if pp > 1 else 0.0
    p2p_mb = 2 * v * p2p_one  # one send forward, one backward, per chunk

    split = _moe_split(model, plan.stage_layers(model.layers))
    stage_t, parts = [], []
    for i, (nd, nm) in enumerate(split):
        comp = nd * (dense_c.fwd_compute + dense_c.bwd_compute) + nm * (moe_c.fwd_compute + moe_c.bwd_compute)
        mem = nd * (dense_c.fwd_mem + dense_c.bwd_mem) + nm * (moe_c.fwd_mem + moe_c.bwd_mem)
        rec = nd * dense_c.recompute + nm * moe_c.recompute
        host = nd * dense_c.host_stall + nm * moe_c.host_stall
        tp_c = nd * dense_c.tp_comm + nm * moe_c.tp_comm
        cp_c = nd * dense_c.cp_comm + nm * moe_c.cp_comm
        ep_c = nm * moe_c.ep_comm
        if i == pp - 1:
            comp += head.fwd + head.bwd
        stage_t.append(comp + mem + rec + host + tp_c + cp_c + ep_c + p2p_mb)
        parts.append((comp, mem, rec, host, tp_c, cp_c, ep_c))
    pipe, bubble = pipeline_time(stage_t, m, v)
    crit = max(range(pp), key=lambda i: stage_t[i])

    # --- data-parallel gradient reduction and parameter gathering; optimizer step on the local shard.
    # Stages with the same layers and role cost the same: evaluate each kind once (PP=64 has 3 kinds).
    kinds = {(nd, nm, i == 0, i == pp - 1) for i, (nd, nm) in enumerate(split)}
    dp_exposed = opt_t = 0.0
    for nd, nm, embed, has_head in kinds:
        dense_p, expert_p = stage_params(model, plan, nd, nm, embed=embed, head=has_head)
        fwd_window = nd * dense_c.fwd + nm * moe_c.fwd
        bwd_window = nd * dense_c.bwd + nm * moe_c.bwd
        dp_exposed = max(
            dp_exposed, _dp_exposed(plan, net, grp, dense_p, expert_p, fwd_window, bwd_window, m, max(1, nd + nm))
        )
        shard = plan.dp * plan.cp if plan.zero >= 1 else 1
        eshard = max(1, plan.tp * plan.dp * plan.cp // (plan.etp * plan.ep)) if plan.zero >= 1 else 1
        opt_t = max(opt_t, hw.mem(ADAM_BYTES * (dense_p / shard + expert_p / eshard), 8))

    step = pipe + dp_exposed + opt_t
    comp, mem, rec, host, tp_c, cp_c, ep_c = (m * x for x in parts[crit])
    time = TimeBreakdown(
        compute=comp,
        memory_bound=mem,
        recompute=rec,
        host_overhead=host,
        tp_comm=tp_c,
        cp_comm=cp_c,
        ep_comm=ep_c,
        pp_p2p=m * p2p_mb,
        bubble=bubble,
        dp_comm=dp_exposed,
        optimizer=opt_t,
    )

    # --- memory: first, second and last ranks bound the peak.
    mems = memory_by_rank(model, plan, split, m)
    peak_rank = max(mems, key=lambda i: mems[i].total)
    peak = mems[peak_rank]
    memory = MemoryBreakdown(stage=peak_rank, **peak.gib())

    # --- FLOPs: Megatron's convention (full, non-causal attention; logits included).
    n_moe, n_dense = model.moe_layers, model.layers - model.moe_layers
    scale = plan.tp * plan.cp / plan.micro_batch  # per-GPU, per-micro-batch -> per sequence
    fwd_per_seq = (n_dense * dense_c.model_flops + n_moe * moe_c.model_flops + head.model_flops) * scale
    rec_per_seq = (n_dense * dense_c.recompute_flops + n_moe * moe_c.recompute_flops) * scale
    model_flops = 3.0 * fwd_per_seq * gb  # forward + backward (2x)
    hw_flops = model_flops + rec_per_seq * gb
    denom = step * plan.gpus * cluster.peak_tflops * 1e12

    notes = []
    if plan.gpus < cluster.total_gpus:
        notes.append(f"uses {plan.gpus} of the cluster's {cluster.total_gpus} GPUs")
    if plan.zero >= 2:
        notes.append("ZeRO-2/3 is FSDP-style sharding (torchtitan); Megatron-LM needs its FSDP backend")
    notes += cluster.power_notes()
    hw_info = hardware_info(cluster)
    if not hw_info.validated:
        notes.append(hw_info.label())
    band = error_band(cluster, model, plan)
    if not band.validated:
        notes.append(
            f"not validated: no measured runs for {band.key} (GPU family / precision / model kind); "
            "the numbers extrapolate the calibrated model"
        )
    notes += optimistic_assumptions(model, plan)
    fits = peak.total / GIB <= cluster.hbm_gb
    fit = verdict(peak.total / GIB, cluster.hbm_gb, plan.framework)
    if not fits:
        notes.append(f"needs {peak.total / GIB:.1f} GiB on pipeline rank {peak_rank}; HBM holds {cluster.hbm_gb:g}")
    if fit.verdict == "uncertain":
        notes.append(f"may or may not fit: {fit.label()}")
    return Prediction(
        model=model.name,
        cluster=cluster.name,
        plan=plan,
        gpus=plan.gpus,
        global_batch=gb,
        num_microbatches=m,
        step_time_s=step,
        tokens_per_s=gb * model.seq / step,
        mfu=model_flops / denom,
        hfu=hw_flops / denom,
        peak_mem_gb=peak.total / GIB,
        hbm_gb=cluster.hbm_gb,
        fits=fits,
        bubble_fraction=bubble / step,
        time=time,
        memory=memory,
        notes=notes,
        error_band=band,
        fit=fit,
        hardware_validated=hw_info.validated,
    )
