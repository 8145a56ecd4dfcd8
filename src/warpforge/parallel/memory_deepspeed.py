"""Per-GPU memory as DeepSpeed (ZeRO 0-3, Megatron-DeepSpeed) keeps it resident.

The states follow Megatron's accounting (``memory.py``: bf16 weights, fp32 gradients for accumulation,
fp32 master weights and Adam moments, sharded by ZeRO stage), and DeepSpeed adds its communication
buffers, sized by its config defaults (DeepSpeed configuration JSON docs, "ZeRO optimizations"):

* ZeRO 1/2: ``reduce_bucket_size`` and ``allgather_bucket_size`` default to 5e8 elements each; in bf16
  that is 2 x 5e8 x 2 B = 2 GB of flat buffers, capped by the stage's own parameters.
* ZeRO 3: parameters are gathered on demand, at most ``stage3_max_live_parameters`` (1e9) alive, plus the
  ``stage3_prefetch_bucket_size`` (5e7) in flight: min(stage params, 1e9 + 5e7) x 2 B unsharded, replacing
  the FSDP "two layers in flight" of ``memory.py``.

Example::

    >>> from warpforge.parallel.memory import GIB
    >>> from warpforge.parallel.specs import load_model, PlanConfig
    >>> m = load_model("llama3-8b")
    >>> mem = deepspeed_stage_memory(m, PlanConfig(dp=8, zero=1, framework="deepspeed"), dense_layers=32,
    ...                              moe_layers=0, embed=True, head=True, in_flight_layers=32)
    >>> round(mem.overhead / GIB - stage_memory(m, PlanConfig(dp=8, zero=1), dense_layers=32, moe_layers=0,
    ...       embed=True, head=True, in_flight_layers=32).overhead / GIB, 2)
    1.86
"""

from __future__ import annotations

from warpforge.parallel.memory import WEIGHT_B, StageMemory, stage_memory, stage_params
from warpforge.parallel.specs import ModelSpec, PlanConfig

BUCKET_ELEMS = 5e8  # reduce_bucket_size and allgather_bucket_size defaults (elements)
LIVE_PARAMS = 1e9 + 5e7  # stage3_max_live_parameters + stage3_prefetch_bucket_size defaults


def deepspeed_stage_memory(
    model: ModelSpec,
    plan: PlanConfig,
    *,
    dense_layers: int,
    moe_layers: int,
    embed: bool,
    head: bool,
    in_flight_layers: float,
) -> StageMemory:
    """Megatron's accounting with DeepSpeed's buffers (see the module docstring)."""
    base = stage_memory(
        model,
        plan,
        dense_layers=dense_layers,
        moe_layers=moe_layers,
        embed=embed,
        head=head,
        in_flight_layers=in_flight_layers,
    )
    dense_p, expert_p = stage_params(model, plan, dense_layers, moe_layers, embed, head)
    params = dense_p + expert_p
    if plan.zero >= 3:
        # memory.py counted two layers gathered; DeepSpeed keeps up to LIVE_PARAMS gathered instead.
        n_layers = max(1, dense_layers + moe_layers)
        two_layers = 2 * WEIGHT_B * params / n_layers
        live = WEIGHT_B * min(params, LIVE_PARAMS)
        return StageMemory(
            base.weights - two_layers + live, base.grads, base.optimizer, base.activations, base.logits, base.overhead
        )
    buffers = 2 * WEIGHT_B * min(params, BUCKET_ELEMS) if plan.zero >= 1 else WEIGHT_B * min(params, BUCKET_ELEMS)
    return StageMemory(base.weights, base.grads, base.optimizer, base.activations, base.logits, base.overhead + buffers)
