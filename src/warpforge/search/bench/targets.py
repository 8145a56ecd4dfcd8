"""The search's targets, checked from bench-search's records: our default beside Kernel Tuner's best.

With ``--baselines kt`` bench-search prints, under its table, one verdict per (space, budget): the
default sampler against the best Kernel Tuner strategy *of the same run* (same seeds, same budgets,
same accounting), and the two absolute targets at the largest budget:

- per space and budget: default mean >= best kt mean minus one standard error of the difference
  (``sqrt(se_default**2 + se_kt**2)``; the repeats of the two samplers are independent searches);
- ``convolution_milo/A100`` >= 0.93 at 100 evaluations;
- the mean over the *distinct* spaces >= 0.97 at 100. Files holding the same records (the shared
  ``A100_T4.json.gz`` is ``A100.json.gz`` in T4 format) count once: spaces are told apart by the
  digest of their records, not by name.

Example:
    >>> from warpforge.search.bench.harness import BenchRecord
    >>> def rec(space, sampler, mean, se, digest="d"):
    ...     return BenchRecord(space, sampler, 100, mean, se, 0.5, 100, 0.0, 0.0, 0.0, 0.0, 10, 1.0,
    ...                        digest=digest)
    >>> rows = compare_to_kt([rec("a/X", "wf-default", 0.95, 0.01), rec("a/X", "kt:pso", 0.96, 0.01)])
    >>> rows[0].best_kt, round(rows[0].difference, 3), rows[0].met
    ('kt:pso', -0.01, True)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from warpforge.search.bench.kt_baseline import KT_PREFIX
from warpforge.search.samplers.registry import DEFAULT_SAMPLER

# The targets (docs/search.md, "Current numbers"): convolution_milo/A100 >= 0.93 at 100 evaluations;
# mean over the 7 distinct spaces >= 0.97 at 100.
A100_SPACE, A100_TARGET = "convolution_milo/A100", 0.93
MEAN_TARGET, TARGET_BUDGET = 0.97, 100


class BenchRow(Protocol):
    """What is read of a :class:`~warpforge.search.bench.BenchRecord` (bench.py prints these tables, so
    this module does not import it: no import circle)."""

    space: str
    sampler: str
    budget: int
    mean: float
    stderr: float
    digest: str


R = TypeVar("R", bound=BenchRow)


@dataclass(frozen=True)
class KTComparison:
    """The default against the best Kernel Tuner strategy of the same run, at one space and budget."""

    space: str
    budget: int
    ours: float
    ours_se: float
    best_kt: str
    kt: float
    kt_se: float

    @property
    def difference(self) -> float:
        return self.ours - self.kt

    @property
    def se(self) -> float:  # of the difference of two independent means
        return math.hypot(self.ours_se, self.kt_se)

    @property
    def met(self) -> bool:  # "at or above, within one standard error"
        return self.difference >= -self.se


@dataclass(frozen=True)
class Target:
    what: str
    value: float | None  # None: not in this run
    goal: float

    @property
    def met(self) -> bool:
        return self.value is not None and self.value >= self.goal


def _content(r: BenchRow) -> str:
    return r.digest or r.space  # JSON from before the digest: the name stands in


def distinct(records: Iterable[R]) -> list[R]:
    """One record per (space content, sampler, budget): the first seen. A file passed twice, or the
    same records under two names (A100 and A100_T4), count once."""
    seen: set[tuple[str, str, int]] = set()
    out = []
    for r in records:
        key = (_content(r), r.sampler, r.budget)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def compare_to_kt(records: Sequence[BenchRow], sampler: str = DEFAULT_SAMPLER) -> list[KTComparison]:
    """Per distinct space and budget, ``sampler`` beside the kt strategy with the best mean (none: no kt rows)."""
    kept = distinct(records)
    rows = []
    for r in kept:
        if r.sampler != sampler:
            continue
        kt = [
            k for k in kept if _content(k) == _content(r) and k.budget == r.budget and k.sampler.startswith(KT_PREFIX)
        ]
        if kt:
            best = max(kt, key=lambda k: k.mean)
            rows.append(KTComparison(r.space, r.budget, r.mean, r.stderr, best.sampler, best.mean, best.stderr))
    return rows


def absolute_targets(records: Sequence[BenchRow], sampler: str = DEFAULT_SAMPLER) -> list[Target]:
    """A100 at 100 and the mean over distinct spaces at 100, for ``sampler``."""
    at = [r for r in distinct(records) if r.sampler == sampler and r.budget == TARGET_BUDGET]
    a100_content = {_content(r) for r in records if r.space == A100_SPACE}  # whichever file came first
    a100 = next((r.mean for r in at if _content(r) in a100_content), None)
    mean = sum(r.mean for r in at) / len(at) if at else None
    return [
        Target(f"{A100_SPACE} at {TARGET_BUDGET}", a100, A100_TARGET),
        Target(f"mean of {len(at)} distinct spaces at {TARGET_BUDGET}", mean, MEAN_TARGET),
    ]


def render_targets(records: Sequence[BenchRow], sampler: str = DEFAULT_SAMPLER) -> object | None:
    """A Rich table of the verdicts, or None when the run has no kt rows or no ``sampler`` rows."""
    from rich.table import Table

    rows = compare_to_kt(records, sampler)
    if not rows:
        return None
    table = Table(title=f"targets: {sampler} against the best Kernel Tuner strategy of this run")
    for name, justify in (
        ("space", "left"),
        ("budget", "right"),
        (sampler, "right"),
        ("best kt", "left"),
        ("kt", "right"),
        ("difference", "right"),
        ("target", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for c in rows:
        verdict = "[green]met[/green]" if c.met else f"[red]missed by {-c.difference - c.se:.3f}[/red]"
        table.add_row(
            c.space,
            str(c.budget),
            f"{c.ours:.3f} ± {c.ours_se:.3f}",
            c.best_kt,
            f"{c.kt:.3f} ± {c.kt_se:.3f}",
            f"{c.difference:+.3f} ± {c.se:.3f}",
            verdict,
        )
    for t in absolute_targets(records, sampler):
        value = "not run" if t.value is None else f"{t.value:.3f}"
        verdict = (
            "[green]met[/green]"
            if t.met
            else ("[red]not run[/red]" if t.value is None else f"[red]missed by {t.goal - t.value:.3f}[/red]")
        )
        table.add_row(t.what, "", value, "", f">= {t.goal:.2f}", "", verdict)
    return table
