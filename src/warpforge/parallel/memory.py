"""Per-GPU memory: weights, gradients, optimizer states (ZeRO 0-3 / distributed optimizer) and activations.

Mixed-precision Adam as in Megatron-LM: bf16 weights (2 B), fp32 main gradients (4 B), fp32 master weights
plus two moments (12 B): 18 B per parameter, the accounting behind Korthikanti et al.'s memory figure.
ZeRO-1 (= Megatron's distributed optimizer) shards the 12 B over DP x CP, ZeRO-2 also the gradients,
ZeRO-3 also the weights.

Activations per layer and micro-batch follow Korthikanti et al. (2022), eq. 1-6, in units of s*b*h bytes:
``34 + 5*a*s/h`` for GPT (ffn = 4h, with dropout), of which ``10`` is replicated across TP ranks unless
sequence parallelism splits it, ``24`` is split by TP, and ``5*a*s/h`` (the attention scores) disappears
with selective recompute or FlashAttention. The terms are generalised below to GQA, SwiGLU and MoE.

Example::

    >>> from warpforge.parallel.specs import load_model, PlanConfig
    >>> m = load_model("gpt3-175b")
    >>> round(activation_bytes_per_layer(m, PlanConfig(tp=8, recompute="none", flash_attention=False,
    ...       sequence_parallel=False)) / (m.seq * m.hidden), 2)
    23.0
"""

from __future__ import annotations

from dataclasses import dataclass

from warpforge.parallel.specs import ModelSpec, PlanConfig

GIB = float(1 << 30)
WEIGHT_B, GRAD_B, OPT_B = 2.0, 4.0, 12.0
FP8_WEIGHT_B = 2.0  # FP8 weight + its transpose, kept next to the bf16 weights
RUNTIME_OVERHEAD_GIB = 2.0  # CUDA context (~0.5 GiB), NCCL communicator buffers and cuBLAS workspaces
FRAGMENTATION = 0.05  # the caching allocator rarely packs activations perfectly: ~5% slack


def activation_bytes_per_layer(model: ModelSpec, plan: PlanConfig, *, moe: bool = False) -> float:
    """Bytes one layer keeps for backward, per micro-batch, per GPU, without full recompute."""
    t = plan.tp
    sbh = plan.micro_batch * (model.seq / plan.cp) * model.hidden
    h, r_kv = model.hidden, model.n_kv_heads / model.heads
    qh = model.q_width / h  # 1 unless the head dim is set apart from hidden / heads (Qwen3)
    # FP8 (Transformer Engine) saves the inputs of its FP8 GEMMs in FP8: 1 byte instead of 2 for the QKV
    # and MLP inputs, the attention output and the second MLP GEMM's input.
    f8 = 1.0 if plan.precision == "fp8" else 0.0
    # Replicated unless sequence-parallel: 2 norm inputs (4), QKV and MLP inputs (4), dropout masks (2).
    replicated = 8.0 - 2.0 * f8 + (2.0 if model.dropout else 0.0)
    # Split by TP: Q (2), K and V (2 each, GQA-scaled), attention output (2): 8 for MHA.
    attn = (4.0 - f8 + 4.0 * r_kv) * qh
    if moe:
        fe = model.expert_ffn
        per_copy = ((6.0 if model.activation == "swiglu" else 4.0) - f8) * fe / h
        mlp = model.top_k * plan.moe_load_factor * (2.0 - f8 + per_copy) + model.shared_experts * per_copy
        if "moe" in plan.modules:
            mlp = 0.0  # the MoE layer is replayed in backward from its input (counted above)
    else:
        mlp = ((6.0 if model.activation == "swiglu" else 4.0) - f8) * model.ffn_dim / h
    split = attn + mlp
    total = replicated / (t if plan.sp else 1) + split / t
    if not plan.flash_attention and plan.recompute == "none":
        # softmax output (2) + dropout mask (1) + dropout output (2) per score, a*s^2*b scores.
        score = (5.0 if model.dropout else 2.0) * model.heads * model.seq / h
        total += score / t
    return total * sbh


def layer_input_bytes(model: ModelSpec, plan: PlanConfig) -> float:
    """What full recompute keeps per layer: its bf16 input (split by TP under sequence parallelism)."""
    sbh = plan.micro_batch * (model.seq / plan.cp) * model.hidden
    return 2.0 * sbh / (plan.tp if plan.sp else 1)


