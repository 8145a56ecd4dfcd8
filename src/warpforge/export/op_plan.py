"""The typed boundary of export: what was chosen for one op (:class:`OpPlan`, its per-GPU tables) and the read
layer it was chosen through. export/plan.py fills it; package.py writes it; bypath.py swaps in a by-path
problem's generated task module."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from warpforge.errors import WarpforgeError
from warpforge.kernels.taskdef import Task


class ExportRefused(WarpforgeError, RuntimeError):
    """The database holds nothing that may be exported for a task; the message says what to do (exit 1)."""

    label = "refused"


class ReaderLike(Protocol):
    """The part of ``warpforge.db.queries.Reader`` (docs/seams.md, "Read layer") that export reads."""

    def decisions(
        self, *, campaign: str | None = None, task: str | None = None, gpu: str | None = None
    ) -> tuple[Any, ...]: ...

    def evaluations(
        self,
        *,
        campaign: str | None = None,
        task: str | None = None,
        verdict: str | None = None,
        variant_hash: str | None = None,
        sort: str = "-id",
        offset: int = 0,
        limit: int = 50,
    ) -> Any: ...

    def evaluation(self, id: int) -> Any: ...

    def variant(self, source_hash: str) -> Any: ...

    def campaign(self, name: str) -> Any: ...


@dataclass(frozen=True)
class TunedEntry:
    shape: Mapping[str, int]
    dtype: str
    params: Mapping[str, Any]
    p50_ms: float | None
    evaluation: int


@dataclass(frozen=True)
class GpuTable:
    """Tuned configurations of one GPU: the general one and per-shape ones, all verified ``ok``."""

    gpu: str
    timing_source: str  # live | recorded | untimed
    general: Mapping[str, Any]
    entries: tuple[TunedEntry, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "timing_source": self.timing_source,
            "general": dict(self.general),
            "shapes": [
                {
                    "shape": dict(e.shape),
                    "dtype": e.dtype,
                    "params": dict(e.params),
                    "p50_ms": e.p50_ms,
                    "evaluation": e.evaluation,
                }
                for e in self.entries
            ],
        }


@dataclass(frozen=True)
class OpPlan:
    task: Task
    variant_name: str
    variant_hash: str
    variant_source: str
    tables: tuple[GpuTable, ...]
    info: Mapping[str, Any]  # KERNEL_INFO of the op (JSON-ready, no export timestamp)
    untimed: bool = False
    dtypes: tuple[str, ...] = field(default_factory=tuple)  # dtypes the configs were verified with
    # The task module the package ships as _reference/<op>.py; empty: the task's own file. A PyTorch-module
    # problem gets one generated (export/bypath.py).
    task_source: str = ""
