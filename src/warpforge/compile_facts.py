"""What ``results`` and ``best`` read of the stored compile facts, and the static ranking they show.

Every evaluation that reached ahead-of-time compilation stores, per kernel and compiled shape, its registers,
spilled bytes and shared memory for the target GPU (``result["resources"]``). On a machine without a GPU these
are the only facts that tell configurations apart, so ``best`` ranks the configurations verified ``ok`` by
them with :func:`warpforge.evaluator.resources.static_rank` (the ranking ``export --allow-untimed`` uses):
a static ranking, never a time. Two small reads live here, beside the read layer (db/queries.py) rather than
in it: the facts of many evaluations in one query (``Reader.evaluation`` is three queries per row), and the
task names a database holds (to tell an unknown task from one with no results).

Example::

    >>> from warpforge.db.queries import Reader                                     # doctest: +SKIP
    >>> ranking = static_ranking(Reader("sqlite:///wf.db"), "rmsnorm")              # doctest: +SKIP
    >>> [(r.rank, r.variant, r.worst["occupancy"]) for r in ranking["sm_90"][:2]]   # doctest: +SKIP
    [(1, 'single_pass', 1.0), (2, 'looped', 1.0)]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from warpforge.evaluator.resources import occupancy, static_rank, worst_facts

CHUNK = 500  # ids per IN (...) query: well under SQLite's 32,766 bound parameters


def _shape_key(shape: Mapping[str, Any] | None) -> str | None:
    return ",".join(f"{k}={v}" for k, v in shape.items()) if shape else None


def load_facts(reader: Any, ids: Iterable[int]) -> dict[int, list[dict[str, Any]]]:
    """Evaluation id -> its per-kernel, per-shape compile facts (``[]`` when none were stored), each with its
    occupancy on the target (None when not computable, e.g. results stored before ``num_warps`` was)."""
    wanted = sorted(set(ids))
    found: dict[int, list[dict[str, Any]]] = {i: [] for i in wanted}
    for start in range(0, len(wanted), CHUNK):
        for id_, result in reader.stored_results(wanted[start:start + CHUNK]).items():
            found[id_] = [{"kernel": k.get("kernel"), "target": k.get("target"), "shape": _shape_key(k.get("shape")),
                           "dtype": k.get("dtype"), "registers": k.get("registers"),
                           "spill_bytes": k.get("spill_bytes"), "shared_bytes": k.get("shared_bytes"),
                           "num_warps": k.get("num_warps"),
                           "occupancy": occupancy(k.get("registers"), k.get("num_warps"), k.get("shared_bytes"),
                                                  k.get("target"))}
                          for k in (result or {}).get("resources") or []]
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
        return {"static_rank": self.rank, "target": self.target, "evaluation_id": self.evaluation_id,
                "campaign": self.campaign, "variant": self.variant, "variant_hash": self.variant_hash[:12],
                "params": dict(self.params), "worst": dict(self.worst), "resources": [dict(f) for f in self.facts],
                "timing_source": "static (compile facts; not a time)"}


def static_ranking(reader: Any, task: str, campaign: str | None = None) -> dict[str, list[Ranked]]:
    """Target -> the task's distinct configurations verified ``ok``, best compile facts first (ties: the
    earliest evaluation). Each (source, parameters) counts once, with its newest evaluation's facts; targets
    are ranked apart, as GPUs are."""
    newest: dict[tuple[str, str], Any] = {}
    for row in reader.iter_evaluations(task=task, campaign=campaign, final=False):  # newest first
        if row.verdict == "ok":
            newest.setdefault((row.variant_hash, json.dumps(dict(row.params), sort_keys=True)), row)
    facts = load_facts(reader, [r.id for r in newest.values()])
    by_target: dict[str, list[tuple[tuple[float, ...], int, Any]]] = {}
    unknown = []  # stored without compile facts: last in every target's ranking (unknown facts rank last)
    for row in newest.values():
        kernels = facts.get(row.id) or []
        if kernels:
            by_target.setdefault(str(kernels[0].get("target")), []).append((static_rank(kernels), row.id, row))
        else:
            unknown.append((static_rank(kernels), row.id, row))
    for entries in by_target.values() if by_target else [by_target.setdefault("unknown target", [])]:
        entries.extend(unknown)
    ranking: dict[str, list[Ranked]] = {}
    for target, entries in sorted(by_target.items()):
        entries.sort(key=lambda e: (e[0], e[1]))
        ranking[target] = [Ranked(i + 1, target, row.id, row.campaign, row.variant_name, row.variant_hash,
                                  dict(row.params), worst_facts(facts.get(row.id) or []),
                                  tuple(facts.get(row.id) or ()))
                           for i, (_, _, row) in enumerate(entries)]
    # Nothing verified ok: no target at all (an empty "unknown target" made best print an empty table, exit
    # 0 with --static, and offer to export "the first", issue 31).
    return {target: rows for target, rows in ranking.items() if rows}


def facts_cells(worst: Mapping[str, float | None]) -> tuple[str, str, str, str]:
    """Table cells (registers, spill B, shared B, occupancy) of a worst-case summary; ``?`` where unknown."""
    def num(key: str) -> str:
        value = worst.get(key)
        return "?" if value is None else f"{value:.0f}"

    occ = worst.get("occupancy")
    return num("registers"), num("spill_bytes"), num("shared_bytes"), "?" if occ is None else f"{occ:.0%}"

