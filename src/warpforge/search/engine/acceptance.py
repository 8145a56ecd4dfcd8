"""A new best only beyond noise (docs/design.md §4), and speedup intervals for the final top-k re-benchmark.

A measured candidate whose median beats the incumbent's is a *challenger*. It becomes the campaign's
best only if it is faster beyond noise, judged on the best evidence there is:

1. an interleaved A/B re-measurement of challenger and incumbent (``Backend.remeasure``), when the
   backend offers one, tested with :func:`warpforge.evaluator.run.stats.is_faster` (paired: same rounds);
2. else the per-shape timing samples both evaluations carry (``ShapeResult.samples_ms`` when the result
   model has it), tested the same way;
3. else quantile separation: the challenger's p80 below the incumbent's p20 (geometric means over
   shapes): conservative, the interquantile ranges must not even touch.

Fewer than ``stats.MIN_SAMPLES`` (5) samples on a side moves on to the next kind of evidence.

Example:
    >>> inc = Incumbent(alpha=0.05)
    >>> inc.offer(Entry("a", "v", {}, _fake(1.0)))
    >>> inc.offer(Entry("b", "v", {}, _fake(0.5)))
    >>> inc.best.key, inc.adopted
    ('b', 1)
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from warpforge.evaluator.result import EvalResult, ShapeResult, Verdict, geomean
from warpforge.evaluator.run.pool import JobSpec, Samples
from warpforge.search.engine.summary import FinalEntry


@dataclass
class Entry:
    """One measured evaluation that may hold or challenge the incumbent."""

    key: str
    variant: str
    params: dict[str, Any]
    result: EvalResult
    spec: JobSpec | None = None  # to re-measure it (None: history loaded from the database)

    @property
    def ms(self) -> float:
        return float(self.result.objective_ms or math.inf)


def _stats() -> Any:
    from warpforge.evaluator.run import stats  # scipy behind it costs ~0.3 s to import: only once a decision is due

    return stats


def objective_samples(result: EvalResult, reference: bool = False) -> list[float] | None:
    """Samples of the objective (geomean over shapes of the i-th sample), or None without raw samples."""
    per_shape = [getattr(s, "ref_samples_ms" if reference else "samples_ms", None) for s in result.shapes]
    if not per_shape or not all(per_shape):
        return None
    n = min(len(x) for x in per_shape)  # type: ignore[arg-type]
    if n < 2:
        return None
    return [geomean([x[i] for x in per_shape]) or math.nan for i in range(n)]  # type: ignore[index]


def _quantile(shapes: list[ShapeResult], name: str) -> float | None:
    values = [getattr(s, name) for s in shapes]
    return geomean(values) if values and all(v is not None for v in values) else None


def faster(a: list[float], b: list[float], alpha: float, paired: bool = False) -> bool | None:
    """Is ``a`` (times) faster than ``b`` beyond noise? None: too few samples to tell."""
    stats = _stats()
    if len(a) < stats.MIN_SAMPLES or len(b) < stats.MIN_SAMPLES:
        return None
    return bool(stats.is_faster(a, b, alpha=alpha, paired=paired and len(a) == len(b)))


def beyond_noise(
    challenger: EvalResult, incumbent: EvalResult, alpha: float, ab: Samples | None = None
) -> tuple[bool, str]:
    """Decide one challenge; returns (faster, the evidence used)."""
    if ab is not None and (won := faster(ab[0], ab[1], alpha, paired=True)) is not None:
        return won, "interleaved A/B re-measurement"
    a, b = objective_samples(challenger), objective_samples(incumbent)
    if a and b and (won := faster(a, b, alpha)) is not None:
        return won, "timing samples"
    hi, lo = _quantile(challenger.shapes, "p80_ms"), _quantile(incumbent.shapes, "p20_ms")
    if hi is None or lo is None:
        return (challenger.objective_ms or math.inf) < (incumbent.objective_ms or math.inf), "medians (no spread)"
    return hi < lo, "p20-p80 separation"


@dataclass
class Incumbent:
    """The campaign's accepted best for one task, adopting challengers only beyond noise."""

    alpha: float = 0.05
    remeasure: bool = False  # the pool can run Backend.remeasure
    best: Entry | None = None
    adopted: int = 0
    within_noise: int = 0  # challengers with a faster median that were not faster beyond noise
    evidence: dict[str, int] = field(default_factory=dict)
    waiting: Entry | None = None  # challenger whose A/B re-measurement is in flight
    _queue: deque[Entry] = field(default_factory=deque)

    def offer(self, entry: Entry) -> tuple[Entry, Entry] | None:
        """Consider a finished evaluation; returns (challenger, incumbent) when an A/B run must decide."""
        if entry.result.verdict is not Verdict.OK or not entry.result.measured:
            return None
        if self.best is None:
            self.best = entry
            return None
        if entry.ms >= self.best.ms:
            return None
        if self.remeasure and entry.spec is not None and self.best.spec is not None:
            if self.waiting is not None:
                self._queue.append(entry)
                return None
            self.waiting = entry
            return entry, self.best
        self._decide(entry, None)
        return None

    def resolve(self, samples: Samples | None) -> tuple[Entry, Entry] | None:
        """The waiting challenger's A/B samples arrived (None: the backend had none): decide, start the next."""
        if self.waiting is not None:
            entry, self.waiting = self.waiting, None
            self._decide(entry, samples)
        while self._queue:
            entry = self._queue.popleft()
            if self.best is not None and entry.ms < self.best.ms:
                self.waiting = entry
                return entry, self.best
        return None

    def _decide(self, entry: Entry, samples: Samples | None) -> None:
        assert self.best is not None
        won, how = beyond_noise(entry.result, self.best.result, self.alpha, samples)
        self.evidence[how] = self.evidence.get(how, 0) + 1
        if won:
            self.best, self.adopted = entry, self.adopted + 1
        else:
            self.within_noise += 1

    def describe(self) -> str:
        if self.best is None:
            return "no measured candidate"
        how = ", ".join(f"{k}: {n}" for k, n in sorted(self.evidence.items())) or "no challenge"
        return (
            f"best adopted only when faster beyond noise (alpha {self.alpha}): {self.adopted} adopted, "
            f"{self.within_noise} faster medians within noise ({how})"
        )


