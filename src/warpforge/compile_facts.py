"""What ``results`` and ``best`` read of the stored compile facts, and the static ranking they show.

Every evaluation that reached ahead-of-time compilation stores, per kernel and compiled shape, its registers,
spilled bytes and shared memory for the target GPU (``result["resources"]``). On a machine without a GPU these
are the only facts that tell configurations apart, so ``best`` ranks the configurations verified ``ok`` by
them with :func:`warpforge.compile_facts.static_rank` (the ranking ``export --allow-untimed`` uses):
a static ranking, never a time. Two small reads live here, beside the read layer (db/queries.py) rather than
in it: the facts of many evaluations in one query (``Reader.evaluation`` is three queries per row), and the
task names a database holds (to tell an unknown task from one with no results).

The facts come from ahead-of-time compilation for a target GPU (``evaluator.run.stages.compile_stage``).
The ranking orders configurations by what the compiler says, never by
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
from collections.abc import Iterable, Mapping, Sequence
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


def occupancy(
    registers: int | None, num_warps: int | None, shared_bytes: int | None, target: str | None
) -> float | None:
    """Fraction of the SM's warp slots one kernel can fill (0-1), from its registers per thread, warps per
    block and shared memory per block; None when a fact or the target's limits are unknown.

    Registers are allocated per warp in units of 256 (per thread: rounded up to a multiple of 8).
    """
    arch = arch_of(target)
    limits = SM_LIMITS.get(arch) if arch is not None else None
    if limits is None or registers is None or not num_warps or shared_bytes is None:
        return None
    per_warp = math.ceil(max(registers, 1) * 32 / 256) * 256
    blocks = min(
        limits.max_blocks,
        limits.max_warps // num_warps,
        (limits.registers // per_warp) // num_warps,
        limits.shared_bytes // (shared_bytes + limits.reserved_shared),
    )
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

    occ = [occupancy(k.get("registers"), k.get("num_warps"), k.get("shared_bytes"), k.get("target")) for k in kernels]
    return {
        "spill_bytes": worst([k.get("spill_bytes") for k in kernels], max),
        "registers": worst([k.get("registers") for k in kernels], max),
        "shared_bytes": worst([k.get("shared_bytes") for k in kernels], max),
        "occupancy": worst(occ, min),
    }


def static_columns(resources: Any) -> dict[str, Any]:
    """The ``wf_evaluations`` static columns of a result's resources: its first kernel's target and the worst
    facts, by which SQL orders the static ranking as :func:`static_rank` does (all None without facts)."""
    kernels = kernel_facts(resources)
    worst = (
        worst_facts(kernels) if kernels else dict.fromkeys(("spill_bytes", "occupancy", "registers", "shared_bytes"))
    )
    return {
        "static_target": str(kernels[0].get("target")) if kernels else None,
        "static_spill": worst["spill_bytes"],
        "static_occupancy": worst["occupancy"],
        "static_registers": worst["registers"],
        "static_shared": worst["shared_bytes"],
    }


def static_rank(resources: Any) -> tuple[float, float, float, float]:
    """Sort key from a resource report (per-kernel dicts, as a list or by kernel name): spills, then occupancy
    (higher first), then registers, then shared memory, each the worst over the kernels. Lower sorts first.

    Unknown facts rank last (``inf``): a configuration whose compile report is missing is never preferred
    over one known not to spill.
    """
    worst = worst_facts(resources)
    return worst_key(worst["spill_bytes"], worst["occupancy"], worst["registers"], worst["shared_bytes"])


def worst_key(
    spill: float | None, occupancy: float | None, registers: float | None, shared: float | None
) -> tuple[float, float, float, float]:
    """:func:`static_rank`'s key from the worst facts themselves (as the stored static columns hold them)."""

    def known(value: float | None) -> float:
        return math.inf if value is None else value

    return known(spill), math.inf if occupancy is None else -occupancy, known(registers), known(shared)


CHUNK = 500  # ids per IN (...) query: well under SQLite's 32,766 bound parameters


def _shape_key(shape: Mapping[str, Any] | None) -> str | None:
    return ",".join(f"{k}={v}" for k, v in shape.items()) if shape else None


def load_facts(reader: Any, ids: Iterable[int]) -> dict[int, list[dict[str, Any]]]:
    """Evaluation id -> its per-kernel, per-shape compile facts (``[]`` when none were stored), each with its
    occupancy on the target (None when not computable, e.g. results stored before ``num_warps`` was)."""
    wanted = sorted(set(ids))
    found: dict[int, list[dict[str, Any]]] = {i: [] for i in wanted}
    for start in range(0, len(wanted), CHUNK):
        for id_, result in reader.stored_results(wanted[start : start + CHUNK]).items():
            found[id_] = [
                {
                    "kernel": k.get("kernel"),
                    "target": k.get("target"),
                    "shape": _shape_key(k.get("shape")),
                    "dtype": k.get("dtype"),
                    "registers": k.get("registers"),
                    "spill_bytes": k.get("spill_bytes"),
                    "shared_bytes": k.get("shared_bytes"),
                    "num_warps": k.get("num_warps"),
                    "occupancy": occupancy(
                        k.get("registers"), k.get("num_warps"), k.get("shared_bytes"), k.get("target")
                    ),
                }
                for k in (result or {}).get("resources") or []
            ]
    return found


