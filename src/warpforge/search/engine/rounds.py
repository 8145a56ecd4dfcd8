"""Proposal rounds during a campaign: a background asyncio loop, and the in-memory history it is fed.

The campaign awaits round 0 (it needs arms), then, whenever new results have arrived and no proposal
is in flight, asks ``proposer.wants_more(history)``; a yes starts ``proposer.propose(task, history)``
on this module's event loop, in its own thread, so a slow proposer (an LLM call takes seconds to
minutes) never stalls evaluation. The returned candidates' constraint enumeration (which runs their
code, so in a child process: ~1-3 s each) happens in that background thread too; the campaign's loop
only picks up finished :class:`Prepared` arms with :meth:`ProposalLoop.take` and adds them.

History is built from :class:`ArmStats`, which the campaign updates as each result is told: no
database query per round.

Example::

    >>> loop = ProposalLoop(get_proposer("template"), task)                       # doctest: +SKIP
    >>> prepared = loop.first(History.empty(task.name, "interpret", 20), prepare)  # doctest: +SKIP
    >>> loop.start(history, prepare); ...; loop.take()                           # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections import Counter, deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from warpforge.agent.proposers import Candidate, FailureNote, History, Origin, Proposer, VariantHistory
from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.kernels.taskdef import Task
from warpforge.kernels.variant import Variant

log = logging.getLogger("warpforge.search.engine.rounds")
T = TypeVar("T")
FAILURES_KEPT = 5  # per variant, most recent first: enough for a prompt, never a dump


@dataclass
class ArmStats:
    """One arm's results so far, kept in memory as they are told (what :class:`VariantHistory` reports)."""

    evaluated: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)
    failures: deque[FailureNote] = field(default_factory=lambda: deque(maxlen=FAILURES_KEPT))
    best: EvalResult | None = None
    last_resources: list[Any] = field(default_factory=list)

    def add(self, result: EvalResult) -> None:
        self.evaluated += 1
        self.verdicts[result.verdict.value] += 1
        if result.resources:
            self.last_resources = list(result.resources)
        if result.verdict is not Verdict.OK:
            self.failures.appendleft(
                FailureNote(
                    result.verdict.value,
                    result.reason,
                    result.message.splitlines()[0][:300] if result.message else "",
                    dict(result.params),
                )
            )
        elif result.objective_ms is not None and (
            self.best is None or result.objective_ms < (self.best.objective_ms or float("inf"))
        ):
            self.best = result

    def history(self, variant: Variant, origin: Origin) -> VariantHistory:
        best = self.best
        resources = best.resources if best is not None and best.resources else self.last_resources
        roofline = [s.roofline_pct for s in best.shapes if s.roofline_pct is not None] if best else []
        return VariantHistory(
            variant=variant,
            origin=origin,
            evaluated=self.evaluated,
            verdicts=dict(self.verdicts),
            failures=tuple(self.failures),
            best_ms=best.objective_ms if best else None,
            best_params=dict(best.params) if best else None,
            best_speedup=best.speedup if best else None,
            roofline_pct=sum(roofline) / len(roofline) if roofline else None,
            resources=resources[0].model_dump() if resources else None,
            shapes=tuple(
                {
                    "shape": dict(s.shape),
                    "dtype": s.dtype,
                    "p50_ms": s.p50_ms,
                    "speedup": s.speedup,
                    "roofline_pct": s.roofline_pct,
                }
                for s in best.shapes
            )
            if best
            else (),
        )


@dataclass(frozen=True)
class Prepared(Generic[T]):
    """A candidate whose constraints were enumerated off the campaign's thread: ``value`` or ``error``."""

    candidate: Candidate
    value: T | None
    error: str | None = None


class ProposalLoop(Generic[T]):
    """Runs a proposer's rounds on a private event loop thread; the campaign polls :meth:`take`."""

    def __init__(self, proposer: Proposer, task: Task) -> None:
        self.proposer, self.task = proposer, task
        self.round = 0
        self.failed: str | None = None  # a round that raised: no more rounds, said in the summary
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="wf-proposer", daemon=True)
        self._thread.start()
        self._future: concurrent.futures.Future[list[Prepared[T]]] | None = None

    def _submit(self, coro: Coroutine[Any, Any, list[Prepared[T]]]) -> concurrent.futures.Future[list[Prepared[T]]]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _round(self, history: History, prepare: Callable[[Candidate], T]) -> list[Prepared[T]]:
        candidates = await self.proposer.propose(self.task, history)
        out: list[Prepared[T]] = []
        for c in candidates:
            try:  # a child process per candidate: off the event loop, so an aclose/next call is not blocked
                out.append(Prepared(c, await asyncio.to_thread(prepare, c)))
            except Exception as exc:  # noqa: BLE001 - one bad candidate must not drop the others
                out.append(Prepared(c, None, f"{type(exc).__name__}: {exc}"))
        return out

    def first(self, history: History, prepare: Callable[[Candidate], T]) -> list[Prepared[T]]:
        """Round 0, awaited: the campaign cannot start without arms."""
        self.round = 1
        return self._submit(self._round(history, prepare)).result()

    @property
    def in_flight(self) -> bool:
        return self._future is not None

    def start(self, history: History, prepare: Callable[[Candidate], T]) -> None:
        """Start the next round in the background (one at a time)."""
        assert self._future is None, "a round is already in flight"
        log.info(
            "proposer %s: round %d started (%d evaluations done, %d left)",
            self.proposer.name,
            history.round,
            history.evaluations_done,
            history.budget_left,
        )
        self._future = self._submit(self._round(history, prepare))
        self.round += 1

    def take(self, timeout: float = 0.0) -> list[Prepared[T]] | None:
        """The finished round's candidates, or None while it runs (waits up to ``timeout`` s)."""
        if self._future is None:
            return None
        try:
            out = self._future.result(timeout=timeout)
        except (concurrent.futures.TimeoutError, TimeoutError):
            return None
        except Exception as exc:  # noqa: BLE001 - a proposer bug ends its rounds, not the campaign
            self.failed = f"round {self.round - 1} raised {type(exc).__name__}: {exc}"
            log.warning(
                "proposer %s: %s; no further rounds, the campaign goes on with its arms",
                self.proposer.name,
                self.failed,
            )
            out = []
        self._future = None
        return out

    def close(self) -> None:
        if self._future is not None:
            self._future.cancel()
        try:
            self._submit_close().result(timeout=30)
        except Exception as exc:  # noqa: BLE001 - closing must not hide the campaign's own result
            log.warning("proposer %s: aclose() raised %s: %s", self.proposer.name, type(exc).__name__, exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def _submit_close(self) -> concurrent.futures.Future[None]:
        return asyncio.run_coroutine_threadsafe(self.proposer.aclose(), self._loop)