def speedup_interval(
    result: EvalResult, confidence: float = 0.95
) -> tuple[float | None, float | None, float | None, str]:
    """(low, speedup, high, method) of a result's speedup over the reference, from the best evidence."""
    cand, ref = objective_samples(result), objective_samples(result, reference=True)
    stats = _stats()
    if cand and ref:
        low, mid, high = sorted(float(v) for v in stats.speedup_ci(cand, ref, confidence=confidence))
        return low, mid, high, f"{confidence:.0%} CI from {len(cand)} samples"
    ref20, ref80 = _quantile(result.shapes, "ref_p20_ms"), _quantile(result.shapes, "ref_p80_ms")
    p20, p80 = _quantile(result.shapes, "p20_ms"), _quantile(result.shapes, "p80_ms")
    if None in (ref20, ref80, p20, p80):
        return None, result.speedup, None, "no reference spread"
    return ref20 / p80, result.speedup, ref80 / p20, "p20-p80 range (no raw samples)"  # type: ignore[operator]


def top_k(entries: Iterable[Entry], best: Entry, k: int) -> list[Entry]:
    """The k fastest distinct correct configurations (first entry of each), the incumbent always among them."""
    fastest: dict[tuple[str, str], Entry] = {}
    for e in sorted((e for e in entries if e.result.verdict is Verdict.OK and e.result.measured), key=lambda e: e.ms):
        fastest.setdefault((e.result.variant_hash, json.dumps(e.params, sort_keys=True)), e)
    others = [e for e in fastest.values() if e.key != best.key]
    return others[: max(k - 1, 0)] + [best]


def settle(
    chosen: list[Entry], fresh: dict[str, EvalResult], best: Entry, alpha: float
) -> tuple[Entry | None, list[FinalEntry]]:
    """The final choice among the top-k on their fresh results (``fresh`` by key; the stored result where
    absent): the incumbent stays unless another is faster beyond noise again. Returns (winner, report)."""
    results = {e.key: fresh.get(e.key, e.result) for e in chosen}
    ok = [e for e in chosen if results[e.key].verdict is Verdict.OK and results[e.key].measured]
    winner = best if best in ok else None
    for e in sorted(ok, key=lambda e: results[e.key].objective_ms or math.inf):
        if winner is None or (e is not winner and beyond_noise(results[e.key], results[winner.key], alpha)[0]):
            winner = e
            break
    report = []
    for e in chosen:
        r = results[e.key]
        low, mid, high, how = speedup_interval(r) if r.measured else (None, None, None, r.verdict.value)
        report.append(
            FinalEntry(
                e.variant, e.params, r.verdict.value, r.objective_ms, mid, low, high, how, e.key in fresh, e is winner
            )
        )
    if winner is not None:
        winner = Entry(winner.key, winner.variant, winner.params, results[winner.key], winner.spec)
    return winner, sorted(report, key=lambda f: f.ms or math.inf)


def _fake(ms: float) -> EvalResult:  # for the docstring example
    shape = ShapeResult(shape={"N": 1}, dtype="float32", p20_ms=ms * 0.99, p50_ms=ms, p80_ms=ms * 1.01)
    return EvalResult(verdict=Verdict.OK, shapes=[shape], objective_ms=ms)
