"""What a campaign is asked to do (:class:`CampaignSpec`), what a resumed one keeps, and its error.

Example::

    >>> spec = CampaignSpec(name="demo", tasks=["softmax"], trials=20, workers=4)
    >>> resumed_spec(spec, {"trials": 100, "backend": "cuda"}).trials
    100
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from warpforge.errors import WarpforgeError
from warpforge.evaluator.run.pool import PoolConfig
from warpforge.search.samplers.registry import DEFAULT_SAMPLER


class CampaignError(WarpforgeError, RuntimeError):
    """The campaign cannot start or go on; the message says what to do."""


@dataclass
class CampaignSpec:
    name: str
    tasks: list[str]
    trials: int = 20  # per task, split across its variants
    time_budget_s: float | None = None
    proposer: str = "template"
    proposer_config: dict[str, Any] = field(default_factory=dict)  # the proposer's own options
    allocator: str = "default"  # how the budget is split between variants (search/engine/allocators.py)
    allocator_config: dict[str, Any] = field(default_factory=dict)
    sampler: str = DEFAULT_SAMPLER
    backend: str = "auto"
    target: str = "sm_90"
    seed: int | None = None
    resume: bool = False
    db_url: str | None = None
    seeds: int = 2  # correctness seeds per check case
    variant_files: list[str] = field(default_factory=list)  # user variants searched beside the proposer's
    workers: int = 1  # evaluation workers: one per GPU (cuda), else CPU workers; 0 = all there are
    compile_workers: int | None = None  # CPU actors compiling ahead of GPU workers (None: one per GPU worker)
    ray: bool | None = None  # None: Ray when workers != 1 or ray_address is given
    ray_address: str | None = None
    top_k: int = 3  # re-benchmarked at the end where the backend measures live
    alpha: float = 0.05  # significance for adopting a new best
    timeout_s: float = 120.0  # per child process
    interpret_check: bool = False  # GPU backends: interpreter correctness on CPU workers before the GPU
    # The task files as the user gave them (absolute): a matched problem runs from a cached copy (``tasks``),
    # and a hint (best, export) should name the user's file.
    task_files: list[str] = field(default_factory=list)

    def pool_config(self) -> PoolConfig:
        return PoolConfig(
            workers=self.workers,
            compile_workers=self.compile_workers,
            use_ray=self.ray,
            address=self.ray_address,
            interpret_check=self.interpret_check,
        )


# What a resumed campaign keeps from its stored spec: it continues the same search, on the same backend.
RESUME_KEEPS = (
    "tasks",
    "backend",
    "sampler",
    "target",
    "seed",
    "seeds",
    "variant_files",
    "proposer",
    "proposer_config",
    "allocator",
    "allocator_config",
)


def resumed_spec(given: CampaignSpec, stored: dict[str, Any]) -> CampaignSpec:
    """The spec of a resumed campaign: the stored one, with a trial budget never smaller than stored.

    ``run --campaign c --resume`` with default options must not shrink a 100-trial campaign to 20 (and
    finish it early), nor swap its backend or variants midway; a larger ``--trials`` extends it.
    """
    kept = {k: stored[k] for k in RESUME_KEEPS if k in stored}
    return replace(given, **kept, trials=max(given.trials, int(stored.get("trials", 0))))
