"""Per-GPU memory as torchtitan (PyTorch FSDP2 + DTensor) keeps it resident, not as Megatron does.

What differs from ``memory.py`` (Megatron-LM's accounting):

* **Parameters** are fp32 and sharded over the FSDP group (``dp * cp`` ranks: torchtitan shards over
  ``dp_shard`` and ``cp`` together): 4 B/param/N. Compute runs on bf16 copies that FSDP2 all-gathers per
  block (``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``): 2 B per unsharded parameter,
  bf16 also under Float8 (torchao's float8 all-gather is off by default in torchtitan).
* **Gradients** are fp32 and sharded (4 B/param/N) once reduce-scattered; AdamW keeps two fp32 moments
  (8 B/param/N). No separate master copy: the sharded fp32 parameters are the master.
* **Unsharded parameters in flight**: ``reshard_after_forward`` is True for every block but the last
  (zero=3, no PP), so at the loss one block is unsharded; in backward the block running plus the one
  prefetched, and its fp32 reduce-scatter input (4 B/param). ``zero=2`` (reshard never) keeps every block
  unsharded. **With pipeline parallelism** torchtitan sets ``reshard_after_forward=False`` and turns gradient
  sync off until the last micro-batch: the whole stage stays unsharded (2 B/param) and its gradients
  accumulate unsharded in fp32 (4 B/param, FSDP2's ``to_accumulated_grad_if_needed``).
* **Activations** per layer and token, from the saved tensors of torchtitan's Llama block (bytes, in units
  of hidden ``h``, query width ``q``, KV width ``kv`` and FFN width ``f``):

  - eager, no recompute: ``12h + 14q + 4kv + 8f``: each RMSNorm keeps its input, normalised input and
    output (3 x 2h); RoPE multiplies fp32 complex copies of q and k (4q + 4kv); SDPA keeps q and the
    head-repeated k and v (2q each) and its output (2q); ``wo`` gets a contiguous copy (2q); SwiGLU keeps
    w1's, w3's and silu's outputs and w2's input (4 x 2f). Measured by ``memcheck`` (torch's FSDP2 memory
    tracker) to the byte: 12,696 B/token at h=q=256, kv=128, f=688.
  - compiled (``torch.compile`` per block): Inductor's min-cut keeps the GEMM inputs/outputs and recomputes
    the pointwise ops: the two norm inputs (4h), rotated q and k and v (2q + 4kv), the attention output
    (2q), w1's and w3's outputs (4f): ``4h + 4q + 4kv + 4f``.
  - selective "op" (torchtitan's policy, not Megatron's): the block input (2h) and the outputs of every
    other matmul (wq 2q, wv 2kv, w1 2f, w2 2h) and of SDPA (2q): ``4h + 4q + 2kv + 2f``.
  - selective "layer" is not modelled apart (torchtitan's ``selective_ac_option`` int): "op" is the default.
  - full: the block input (2h); in backward one block's activations are rebuilt (eager or compiled set).

  Tokens per GPU are ``micro_batch * seq / cp``; TP (with sequence parallelism, as torchtitan always
  applies it with TP) divides every term by ``tp`` except the all-gathered inputs of the attention and MLP
  matmuls (2 x 2h per token, kept whole for the weight gradients).
* **Loss**: torchtitan upcasts the logits to fp32 before ``cross_entropy``; at the loss the bf16 logits,
  their fp32 copy and the fp32 log-softmax live together: 12 B per token and vocabulary entry (measured:
  4 B saved + 8 B temporary, ``memcheck`` at vocab 2048 and 8192); the final norm and the head's input keep
  10h per token. Vocabulary split by TP (loss parallel).
* **Loss parallel** (TP > 1): DTensor's vocabulary-parallel cross-entropy
  (``torch.distributed.tensor.parallel.loss``) is a Python decomposition, not the fused kernel: its
  backward ``(grad_input + exp(x)) * grad_output`` keeps the saved fp32 log-softmax, the zeroed fp32
  ``grad_input``, ``exp(x)`` and their sum alive together: 16 B per token and local vocabulary entry at
  the start of backward, above the 12 B at the loss (TP = 1 takes the fused kernels: 12 B both ways).
* **Pipeline outputs**: torch's pipeline schedules keep every micro-batch's output of the last stage
  (``_PipelineStageBase.output_chunks``) until the step ends, and ``_merge_outputs`` concatenates them
  (``merge_chunks``: a copy) before ``step`` returns. In torchtitan that output is the logits, upcast to
  fp32 by the model (``self.output(h).float()``): 4 B per token and local vocabulary entry for every
  micro-batch, twice at the merge. Only the rank holding the last stage pays this.
* **Allocator**: frameworks report ``torch.cuda.max_memory_reserved``; the caching allocator holds more than
  the live tensors. ``RESERVED_RATIO`` (reserved / live peak) is fitted on the torchtitan runs marked
  ``train`` in ``data/torchtitan_h100.csv`` (see ``benchmarks/planner_validation.py``), never on held-out ones.

The peak is the larger of two moments: the loss (every activation, the logits peak, no gradients yet) and
early backward (activations, the gradients, the running and prefetched blocks, the rebuilt block).

Example::

    >>> from warpforge.parallel.specs import load_model, PlanConfig
    >>> m = load_model("llama3-8b")
    >>> mem = fsdp_stage_memory(m, PlanConfig(dp=8, micro_batch=2, zero=3), dense_layers=32,
    ...                         embed=True, head=True, in_flight_microbatches=1)
    >>> round(mem.optimizer / GIB, 1)  # 8 B/param over 8 ranks, 8.03 B params
    7.5
"""

