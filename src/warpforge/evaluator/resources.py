"""Compile facts of a configuration (registers, spills, shared memory per kernel and shape) and the one static
ranking built on them, used by ``export --allow-untimed`` and by ``results``/``best`` on a CPU campaign.

The facts come from ahead-of-time compilation for a target GPU (evaluator/stages.compile_stage, stored in the
evaluation's ``result["resources"]``). The ranking orders configurations by what the compiler says, never by
a time: fewest spilled bytes, then the highest occupancy the registers, warps and shared memory allow on the
target, then fewest registers, then least shared memory. Unknown facts rank last. Standard library only.

Example::

    >>> facts = [{"kernel": "k", "target": "sm_90", "registers": 94, "spill_bytes": 0, "shared_bytes": 16,
    ...           "num_warps": 4}]
    >>> occupancy(94, 4, 16, "sm_90")   # 96 registers x 32 threads: 21 warps fit, 5 blocks of 4 warps
    0.3125
    >>> static_rank(facts)
    (0.0, -0.3125, 94.0, 16.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SmLimits:
    """Per-SM limits of one compute capability (CUDA C Programming Guide, table of technical specifications)."""

    max_warps: int
    max_blocks: int
    shared_bytes: int  # shared memory per SM available to blocks
    registers: int = 65536
    reserved_shared: int = 1024  # per block, reserved by the system since sm_80


# sm_80 (A100) and sm_90 (H100/H200) keep 64 warps per SM; sm_86/89 (consumer Ampere/Ada) 48; shared memory
# per SM 164 KiB (sm_80), 228 KiB (sm_90), 100 KiB (sm_86/89).
SM_LIMITS: dict[int, SmLimits] = {
    75: SmLimits(32, 16, 65536, reserved_shared=0),
    80: SmLimits(64, 32, 167936),
    86: SmLimits(48, 16, 102400),
    89: SmLimits(48, 24, 102400),
    90: SmLimits(64, 32, 233472),
    100: SmLimits(64, 32, 233472),
    120: SmLimits(48, 32, 102400),
}


def arch_of(target: str | None) -> int | None:
    """``"sm_90"`` or ``"cuda:90"`` -> 90; None when it names no compute capability."""
    digits = "".join(ch for ch in str(target or "") if ch.isdigit())
    return int(digits) if digits else None


def occupancy(registers: int | None, num_warps: int | None, shared_bytes: int | None,
              target: str | None) -> float | None:
    """Fraction of the SM's warp slots one kernel can fill (0-1), from its registers per thread, warps per
    block and shared memory per block; None when a fact or the target's limits are unknown.

    Registers are allocated per warp in units of 256 (per thread: rounded up to a multiple of 8).
    """
    arch = arch_of(target)
    limits = SM_LIMITS.get(arch) if arch is not None else None
    if limits is None or registers is None or not num_warps or shared_bytes is None:
        return None
    per_warp = math.ceil(max(registers, 1) * 32 / 256) * 256
    blocks = min(limits.max_blocks, limits.max_warps // num_warps, (limits.registers // per_warp) // num_warps,
                 limits.shared_bytes // (shared_bytes + limits.reserved_shared))
    return max(blocks, 0) * num_warps / limits.max_warps


def kernel_facts(resources: Any) -> list[Mapping[str, Any]]:
    """The per-kernel reports, from a stored list or a mapping by kernel name (the read layer's form)."""
    return list(resources.values() if isinstance(resources, Mapping) else resources or [])


def worst_facts(resources: Any) -> dict[str, float | None]:
    """The worst value of each fact over every kernel and shape: most spills, registers and shared memory,
    lowest occupancy (None where a kernel's fact is unknown)."""
    kernels = kernel_facts(resources)

    def worst(values: Sequence[Any], pick: Any) -> float | None:
        return None if not values or any(v is None for v in values) else float(pick(values))

    occ = [occupancy(k.get("registers"), k.get("num_warps"), k.get("shared_bytes"), k.get("target"))
           for k in kernels]
    return {"spill_bytes": worst([k.get("spill_bytes") for k in kernels], max),
            "registers": worst([k.get("registers") for k in kernels], max),
            "shared_bytes": worst([k.get("shared_bytes") for k in kernels], max),
            "occupancy": worst(occ, min)}


def static_rank(resources: Any) -> tuple[float, float, float, float]:
    """Sort key from a resource report (per-kernel dicts, as a list or by kernel name): spills, then occupancy
    (higher first), then registers, then shared memory, each the worst over the kernels. Lower sorts first.

    Unknown facts rank last (``inf``): a configuration whose compile report is missing is never preferred
    over one known not to spill.
    """
    worst = worst_facts(resources)

    def known(value: float | None) -> float:
        return math.inf if value is None else value

    occ = worst["occupancy"]
    return (known(worst["spill_bytes"]), math.inf if occ is None else -occ, known(worst["registers"]),
            known(worst["shared_bytes"]))
