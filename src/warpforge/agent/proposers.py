"""Proposers: where variants come from (one registry), called between rounds while the campaign measures.

Contract (docs/seams.md, "Proposers"): ``await proposer.propose(task, history)`` returns candidates
(a :class:`Variant` plus its :class:`Origin`: kind, proposer, parent source hashes, the proposer's own
id, rationale). The campaign awaits round 0 before its loop (it needs arms), then, while
``wants_more(history)`` says so, runs further rounds on a background asyncio loop, concurrently with
evaluation, and adds each returned candidate as a new arm mid-run. ``history`` is what the campaign
already holds in memory: per variant its verdict counts, its last failures (one line each), its best
measured time and parameters, speedup, %-of-roofline, resources and per-shape times.

Every proposer is built from its own configuration (``CampaignSpec.proposer_config``): the registry has
no special case for any name. User variant files (``--variant-file``) are not a proposer's business: the
campaign adds them as ``Origin(kind="user", proposer="user")``.

Example::

    >>> import asyncio
    >>> from warpforge.kernels.task import get_task
    >>> task = get_task("softmax")
    >>> proposer = get_proposer("template", {})
    >>> cands = asyncio.run(proposer.propose(task, History.empty(task.name, "interpret", budget_left=20)))
    >>> cands[0].origin.kind, proposer.wants_more(History.empty(task.name, "interpret", 20, round=1))
    ('template', False)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from warpforge.kernels.taskdef import Task
from warpforge.kernels.variant import Variant, builtin_variants, load_variant
from warpforge.registry import Registry


@dataclass(frozen=True)
class Origin:
    """Where a variant came from: what lineage is drawn from (stored with the variant)."""

    kind: str  # "template" | "llm" | "user"
    proposer: str  # registry name of the proposer that made it
    parents: tuple[str, ...] = ()  # source hashes of parent variants (lineage)
    proposal_id: str | None = None  # the proposer's own id for this proposal (e.g. the stored LLM call id)
    rationale: str = ""  # why (the LLM's rationale); "" for templates


@dataclass(frozen=True)
class Candidate:
    """A variant to search, with its origin."""

    variant: Variant
    origin: Origin


@dataclass(frozen=True)
class FailureNote:
    """One failed evaluation in one line: never raw dumps (a prompt must stay small)."""

    verdict: str
    reason: str
    message: str
    params: Mapping[str, Any]


@dataclass(frozen=True)
class VariantHistory:
    """What the campaign knows of one variant so far."""

    variant: Variant
    origin: Origin
    evaluated: int
    verdicts: Mapping[str, int]
    failures: tuple[FailureNote, ...]  # most recent first, at most 5
    best_ms: float | None  # measured objective (None: nothing measured)
    best_params: Mapping[str, Any] | None
    best_speedup: float | None
    roofline_pct: float | None
    resources: Mapping[str, Any] | None  # registers/spills/shared memory of the best or last compiled config
    shapes: tuple[Mapping[str, Any], ...]  # per-shape {shape, dtype, p50_ms, speedup, roofline_pct} of the best


@dataclass(frozen=True)
class History:
    """The campaign's state for one task, as a proposer sees it between rounds."""

    task: str
    backend: str
    gpu: str | None  # GPU the times come from; None when nothing is timed
    round: int  # 0 on the first call
    evaluations_done: int
    budget_left: int
    variants: tuple[VariantHistory, ...] = field(default_factory=tuple)

    @classmethod
    def empty(cls, task: str, backend: str, budget_left: int, round: int = 0) -> History:
        return cls(task, backend, None, round, 0, budget_left, ())

    def by_hash(self, source_hash: str) -> VariantHistory | None:
        return next((v for v in self.variants if v.variant.source_hash == source_hash), None)


class Proposer(ABC):
    """Produces candidates for a task, round after round; ``config`` is its own (``--proposer-config``)."""

    name: ClassVar[str] = ""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.config: dict[str, Any] = dict(config or {})

    @abstractmethod
    async def propose(self, task: Task, history: History) -> list[Candidate]: ...

    def wants_more(self, history: History) -> bool:
        """Called whenever new results arrived and no proposal is in flight; default: one round only."""
        return history.round == 0

    async def aclose(self) -> None:  # noqa: B027 - optional: most proposers hold nothing to release
        """Release clients or connections; the campaign calls it once at the end of each task."""


class TemplateProposer(Proposer):
    """The hand-written Triton templates in ``kernels/templates/<task>/``; config ``{"files": [...]}`` adds
    variant files of this proposer's own (origin ``template``); ``{"training": true}`` proposes only those with
    a backward (``launch_forward`` and ``launch_backward``), for a search whose winner must train."""

    name = "template"

    async def propose(self, task: Task, history: History) -> list[Candidate]:
        if history.round > 0:
            return []
        extra = [load_variant(f).for_task(task.name) for f in self.config.get("files", [])]  # ModelNew: no TASK
        variants = builtin_variants(task.name) + [v for v in extra if v.task == task.name]
        if self.config.get("training"):
            variants = [v for v in variants if v.has_backward]
        return [Candidate(v, Origin("template", self.name)) for v in variants]


PROPOSERS: Registry[type[Proposer]] = Registry(
    "proposer",
    {
        "template": "warpforge.agent.proposers:TemplateProposer",
        "llm": "warpforge.agent.evolution:LLMProposer",
    },
)
register_proposer = PROPOSERS.register  # class decorator: make a Proposer available as ``--proposer NAME``


def get_proposer(name: str, config: Mapping[str, Any] | None = None) -> Proposer:
    """The registered proposer ``name``, built with its own configuration."""
    return PROPOSERS[name](config)


def user_candidates(files: list[str], task: str) -> list[Candidate]:
    """The user's variant files for ``task`` (``--variant-file``), searched beside the proposer's."""
    variants = [load_variant(f).for_task(task) for f in files]  # a ModelNew answer without TASK: this one
    return [Candidate(v, Origin("user", "user")) for v in variants if v.task == task]