@dataclass(frozen=True)
class StageMemory:
    """Bytes on one GPU of one pipeline stage."""

    weights: float
    grads: float
    optimizer: float
    activations: float
    logits: float
    overhead: float

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer + self.activations + self.logits + self.overhead

    def gib(self) -> dict[str, float]:
        return {
            "weights": self.weights / GIB,
            "grads": self.grads / GIB,
            "optimizer": self.optimizer / GIB,
            "activations": self.activations / GIB,
            "logits": self.logits / GIB,
            "overhead": self.overhead / GIB,
        }


def stage_params(
    model: ModelSpec, plan: PlanConfig, dense_layers: int, moe_layers: int, embed: bool, head: bool
) -> tuple[float, float]:
    """(non-expert, expert) parameters held by one GPU of a stage."""
    t = plan.tp
    # Norm weights are replicated on every TP rank (2h per layer); everything else is split by TP.
    per_layer = (model.attention_params()) / t + 2 * model.hidden
    dense = dense_layers * (per_layer + model.dense_mlp_params() / t)
    dense += moe_layers * (
        per_layer
        + (model.shared_experts * model.mlp_mats * model.hidden * model.expert_ffn + model.hidden * model.experts) / t
    )
    expert = moe_layers * model.experts * model.mlp_mats * model.hidden * model.expert_ffn / (plan.etp * plan.ep)
    vh = model.vocab * model.hidden / t
    dense += (vh if embed else 0.0) + (vh if head and (not model.tied_embeddings or plan.pp > 1) else 0.0)
    return dense, expert


def stage_memory(
    model: ModelSpec,
    plan: PlanConfig,
    *,
    dense_layers: int,
    moe_layers: int,
    embed: bool,
    head: bool,
    in_flight_layers: float,
) -> StageMemory:
    """Memory of one GPU of a stage holding the given layers; ``in_flight_layers`` is the number of
    (layer, micro-batch) activation sets alive at the 1F1B peak (see ``pipeline.in_flight``)."""
    dense_p, expert_p = stage_params(model, plan, dense_layers, moe_layers, embed, head)
    shard = plan.dp * plan.cp
    # Expert weights are replicated over expert-data-parallel ranks only (TP x DP x CP / (ETP x EP)).
    eshard = max(1, plan.tp * shard // (plan.etp * plan.ep))
    z = plan.zero

    def sharded(nbytes_per_param: float, level: int) -> float:
        if z >= level:
            return nbytes_per_param * (dense_p / shard + expert_p / eshard)
        return nbytes_per_param * (dense_p + expert_p)

    weights = sharded(WEIGHT_B, 3)
    if plan.precision == "fp8":
        # TE's FP8 weight cache: an FP8 copy and its transpose (Hopper's FP8 GEMMs need both layouts),
        # sharded like the weights under FSDP (FP8 parameter gathering).
        # Only the transformer layers' linear weights: embeddings and the LM head stay BF16.
        lin_d, lin_e = stage_params(model, plan, dense_layers, moe_layers, embed=False, head=False)
        fp8_w = FP8_WEIGHT_B * ((lin_d / shard + lin_e / eshard) if z >= 3 else (lin_d + lin_e))
        weights += fp8_w
    grads = sharded(GRAD_B, 2)
    optimizer = sharded(OPT_B, 1)
    if z >= 3:
        # FSDP gathers a layer's full weights while it runs and prefetches the next: two layers live.
        n_layers = max(1, dense_layers + moe_layers)
        weights += 2 * WEIGHT_B * (dense_p + expert_p) / n_layers

    layers = dense_layers + moe_layers
    frac_moe = moe_layers / layers if layers else 0.0
    dense_act = activation_bytes_per_layer(model, plan)
    moe_act = activation_bytes_per_layer(model, plan, moe=model.is_moe)
    per_layer = (1 - frac_moe) * dense_act + frac_moe * moe_act
    if plan.recompute == "full":
        # Inputs of every in-flight layer, plus one layer's full activations while it is recomputed.
        no_rc = plan.model_copy(update={"recompute": "none"})
        working = activation_bytes_per_layer(model, no_rc)
        activations = in_flight_layers * layer_input_bytes(model, plan) + working
    else:
        activations = in_flight_layers * per_layer
    logits = 0.0
    if head:
        # bf16 logits from the output GEMM plus fp32 copies for the vocab-parallel cross-entropy: 6 B each.
        logits = 6.0 * plan.micro_batch * (model.seq / plan.cp) * model.vocab / plan.tp
    overhead = RUNTIME_OVERHEAD_GIB * GIB + FRAGMENTATION * activations
    return StageMemory(weights, grads, optimizer, activations, logits, overhead)
