"""What each training framework can run: the plan options a search may use with ``--framework``.

* ``megatron`` (Megatron-LM / Megatron-Core): TP, SP, CP, PP with interleaving and uneven stages, EP with
  expert TP (MoE parallel folding), distributed optimizer (ZeRO-1) and Megatron-FSDP (ZeRO-2/3), FP8
  through Transformer Engine.
* ``torchtitan`` (PyTorch FSDP2 + DTensor): TP, CP, PP (1F1B / Interleaved1F1B), EP, FP8 (float8
  training); FSDP2 shards weights always, so ZeRO-0 (replicate), ZeRO-2 (``reshard_after_forward`` never)
  and ZeRO-3; there is no ZeRO-1. Expert TP is the dense TP.
* ``deepspeed`` (DeepSpeed / Megatron-DeepSpeed): ZeRO 0-3, but pipeline parallelism only with ZeRO 0-1;
  no context parallelism (Ulysses is a different scheme) and no interleaved schedule; FP8 is not part of
  its training engine, so BF16 only.
* ``any``: everything the simulator models.

Example::

    >>> FRAMEWORKS["deepspeed"].zeros(pp=4), FRAMEWORKS["deepspeed"].zeros(pp=1)
    ((0, 1), (0, 1, 2, 3))
"""

from __future__ import annotations

from dataclasses import dataclass

from warpforge.parallel.specs import PlanConfig


@dataclass(frozen=True)
class Framework:
    name: str
    cp: bool = True
    interleave: bool = True
    expert_tp: bool = True  # expert TP set apart from dense TP (MoE folding)
    zero_stages: tuple[int, ...] = (0, 1, 2, 3)
    zero_with_pp: tuple[int, ...] = (0, 1, 2, 3)
    precisions: tuple[str, ...] = ("bf16", "fp8")

    def zeros(self, pp: int) -> tuple[int, ...]:
        return self.zero_stages if pp == 1 else tuple(z for z in self.zero_stages if z in self.zero_with_pp)

    def why_not(self, plan: PlanConfig) -> str:
        """Empty when the framework runs ``plan``, else the reason it does not."""
        if plan.cp > 1 and not self.cp:
            return f"{self.name} has no context parallelism"
        if plan.interleave > 1 and not self.interleave:
            return f"{self.name} has no interleaved pipeline schedule"
        if plan.zero not in self.zeros(plan.pp):
            return f"{self.name} does not run ZeRO-{plan.zero}" + (
                " with pipeline parallelism" if plan.pp > 1 and plan.zero in self.zero_stages else ""
            )
        if plan.ep > 1 and plan.etp != plan.tp and not self.expert_tp:
            return f"{self.name} has no expert TP apart from TP"
        if plan.precision not in self.precisions:
            return f"{self.name} does not train in {plan.precision}"
        return ""


FRAMEWORKS: dict[str, Framework] = {
    "any": Framework("any"),
    "megatron": Framework("megatron"),
    "torchtitan": Framework("torchtitan", expert_tp=False, zero_stages=(0, 2, 3)),
    "deepspeed": Framework(
        "deepspeed", cp=False, interleave=False, expert_tp=False, zero_with_pp=(0, 1), precisions=("bf16",)
    ),
}


def framework_for_plan(name: str) -> str:
    """The memory accounting a plan gets for ``--framework name``: ``any`` keeps Megatron's (the default);
    a plan the framework cannot run is refused by ``Framework.why_not`` in search, checked in predict."""
    if name not in FRAMEWORKS:
        raise ValueError(f"unknown framework '{name}'; use one of {', '.join(FRAMEWORKS)}")
    return "megatron" if name == "any" else name
