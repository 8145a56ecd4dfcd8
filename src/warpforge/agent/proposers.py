"""Proposers: where variants come from (one registry). The template library ships with warpforge;
an LLM proposer (openai client) registers here too when it lands.

Example::

    >>> from warpforge.agent.proposers import get_proposer
    >>> variants = get_proposer("template").propose(task)  # doctest: +SKIP
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from warpforge.kernels.task import Task
from warpforge.kernels.variant import Variant, builtin_variants, load_variant


class Proposer(ABC):
    """Produces variant sources for a task."""

    name: str = ""

    @abstractmethod
    def propose(self, task: Task) -> list[Variant]: ...


class TemplateProposer(Proposer):
    """The hand-written Triton templates in ``kernels/templates/<task>/``, plus any extra variant files."""

    name = "template"

    def __init__(self, extra_files: list[str] | None = None) -> None:
        self.extra_files = extra_files or []

    def propose(self, task: Task) -> list[Variant]:
        extra = [load_variant(f) for f in self.extra_files]
        return builtin_variants(task.name) + [v for v in extra if v.task == task.name]


PROPOSERS: dict[str, type[Proposer]] = {TemplateProposer.name: TemplateProposer}


def get_proposer(name: str, extra_files: list[str] | None = None) -> Proposer:
    if name not in PROPOSERS:
        raise ValueError(f"unknown proposer {name!r}: available: {', '.join(sorted(PROPOSERS))}")
    if name == TemplateProposer.name:
        return TemplateProposer(extra_files)
    return PROPOSERS[name]()