from __future__ import annotations

from dataclasses import dataclass

from warpforge.parallel.memory import GIB, StageMemory, stage_params
from warpforge.parallel.ring import exchanged_bytes
from warpforge.parallel.specs import ModelSpec, PlanConfig

PARAM_B, MOMENTS_B, GRAD_B = 4.0, 8.0, 4.0  # fp32 sharded parameters, AdamW's two fp32 moments, fp32 grads
ADAM_TEMP_B = 4.0  # torch's _multi_tensor_adamw: exp_avg_sq.sqrt() as a new fp32 list per step
LOGITS_B = 12.0  # bf16 logits + fp32 copy + fp32 log-softmax at the loss (memcheck: 4 saved + 8 temporary)
# Loss parallel's backward (TP > 1): saved log-softmax, grad_input, exp(x), their sum, all fp32 (docstring).
LOSS_PARALLEL_BWD_B = 16.0
PRED_B = 4.0  # the fp32 logits of one micro-batch kept by the pipeline schedule (output_chunks)
HEAD_ACT_H = 10.0  # final RMSNorm (3 x 2h) and the head's saved input, per token (memcheck: 10h)
RESERVED_RATIO = 1.1544  # reserved / live peak of the caching allocator, fitted on 3 train rows (docstring)
RUNTIME_GIB = 0.0  # torchtitan reports reserved memory of the allocator only: no context / NCCL counted

# Per-layer activation bytes per token as (h, q, kv, f) coefficients; see the module docstring.
EAGER = (12.0, 14.0, 4.0, 8.0)
COMPILED = (4.0, 4.0, 4.0, 4.0)
SELECTIVE_OP = (4.0, 4.0, 2.0, 2.0)


def _coef(model: ModelSpec, c: tuple[float, float, float, float]) -> float:
    kv = model.n_kv_heads * model.head_dim
    return c[0] * model.hidden + c[1] * model.q_width + c[2] * kv + c[3] * model.ffn_dim


def layer_bytes_per_token(model: ModelSpec, plan: PlanConfig, compiled: bool) -> tuple[float, float]:
    """(kept for backward, rebuilt in backward) bytes per token of one layer, before TP/CP split."""
    working = _coef(model, COMPILED if compiled else EAGER)
    if plan.recompute == "none":
        return working, 0.0
    if plan.recompute == "full":
        return 2.0 * model.hidden, working
    return _coef(model, SELECTIVE_OP), working


@dataclass(frozen=True)
class FsdpPhases:
    """Live bytes at the loss and in early backward (the peak is the larger)."""

    at_loss: float
    in_backward: float


def fsdp_stage_memory(
    model: ModelSpec,
    plan: PlanConfig,
    *,
    dense_layers: int,
    embed: bool,
    head: bool,
    in_flight_microbatches: float,
    moe_layers: int = 0,
    compiled: bool = False,
    microbatches: int = 1,
    reserved_ratio: float = RESERVED_RATIO,
) -> StageMemory:
    """Reserved bytes on one GPU of a stage under torchtitan; ``activations``, ``logits`` and the
    unsharded parameters are those of the peak moment; ``overhead`` is the allocator's reserve."""
    live, parts = fsdp_live(
        model,
        plan,
        dense_layers=dense_layers,
        moe_layers=moe_layers,
        embed=embed,
        head=head,
        in_flight_microbatches=in_flight_microbatches,
        compiled=compiled,
        microbatches=microbatches,
    )
    weights, grads, optimizer, activations, logits = parts
    return StageMemory(
        weights, grads, optimizer, activations, logits, RUNTIME_GIB * GIB + (reserved_ratio - 1.0) * live
    )


