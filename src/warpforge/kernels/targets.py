"""What a compile target allows one kernel, by compute capability: the one table templates' constraints read.

A template's ``constraints(params, shape)`` is judged for one target. The harness adds the target's limits to every
shape it passes (``constraint_shape``) under the keys below, so a template reads ``shape[SMEM_BYTES]`` and never
writes a GPU's number itself; the evaluator refuses a compiled kernel over the same limit (run/stages.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The shape keys a constraint shape carries with the target's limits.
SMEM_BYTES = "SMEM_BYTES"
REGISTERS_PER_SM = "REGISTERS_PER_SM"
DEFAULT_TARGET = "sm_90"


@dataclass(frozen=True)
class TargetLimits:
    """One compute capability's per-block shared memory and per-SM register file (CUDA programming guide,
    "Technical Specifications per Compute Capability")."""

    shared_bytes: int  # largest dynamic shared memory one block may opt in to
    registers_per_sm: int = 65536  # 32-bit registers per SM (64K on every capability below)


# Per block: sm_70/72 96 KiB; sm_75 64 KiB; sm_80/87 163 KiB; sm_86/89/120/121 99 KiB; sm_90 and the
# Blackwell datacenter parts (100/101/103/110) 227 KiB.
LIMITS: dict[int, TargetLimits] = {
    70: TargetLimits(98304),
    72: TargetLimits(98304),
    75: TargetLimits(65536),
    80: TargetLimits(166912),
    86: TargetLimits(101376),
    87: TargetLimits(166912),
    89: TargetLimits(101376),
    90: TargetLimits(232448),
    100: TargetLimits(232448),
    101: TargetLimits(232448),
    103: TargetLimits(232448),
    110: TargetLimits(232448),
    120: TargetLimits(101376),
    121: TargetLimits(101376),
}


def capability(target: str) -> int:
    """``sm_90`` / ``sm_90a`` / ``90`` -> 90."""
    digits = "".join(ch for ch in target if ch.isdigit())
    if not digits:
        raise ValueError(f"not a compile target: {target!r} (expected e.g. sm_90)")
    return int(digits)


def limits(target: str = DEFAULT_TARGET) -> TargetLimits:
    """The limits of ``target``; a capability not in the table is refused, never guessed."""
    arch = capability(target)
    if arch not in LIMITS:
        known = ", ".join(f"sm_{a}" for a in sorted(LIMITS))
        raise ValueError(f"no shared-memory table for sm_{arch} (known: {known})")
    return LIMITS[arch]


def constraint_shape(shape: dict[str, Any], target: str = DEFAULT_TARGET) -> dict[str, Any]:
    """``shape`` as a template's ``constraints`` sees it when judged for ``target``: the target's limits added."""
    lim = limits(target)
    return {**shape, SMEM_BYTES: lim.shared_bytes, REGISTERS_PER_SM: lim.registers_per_sm}