def stored_tasks(reader: Any) -> list[str]:
    """Names of the tasks the database holds anything for (evaluations or decisions)."""
    return list(reader.stored_task_names())


@dataclass(frozen=True)
class Ranked:
    """One configuration verified ``ok``, placed by its compile facts for one target (never timed here)."""

    rank: int
    target: str
    evaluation_id: int
    campaign: str | None
    variant: str
    variant_hash: str
    params: Mapping[str, Any]
    worst: Mapping[str, float | None]  # over kernels and shapes: spill_bytes, registers, shared_bytes, occupancy
    facts: tuple[Mapping[str, Any], ...]  # per kernel and compiled shape

    def to_json(self) -> dict[str, Any]:
        return {
            "static_rank": self.rank,
            "target": self.target,
            "evaluation_id": self.evaluation_id,
            "campaign": self.campaign,
            "variant": self.variant,
            "variant_hash": self.variant_hash[:12],
            "params": dict(self.params),
            "worst": dict(self.worst),
            "resources": [dict(f) for f in self.facts],
            "timing_source": "static (compile facts; not a time)",
        }


@dataclass(frozen=True)
class TargetRanking:
    """One target's static ranking: its first rows (all, or as many as asked) and how many it ranks."""

    target: str
    rows: tuple[Ranked, ...]  # best first
    total: int  # configurations ranked for this target (unknown facts included, last)


def static_ranking(
    reader: Any, task: str, campaign: str | None = None, limit: int | None = None, variant_hash: str | None = None
) -> dict[str, TargetRanking]:
    """Target -> the task's distinct configurations verified ``ok``, best compile facts first (ties: the
    earliest evaluation), the first ``limit`` of them (every one without a limit). Each (source, parameters)
    counts once, with its newest search evaluation's facts; targets are ranked apart, as GPUs are, and a
    configuration stored without compile facts ranks last in every target. ``variant_hash``: only that
    variant's rows, each keeping its rank among all.

    The rows, their order and their counts come from summaries the database keeps as evaluations are stored
    (``wf_static_configs``, ``wf_static_counts``: ``Reader.static_counts``/``static_top``), so a request walks
    an index to the rows it returns and reads only their result documents, where a per-request GROUP BY over
    every ok evaluation took 0.4-0.8 s at 100,000 CPU evaluations of one task under load (reading every
    document, 48 s; benchmarks/dashboard_routes.py); a variant's row is placed by counting the rows before it."""
    # A row stored without facts (target None) ranks last in every target, after the target's own rows.
    counts = reader.static_counts(task, campaign)
    unknown = counts.pop(None, 0)
    targets: list[str | None] = sorted(t for t in counts if t is not None) or [None]
    placed: dict[str, list[tuple[int, int]]] = {}  # target -> (rank, id) of the rows to return
    totals: dict[str, int] = {}
    for target in targets:
        name = target if target is not None else "unknown target"
        totals[name] = counts.get(target, 0) + unknown
        rows = reader.static_top(task, target, campaign, limit=limit, variant_hash=variant_hash)
        if variant_hash is None:  # the first rows: ranks 1, 2, ...
            placed[name] = [(rank, i) for rank, (i, _) in enumerate(rows, 1)]
        else:  # one variant's rows keep their rank among all
            placed[name] = _variant_ranks(reader, task, target, campaign, rows)
    ids = [i for chosen in placed.values() for _, i in chosen]
    rows, facts = reader.evaluation_rows(ids), load_facts(reader, ids)
    ranking = {
        target: TargetRanking(
            target,
            tuple(
                Ranked(
                    rank,
                    target,
                    i,
                    rows[i].campaign,
                    rows[i].variant_name,
                    rows[i].variant_hash,
                    dict(rows[i].params),
                    worst_facts(facts.get(i) or []),
                    tuple(facts.get(i) or ()),
                )
                for rank, i in chosen
            ),
            totals[target],
        )
        for target, chosen in placed.items()
    }
    # Nothing verified ok: no target at all (an empty "unknown target" made best print an empty table, exit
    # 0 with --static, and offer to export "the first").
    return {target: r for target, r in ranking.items() if r.rows}


def _variant_ranks(
    reader: Any, task: str, target: str | None, campaign: str | None, rows: list[tuple[int, tuple[Any, ...]]]
) -> list[tuple[int, int]]:
    """(rank among all the target's rows, id) of a variant's ``rows``: a page's one row (or a few) by counting
    the rows before each in SQL; more by placing them in the whole order, read once."""
    if len(rows) <= 3:
        return [(reader.rank_of(task, target, key, campaign), i) for i, key in rows]
    order = {i: rank for rank, (i, _) in enumerate(reader.static_top(task, target, campaign, limit=None), 1)}
    return [(order[i], i) for i, _ in rows]


def facts_cells(worst: Mapping[str, float | None]) -> tuple[str, str, str, str]:
    """Table cells (registers, spill B, shared B, occupancy) of a worst-case summary; ``?`` where unknown."""

    def num(key: str) -> str:
        value = worst.get(key)
        return "?" if value is None else f"{value:.0f}"

    occ = worst.get("occupancy")
    return num("registers"), num("spill_bytes"), num("shared_bytes"), "?" if occ is None else f"{occ:.0%}"