def fsdp_live(
    model: ModelSpec,
    plan: PlanConfig,
    *,
    dense_layers: int,
    embed: bool,
    head: bool,
    in_flight_microbatches: float,
    moe_layers: int = 0,
    compiled: bool = False,
    microbatches: int = 1,
) -> tuple[float, tuple[float, float, float, float, float]]:
    """Live-tensor peak (what torch's memory tracker counts) and its parts at that moment:
    (weights, grads, optimizer, activations, logits). ``microbatches`` per step matters only on the
    last pipeline stage (its outputs are kept until the step ends)."""
    dense_p, expert_p = stage_params(model, plan, dense_layers, moe_layers, embed, head)
    params = dense_p + expert_p
    n_layers = max(1, dense_layers + moe_layers)
    block = (params - _embed_head_params(model, plan, embed, head)) / n_layers
    shard = plan.dp * plan.cp if plan.zero >= 2 else 1  # zero=0: replicate (DDP), nothing sharded
    # bf16 unsharded copies even under Float8: torchtitan's ``enable_fsdp_float8_all_gather`` is off by
    # default (the fp8 casts then happen per GEMM, after the all-gather).
    unshard_b = 2.0
    sharded = PARAM_B * params / shard
    moments = MOMENTS_B * params / shard
    grads_sharded = GRAD_B * params / shard
    if plan.pp > 1:
        # Stage stays unsharded across micro-batches; gradients accumulate unsharded in fp32.
        resident_w, resident_g = unshard_b * params, GRAD_B * params
        at_loss_w, bwd_w = resident_w, resident_w
    elif plan.zero == 2 or shard == 1:
        resident_w, resident_g = (unshard_b * params if shard > 1 else 0.0), 0.0
        at_loss_w, bwd_w = resident_w, resident_w + PARAM_B * block  # + one block's fp32 reduce-scatter input
    else:
        resident_w, resident_g = 0.0, 0.0
        at_loss_w = unshard_b * block  # the last block is not resharded after forward
        bwd_w = 2 * unshard_b * block + PARAM_B * block  # running + prefetched, fp32 reduce-scatter input
    tokens = plan.micro_batch * model.seq / plan.cp
    kept, rebuilt = layer_bytes_per_token(model, plan, compiled)
    # Under TP with sequence parallelism the attention and MLP inputs are all-gathered to the full sequence
    # before their matmuls, which keep them for the weight gradient: 2 x 2h per token, not split by TP.
    gathered = 4.0 * model.hidden * (1.0 - 1.0 / plan.tp)
    no_rc = plan.recompute == "none"
    acts = in_flight_microbatches * n_layers * (kept + (gathered * plan.tp if no_rc else 0.0)) * tokens / plan.tp
    head_acts = HEAD_ACT_H * model.hidden * tokens / plan.tp if head else 0.0
    at_loss_b, kept_b, merge_b = loss_bytes_per_logit(plan, microbatches)
    local_logits = tokens * model.vocab / plan.tp if head else 0.0
    logits, kept_preds, merged = at_loss_b * local_logits, kept_b * local_logits, merge_b * local_logits
    states = sharded + moments
    # Early backward: only the head's and embedding's gradients are reduced yet (the blocks' follow).
    early_g = max(resident_g, GRAD_B * _embed_head_params(model, plan, embed, head) / shard)
    rebuilt_b = (rebuilt / plan.tp + (0.0 if no_rc else gathered)) * tokens
    # Ring attention's gathered K/V (repeated to the query width) and fp32 accumulators of the layer whose
    # backward runs (ring.exchanged_bytes); zero without CP.
    q_elems = tokens * model.q_width / plan.tp
    rebuilt_b += exchanged_bytes(framework="torchtitan", cp=plan.cp, q_elems=q_elems, kv_elems=q_elems)
    at_loss = states + resident_g + at_loss_w + acts + head_acts + logits + kept_preds
    in_bwd = states + early_g + bwd_w + acts + head_acts + rebuilt_b + kept_preds
    at_merge = states + grads_sharded + merged
    # Optimizer step: every gradient, plus foreach AdamW's one temporary the size of the shard (sqrt(v)).
    at_step = states + max(resident_g, grads_sharded) + resident_w + ADAM_TEMP_B * params / shard
    peak = max(at_loss, in_bwd, at_merge, at_step)
    if peak == at_loss:
        return at_loss, (sharded + at_loss_w, resident_g, moments, acts + head_acts, logits + kept_preds)
    if peak == in_bwd:
        return in_bwd, (sharded + bwd_w, early_g, moments, acts + head_acts + rebuilt_b, kept_preds)
    if peak == at_merge:
        return at_merge, (sharded, grads_sharded, moments, 0.0, merged)
    return at_step, (
        sharded + resident_w,
        max(resident_g, grads_sharded),
        moments + ADAM_TEMP_B * params / shard,
        0.0,
        0.0,
    )


def loss_bytes_per_logit(plan: PlanConfig, microbatches: int = 1) -> tuple[float, float, float]:
    """Bytes per local logit (token x vocabulary entry / TP) of one micro-batch on the rank holding the
    head: (the loss's own peak, the pipeline schedule's kept outputs alongside it, the kept outputs and
    their merged copy at the end of the step). The loss peak is 12 B (fused cross-entropy, TP = 1) or 16 B
    (loss parallel's backward, TP > 1); with PP every micro-batch's fp32 output is kept (4 B each, the
    running one's included: the schedule holds it, so torchtitan's ``del pred`` frees nothing) and the
    merge doubles them. ``losscheck`` measures all three by running torch's code."""
    at_loss = LOSS_PARALLEL_BWD_B if plan.tp > 1 else LOGITS_B
    if plan.pp == 1:
        return at_loss, 0.0, 0.0
    return at_loss, PRED_B * microbatches, 2.0 * PRED_B * microbatches


def _embed_head_params(model: ModelSpec, plan: PlanConfig, embed: bool, head: bool) -> float:
    vh = model.vocab * model.hidden / plan.tp
    return (vh if embed else 0.0) + (vh if head and (not model.tied_embeddings or plan.pp > 1) else 0.0)
