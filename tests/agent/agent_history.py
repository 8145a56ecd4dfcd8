"""Hand-made campaign histories for the agent tests (what the campaign would hand a proposer)."""

from __future__ import annotations

from warpforge.agent.proposers import FailureNote, History, Origin, VariantHistory
from warpforge.kernels.variant import Variant, builtin_variants


def template_history(task: str, round: int = 1, gpu: str | None = "NVIDIA H200") -> History:
    """The task's templates: the first measured fastest (with a failure and resources), the rest slower."""
    variants: list[VariantHistory] = []
    for i, v in enumerate(builtin_variants(task)):
        variants.append(
            entry(
                v,
                best_ms=0.1 * (i + 1),
                roofline=60.0 - 10 * i,
                failures=(
                    FailureNote(
                        "incorrect",
                        "mismatch",
                        "max abs error 0.5 at shape {'M': 13, 'N': 67}\nsecond line",
                        {"num_warps": 32},
                    ),
                )
                if i == 0
                else (),
            )
        )
    return History(task, "cuda", gpu, round, 3 * len(variants), 40, tuple(variants))


def entry(
    variant: Variant,
    best_ms: float | None = 0.1,
    roofline: float | None = 50.0,
    failures: tuple[FailureNote, ...] = (),
    ok: int = 3,
) -> VariantHistory:
    params = {k: vals[0] for k, vals in variant.space.items()}
    return VariantHistory(
        variant=variant,
        origin=Origin("template", "template"),
        evaluated=ok + len(failures),
        verdicts={"ok": ok, **({"incorrect": len(failures)} if failures else {})},
        failures=failures,
        best_ms=best_ms,
        best_params=params if best_ms is not None else None,
        best_speedup=1.5 if best_ms is not None else None,
        roofline_pct=roofline,
        resources={"registers": 168, "spill_bytes": 64, "shared_bytes": 0} if best_ms is not None else None,
        shapes=(
            {
                "shape": {"M": 4096, "N": 4096},
                "dtype": "float16",
                "p50_ms": best_ms,
                "speedup": 1.5,
                "roofline_pct": roofline,
            },
        )
        if best_ms is not None
        else (),
    )
