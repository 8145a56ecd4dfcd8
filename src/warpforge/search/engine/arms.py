"""One arm of a task's search: a variant, its Optuna study (through :class:`Strategy`) and its counters.

The allocator (search/engine/allocators.py) balances arms by ``load``; the campaign stores each arm's variant
with its lineage (:func:`ensure_variant`) and names its study with :func:`study_name`.

Example::

    >>> study_name("c1", "softmax", variant)            # doctest: +SKIP
    'c1:softmax:online:3f2a9c0d1e4b'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from warpforge.agent.proposers import Origin
from warpforge.db import store
from warpforge.kernels.variant import Variant
from warpforge.search.engine.rounds import ArmStats
from warpforge.search.engine.summary import VariantSummary
from warpforge.search.samplers.strategy import Strategy


@dataclass
class Arm:
    """A variant searched in its own study; ``inflight`` evaluations asked and not yet told."""

    variant: Variant
    record_id: int
    strategy: Strategy
    summary: VariantSummary
    study_name: str
    origin: Origin = Origin("template", "template")
    stats: ArmStats = field(default_factory=ArmStats)
    exhausted: bool = False
    inflight: int = 0

    @property
    def load(self) -> int:  # what the allocator balances: evaluations told + in flight
        return self.strategy.n_told + self.inflight

    @property
    def best_ms(self) -> float | None:
        best = self.strategy.best
        return None if best is None else best[1]


def study_name(campaign: str, task: str, variant: Variant) -> str:
    """The arm's Optuna study: ``{campaign}:{task}:{variant}:{source hash[:12]}`` (a resume finds it by name)."""
    return f"{campaign}:{task}:{variant.name}:{variant.source_hash[:12]}"


def ensure_variant(s: Any, variant: Variant, origin: Origin) -> store.VariantRecord:
    """Store the variant with its lineage (origin kind, proposer, parents, proposal id, rationale)."""
    return store.ensure_variant(
        s,
        variant,
        origin=origin.kind,
        proposer=origin.proposer,
        parents=origin.parents,
        proposal_id=origin.proposal_id,
        rationale=origin.rationale,
    )
