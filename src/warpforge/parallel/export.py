"""Export a plan: Megatron-LM command-line arguments or a torchtitan-style TOML configuration.

Megatron-LM (``pretrain_gpt.py``, Megatron-Core 0.14+ flag names): parallel sizes, micro/global batch,
virtual pipeline stages, sequence parallelism, distributed optimizer (ZeRO-1) or Megatron-FSDP
(ZeRO-2/3: ``--data-parallel-sharding-strategy optim_grads[_params]``), recompute, the model shape.
torchtitan: ``[training]``, ``[parallelism]`` and ``[activation_checkpoint]`` sections; FSDP2 always
shards weights, so ZeRO-0 maps to pure replication, ZeRO-3 to ``fsdp_reshard_after_forward = "always"``
and ZeRO-1/2 to ``"never"`` (weights stay gathered between forward and backward, as in ZeRO-2).

Example::

    >>> from warpforge.parallel import load_model, PlanConfig
    >>> ex = export_plan(load_model("llama3-70b"), PlanConfig(tp=8, pp=4, dp=2, interleave=2), "megatron")
    >>> "--tensor-model-parallel-size 8" in ex.text
    True
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from warpforge.parallel.errors import SpecError
from warpforge.parallel.specs import ModelSpec, PlanConfig

Format = Literal["megatron", "torchtitan", "deepspeed"]


class Export(BaseModel):
    """An exported plan: the text to paste, its pieces, and what could not be expressed."""

    format: str
    text: str
    args: list[str] = []
    notes: list[str] = []


def megatron_args(model: ModelSpec, plan: PlanConfig) -> Export:
    """Megatron-LM arguments for ``plan`` (one flag and its value per list item)."""
    gb = plan.batch(model)
    a: list[str] = [
        f"--num-layers {model.layers}",
        f"--hidden-size {model.hidden}",
        f"--num-attention-heads {model.heads}",
        f"--ffn-hidden-size {model.ffn_dim}",
        f"--seq-length {model.seq}",
        f"--max-position-embeddings {model.seq}",
        f"--micro-batch-size {plan.micro_batch}",
        f"--global-batch-size {gb}",
        f"--tensor-model-parallel-size {plan.tp}",
        f"--pipeline-model-parallel-size {plan.pp}",
        "--bf16",
    ]
    notes = [
        f"data-parallel size {plan.dp} follows from the world size {plan.gpus} (tp*pp*cp*dp)",
        "vocabulary size comes from the tokenizer (--tokenizer-type / --tokenizer-model)",
    ]
    if model.n_kv_heads != model.heads:
        a += ["--group-query-attention", f"--num-query-groups {model.n_kv_heads}"]
    if model.activation == "swiglu":
        a += ["--swiglu", "--normalization RMSNorm", "--position-embedding-type rope", "--disable-bias-linear"]
    if not model.dropout:
        a += ["--attention-dropout 0.0", "--hidden-dropout 0.0"]
    if not model.tied_embeddings:
        a.append("--untie-embeddings-and-output-weights")
    if plan.pp > 1 and (model.layers % plan.pp or plan.pp_first_layers is not None or plan.pp_last_layers is not None):
        layers = plan.stage_layers(model.layers)
        a += [f"--decoder-first-pipeline-num-layers {layers[0]}", f"--decoder-last-pipeline-num-layers {layers[-1]}"]
    chunks = plan.pp * plan.interleave
    if plan.interleave > 1 and model.layers % chunks == 0:
        a.append(f"--num-layers-per-virtual-pipeline-stage {model.layers // chunks}")
    elif plan.interleave > 1:
        a.append(f"--num-virtual-stages-per-pipeline-rank {plan.interleave}")
        if (model.layers + 2) % chunks == 0:
            # Llama-3-405B's layout: 126 layers + embedding + loss = 128 = 2 per virtual stage.
            a += ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
        else:
            notes.append(
                f"{model.layers} layers do not split evenly over {chunks} virtual stages: set "
                "--pipeline-model-parallel-layout to place them"
            )
    if plan.cp > 1:
        a.append(f"--context-parallel-size {plan.cp}")
    if model.is_moe:
        a += [
            f"--num-experts {model.experts}",
            f"--moe-router-topk {model.top_k}",
            f"--moe-ffn-hidden-size {model.expert_ffn}",
            f"--expert-model-parallel-size {plan.ep}",
            "--moe-grouped-gemm",
            "--moe-token-dispatcher-type alltoall",
        ]
        if model.shared_experts:
            a.append(f"--moe-shared-expert-intermediate-size {model.shared_experts * model.expert_ffn}")
        if model.first_dense_layers:
            n_dense, n_moe = model.first_dense_layers, model.layers - model.first_dense_layers
            a.append(f"--moe-layer-freq '([0]*{n_dense}+[1]*{n_moe})'")
    if model.is_moe and plan.etp != plan.tp:
        a.append(f"--expert-tensor-parallel-size {plan.etp}")
    if plan.precision == "fp8":
        a += [
            "--fp8-format hybrid",
            "--fp8-recipe delayed",
            "--fp8-amax-history-len 1024",
            "--fp8-amax-compute-algo max",
        ]
    if plan.overlap_tp_comm and plan.tp > 1:
        a.append("--tp-comm-overlap")
    if plan.sp:
        a.append("--sequence-parallel")
    if plan.flash_attention:
        a.append("--attention-backend flash")
    if plan.zero == 1:
        a.append("--use-distributed-optimizer")
    elif plan.zero >= 2:
        strategy = "optim_grads" if plan.zero == 2 else "optim_grads_params"
        a += [
            "--use-megatron-fsdp",
            f"--data-parallel-sharding-strategy {strategy}",
            "--no-gradient-accumulation-fusion",
            "--use-distributed-optimizer",
        ]
    if plan.overlap_grad_reduce and plan.dp * plan.cp > 1:
        a.append("--overlap-grad-reduce")
        if plan.zero >= 1:
            a.append("--overlap-param-gather")
    if plan.recompute == "selective":
        a.append("--recompute-granularity selective")
    elif plan.recompute == "full":
        a += ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
    return Export(format="megatron", text=" \\\n  ".join(a), args=a, notes=notes)


def torchtitan_toml(model: ModelSpec, plan: PlanConfig) -> Export:
    """A torchtitan-style TOML fragment (``[training]``, ``[parallelism]``, ``[activation_checkpoint]``)."""
    gb = plan.batch(model)
    notes = ["[model] name/flavor must name a torchtitan model of this shape"]
    if plan.zero == 0:
        replicate, shard, reshard = plan.dp, 1, "default"
    else:
        replicate, shard = 1, plan.dp
        reshard = "always" if plan.zero == 3 else "never"
        if plan.zero == 1:
            notes.append(
                "torchtitan has no ZeRO-1; FSDP2 with reshard_after_forward='never' (ZeRO-2) "
                "is the nearest and uses less memory"
            )
    if plan.ep > 1:
        notes.append("expert_parallel_degree borrows its ranks from data_parallel_shard_degree x cp")
    # Without PP, torchtitan accumulates gradients over local batches: local = micro-batch. With PP,
    # the local batch is the whole per-rank batch, split into pipeline micro-batches.
    local = gb // plan.dp if plan.pp > 1 else plan.micro_batch
    lines = [
        f"# warpforge plan {plan.short()} for {model.name} "
        f"({model.layers} layers, hidden {model.hidden}, {plan.gpus} GPUs)",
        "[training]",
        f"local_batch_size = {local}",
        f"global_batch_size = {gb}",
        f"seq_len = {model.seq}",
        "",
        "[parallelism]",
        f"data_parallel_replicate_degree = {replicate}",
        f"data_parallel_shard_degree = {shard}",
        f'fsdp_reshard_after_forward = "{reshard}"',
        f"tensor_parallel_degree = {plan.tp}",
        f"context_parallel_degree = {plan.cp}",
        f"pipeline_parallel_degree = {plan.pp}",
    ]
    if plan.pp > 1:
        schedule = "Interleaved1F1B" if plan.interleave > 1 else "1F1B"
        lines += [
            f'pipeline_parallel_schedule = "{schedule}"',
            f"pipeline_parallel_microbatch_size = {plan.micro_batch}",
        ]
        if plan.interleave > 1:
            per_stage = -(-model.layers // (plan.pp * plan.interleave))
            lines.append(f"pipeline_parallel_layers_per_stage = {per_stage}")
            if model.layers % (plan.pp * plan.interleave):
                notes.append("uneven virtual stages: torchtitan's last stage takes the remainder")
    if model.is_moe:
        lines.append(f"expert_parallel_degree = {plan.ep}")
    if plan.tp > 1 and not plan.sp:
        notes.append("torchtitan always shards norms/dropout over TP (sequence parallel)")
    if plan.precision == "fp8":
        lines += ["", "[model]", 'converters = ["float8"]', "", "[float8]", "enable_fsdp_float8_all_gather = true"]
    lines += ["", "[activation_checkpoint]", f'mode = "{plan.recompute}"']
    if plan.recompute == "selective":
        lines.append('selective_ac_option = "op"')
    return Export(format="torchtitan", text="\n".join(lines) + "\n", notes=notes)


def deepspeed_config(model: ModelSpec, plan: PlanConfig) -> Export:
    """A DeepSpeed JSON config plus the Megatron-DeepSpeed parallel arguments (TP/PP live there)."""
    import json

    gb = plan.batch(model)
    cfg = {
        "train_batch_size": gb,
        "train_micro_batch_size_per_gpu": plan.micro_batch,
        "gradient_accumulation_steps": plan.num_microbatches(model),
        "bf16": {"enabled": True},
        "zero_optimization": {
            "stage": plan.zero,
            "overlap_comm": plan.overlap_grad_reduce,
            "contiguous_gradients": True,
        },
        "activation_checkpointing": {
            "partition_activations": plan.recompute == "full",
            "contiguous_memory_optimization": False,
        },
    }
    args = [f"--tensor-model-parallel-size {plan.tp}", f"--pipeline-model-parallel-size {plan.pp}"]
    args += ["--sequence-parallel"] if plan.sp else []
    args += ["--checkpoint-activations"] if plan.recompute == "full" else []
    args += (
        [f"--num-experts {model.experts}", f"--moe-expert-parallel-size {plan.ep}", f"--topk {model.top_k}"]
        if model.is_moe
        else []
    )
    notes = [f"Megatron-DeepSpeed arguments: {' '.join(args)}"]
    for why, bad in (
        (f"DeepSpeed runs ZeRO-{plan.zero} only without pipeline parallelism", plan.zero >= 2 and plan.pp > 1),
        ("DeepSpeed has no context parallelism", plan.cp > 1),
        ("DeepSpeed's pipeline engine has no interleaved schedule", plan.interleave > 1),
        ("DeepSpeed's engine has no FP8 training", plan.precision == "fp8"),
    ):
        if bad:
            raise SpecError(f"cannot export to deepspeed: {why}; search with --framework deepspeed")
    if plan.recompute == "selective":
        notes.append("DeepSpeed has no selective recompute: none is exported (use full if memory is short)")
    return Export(format="deepspeed", text=json.dumps(cfg, indent=2) + "\n", args=args, notes=notes)


def export_plan(model: ModelSpec, plan: PlanConfig, fmt: str) -> Export:
    """Dispatch on ``fmt``: ``megatron``, ``torchtitan`` or ``deepspeed``."""
    if fmt == "megatron":
        return megatron_args(model, plan)
    if fmt == "torchtitan":
        return torchtitan_toml(model, plan)
    if fmt == "deepspeed":
        return deepspeed_config(model, plan)
    raise SpecError(f"unknown export format '{fmt}'; use megatron, torchtitan or deepspeed")
