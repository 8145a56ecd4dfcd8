"""Leaving a trap: when the incumbent stalls, every other proposal comes from outside its basin.

A model-based portfolio converges: on convolution_milo/A100 a third of wf-default's runs (seeds
20000-20009) spent their last 40-66 evaluations around one configuration at 0.64-0.68 of the
optimum. Those configurations are Hamming-1 local optima (no one-parameter change improves them;
the nearest better configuration is 2-4 parameters away) sitting on a plateau of many 0.55-0.65
configurations, and all three arms (GP expected improvement, TPE, GP upper confidence bound) kept
proposing plateau points 1-6 parameters from the incumbent, each a little worse or a little
better, so the incumbent crept up by 1-2% and never left (docs/history/search.md).

:class:`Escape` wraps such a portfolio. While the incumbent is *stalled* (it has not improved by
at least ``min_gain`` relative within the last ``patience`` evaluations) and looks like a local
optimum (at least ``min_probed`` of its one-parameter neighbours measured, none faster), every
``every``-th proposal is an escape step: the model arm is asked for its best configuration among the unseen
feasible rows that differ from the incumbent in at least ``radius`` parameters, where ``radius``
starts at 2 (the Hamming-1 shell is what the portfolio already searched) and grows by one every
``grow`` escape steps of the same stall. A real improvement ends the stall and the portfolio runs
alone again. With ``consensus_top`` (wf-default: 10) an escape step goes instead where the
``consensus_top`` fastest measurements all agree on a parameter value and the step does not: on A100
the stalled runs' best all share ``read_only=0`` and the optimum needs ``read_only=1``, and distance
alone let the model pick far points on the same plateau (radius is the fallback when they agree on
nothing). The state is a function of the finished trials (values and the proposing arm's name), so a
study resumed from storage continues it.

Example:
    >>> from warpforge.search.samplers.policy import UniformArm
    >>> e = Escape(UniformArm(), UniformArm(), patience=10)
    >>> e.stalled([5.0, 4.0] + [4.0] * 10), e.stalled([5.0, 4.0] + [4.0] * 7)
    (True, False)
"""

from __future__ import annotations

import math

import numpy as np
from optuna.samplers import BaseSampler

from warpforge.search.samplers.policy import Context, Pick, Policy

ESCAPE_ARM = "escape"


class Escape(Policy):
    """``inner`` proposes; while the incumbent is stalled at a probed local optimum, every ``every``-th
    step ``model`` proposes among the unseen rows that break the top measurements' consensus (with
    ``consensus_top``) or lie at least ``radius`` parameters from the incumbent."""

    name = ESCAPE_ARM

    def __init__(
        self,
        inner: Policy,
        model: Policy,
        patience: int = 10,
        min_gain: float = 0.02,
        every: int = 2,
        grow: int = 3,
        start_radius: int = 2,
        min_probed: int = 0,
        consensus_top: int | None = None,
    ) -> None:
        self.inner, self.model = inner, model
        self.consensus_top = consensus_top
        self.min_probed = min_probed
        self.patience, self.min_gain, self.every = patience, min_gain, every
        self.grow, self.start_radius = grow, start_radius

    def optuna_samplers(self) -> list[BaseSampler]:
        return self.inner.optuna_samplers()

    def stalled(self, values: list[float | None]) -> bool:
        """True when the best value has not improved by ``min_gain`` (relative) in ``patience`` evaluations."""
        return len(values) - last_gain(values, self.min_gain) >= self.patience > 0 and any(
            v is not None for v in values
        )

    def propose(self, ctx: Context, only: np.ndarray | None = None) -> Pick | None:
        if only is not None or not self.stalled(ctx.values):
            return self.inner.propose(ctx, only)
        since = last_gain(ctx.values, self.min_gain)
        done = sum(a == ESCAPE_ARM for a in ctx.arms[since:])  # escape steps in this stall
        if (len(ctx.rows) - since - self.patience) % self.every:
            return self.inner.propose(ctx)
        best = ctx.best_row
        assert best is not None  # stalled() needs a measured value
        mat = ctx.space.index_matrix
        distance = (mat != mat[best]).sum(axis=1)
        if int((distance[ctx.rows] == 1).sum()) < self.min_probed:
            # Still refining one parameter at a time (MI250X): escaping from there cost 0.2 at 50
            # evaluations in the screen (docs/history/search.md); the portfolio's own steps probe the neighbours.
            return self.inner.propose(ctx)
        region = self.region(ctx, distance, done)
        pick = self.model.propose(ctx, only=region) if region.any() else None
        if pick is None:
            return self.inner.propose(ctx)
        return Pick(pick.row, ESCAPE_ARM)

    def region(self, ctx: Context, distance: np.ndarray, done: int) -> np.ndarray:
        """Where an escape step may go: the unseen rows breaking the top measurements' consensus
        (with ``consensus_top``), else those at least ``radius`` parameters from the incumbent."""
        if self.consensus_top:
            breakers = consensus_breakers(ctx.space.index_matrix, ctx.rows, ctx.values, self.consensus_top)
            if (breakers & ~ctx.seen).any():
                return breakers & ~ctx.seen
        radius = self.start_radius + done // self.grow
        return (distance >= min(radius, int(distance.max()))) & ~ctx.seen


def consensus_breakers(mat: np.ndarray, rows: list[int], values: list[float | None], top: int) -> np.ndarray:
    """Rows of ``mat`` that differ from the ``top`` fastest measured rows in a parameter on which those all agree.

    On convolution_milo/A100 every stalled run's best measurements share ``read_only=0`` while the
    optimum has ``read_only=1`` (docs/history/search.md): the hypothesis worth one evaluation is
    that the consensus itself is the trap. Parameters with one value in the space are not consensus.

    Example:
        >>> mat = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
        >>> consensus_breakers(mat, [0, 1, 2], [1.0, 2.0, 9.0], top=2).tolist()   # both best have x=0
        [False, False, True, True]
    """
    best = [r for _, r in sorted((v, r) for r, v in zip(rows, values) if v is not None)[:top]]
    out = np.zeros(len(mat), dtype=bool)
    if len(best) < top:
        return out
    agree = mat[best[0]]
    for j in range(mat.shape[1]):
        if (mat[best, j] == agree[j]).all() and (mat[:, j] != agree[j]).any():
            out |= mat[:, j] != agree[j]
    return out


def last_gain(values: list[float | None], min_gain: float) -> int:
    """1-based count of evaluations at which the best value last improved by at least ``min_gain``
    relative to the best before it (the first measurement counts); 0 if nothing was measured.

    Example:
        >>> last_gain([3.0, None, 2.0, 1.99, 1.5], 0.02), last_gain([3.0, 2.99], 0.02)
        (5, 1)
    """
    best, last = math.inf, 0
    for i, v in enumerate(values, start=1):
        if v is None:
            continue
        if best == math.inf or v < best * (1 - min_gain):
            last = i
        if v < best:
            best = v
    return last
