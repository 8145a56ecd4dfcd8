"""The end of a task's search: the final top-k re-benchmark, the summary, and the decision stored as data.

:class:`Ending` is handed what it needs by :class:`~warpforge.search.engine.taskrun.TaskRun` (the database,
the pool, the incumbent, and the run's own ``save``/``commit``), kept apart so that the search loop and its
ending each stay readable.

Example::

    >>> ending = Ending(db, spec, task, pool, "cuda", incumbent, save=run.save, commit=run.commit)  # doctest: +SKIP
    >>> final = ending.final(run.measured, run.by_hash)   # re-measure the top-k where timing is live
    >>> summary = ending.summarize(final, run.arms)       # counts, the chosen best, its stored decision
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from warpforge.db import store
from warpforge.db.queries import Reader
from warpforge.db.session import Database
from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.evaluator.run.backend import BACKENDS
from warpforge.evaluator.run.pool import EvalPool
from warpforge.kernels.taskdef import Task
from warpforge.search.engine.acceptance import Entry, Incumbent, settle, top_k
from warpforge.search.engine.arms import Arm
from warpforge.search.engine.decision import decision_fields
from warpforge.search.engine.spec import CampaignSpec
from warpforge.search.engine.summary import FinalEntry, TaskSummary


class Ending:
    """The last two steps of a task's run."""

    def __init__(
        self,
        db: Database,
        spec: CampaignSpec,
        task: Task,
        pool: EvalPool,
        backend_name: str,
        incumbent: Incumbent,
        *,
        save: Callable[..., None],
        commit: Callable[[], None],
    ) -> None:
        self.db, self.spec, self.task, self.pool, self.incumbent = db, spec, task, pool, incumbent
        self.backend_name, self.backend_cls = backend_name, BACKENDS[backend_name]
        self.save, self.commit = save, commit

    def final(self, measured: list[Entry], by_hash: dict[str, Arm]) -> list[FinalEntry]:
        """Re-measure the top-k in fresh children where timing is live (recorded times cannot change), and
        keep the incumbent unless another is faster beyond noise on the fresh numbers too."""
        best = self.incumbent.best
        if self.spec.top_k <= 0 or best is None:
            return []
        chosen = top_k(measured, best, self.spec.top_k)
        fresh: dict[str, EvalResult] = {}
        if self.backend_cls.live_timing:
            pending = {f"final:{e.key}": e for e in chosen if e.spec is not None}
            for key, e in pending.items():
                assert e.spec is not None
                self.pool.submit(replace(e.spec, key=key))
            while pending:
                for c in self.pool.poll(timeout=1.0):
                    e = pending.pop(c.key)
                    if c.result is not None:
                        self.save(by_hash[e.result.variant_hash], c.result, None, final=True)
                        fresh[e.key] = c.result
                self.commit()
        winner, report = settle(chosen, fresh, best, self.spec.alpha)
        rechecked = fresh.get(best.key)
        if winner is None and rechecked is not None and rechecked.verdict is not Verdict.OK:
            self.incumbent.best = None  # the best failed its fresh re-check: no confirmed best
        else:
            self.incumbent.best = winner or best
        return report

    def summarize(self, final: list[FinalEntry], arms: list[Arm]) -> TaskSummary:
        rows = list(
            Reader(database=self.db).iter_evaluations(campaign=self.spec.name, task=self.task.name, final=False)
        )
        measured = 0
        for arm in arms:
            summary = arm.summary
            for r in rows:
                if r.variant_hash != arm.variant.source_hash:
                    continue
                summary.evaluated += 1
                summary.verdicts[r.verdict] = summary.verdicts.get(r.verdict, 0) + 1
                if r.objective_ms is not None and r.verdict == "ok":
                    measured += 1
                    if summary.best_ms is None or r.objective_ms < summary.best_ms:
                        summary.best_ms, summary.best_params = r.objective_ms, dict(r.params)
        best = self.incumbent.best
        if self.backend_cls.measures or measured:
            timing = best.result.timing if best else None
            source, gpu = (timing.source, timing.gpu) if timing else (self.backend_name, "a GPU")
            text = f"{measured} of {len(rows)} evaluations measured ({source} times from {gpu})"
        else:
            text = (
                f"0 of {len(rows)} evaluations measured: no GPU here and no recorded GPU times for these "
                "variants; configurations were checked for correctness (Triton interpreter) and compiled for "
                f"{self.spec.target}, but not ranked by time. Run on a CUDA machine or record with "
                "benchmarks/record_spaces.py"
            )
        out = TaskSummary(
            self.task.name,
            self.backend_name,
            len(rows),
            measured,
            text,
            [a.summary for a in arms],
            workers=self.pool.describe,
            acceptance=self.incumbent.describe(),
            final=final,
        )
        if best is not None:
            out.best_variant, out.best_params, out.best_ms, out.best_speedup = (
                best.variant,
                best.params,
                best.result.objective_ms,
                best.result.speedup,
            )
            chosen = next((f for f in final if f.chosen), None)
            if chosen is not None:
                out.best_speedup, out.best_speedup_low, out.best_speedup_high = (
                    chosen.speedup,
                    chosen.speedup_low,
                    chosen.speedup_high,
                )
        with self.db.session() as s:  # the decision as data: readers never re-rank raw times (docs/design.md §3.5)
            campaign = store.get_campaign(s, self.spec.name)
            assert campaign is not None
            store.save_decision(
                s,
                campaign,
                self.task.name,
                **decision_fields(out, best, final, backend=self.backend_name, acceptance=self.incumbent.describe()),
            )
        return out
