"""Gaussian-process expected improvement over the explicit feasible set (Optuna's GP, scored, not optimised).

Optuna's ``GPSampler`` fits a GP (Matern 5/2, ARD, gamma priors) and maximises log expected
improvement by gradient steps in the box; on a restricted, discrete tuning space the optimiser's
point is usually infeasible and snapping discards what it chose. :class:`GPArm` keeps Optuna's
regressor, priors and ``logei`` and scores the unseen feasible rows themselves instead.

Measured with ``benchmarks/search_screen.py`` (seeds 1000+, never bench-search's 0-29):

- categorical (Hamming) kernel on the ordinal indices, as for TPE: on convolution_milo/A100 the GP
  alone reached 0.90 at 100 evaluations with it and 0.80 with the ordinal (distance) kernel
  (20 repeats each);
- the GP's target is a Gaussian copula of the times (ranks mapped to standard-normal quantiles,
  fastest highest), not standardised log time: the recorded slowest configuration is 7x (pnpoly)
  to 152x (MI250X) the fastest, and the copula makes the fit invariant to that tail. Screened in
  session 4 against log time on three fresh seed ranges (mean fraction at 100 evaluations over
  7 spaces): +0.004 (10000-10039, 2,000 candidates), +0.004 (11000-11039) and +0.005
  (12000-12049, both with 5,000 candidates); A100 +0.004 to +0.028 on all three;
- up to ``max_candidates`` = 5,000 random unseen rows scored per step (every unseen row on the
  4,092- and 4,362-row spaces; 74% of convolution/RTX_3090's 6,768, 28% of gemm's 17,956): on A100
  the argmax is then the model's argmax, not a 46% sample's.
  Scoring is cheap beside a GPU evaluation (session 3: all 17,956 gemm rows cost 0.33 s per step
  at 100 trials; bench-search's ``s/run`` column has the cost at 5,000).

Chosen by reasoning, not screened: a failed configuration ties with the slowest time seen so far
(failures are information: the model learns to avoid their neighbourhood) rather than being dropped.

Uses Optuna's private ``optuna._gp`` (its API changed between 4.x and 5.0); if it is missing or its
signatures change the arm marks itself ``broken`` and returns None, so the portfolio's other arms
take its turns (``test_gp_arm_falls_back_if_optuna_internals_change`` checks that path,
``test_gp_arm_works_with_installed_optuna`` that the installed Optuna does not take it).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from warpforge.search.samplers.policy import Context, ScoringArm


class GPArm(ScoringArm):
    """A GP fitted to a Gaussian copula of the times, scored over unseen feasible rows.

    The acquisition is log expected improvement, or with ``ucb_beta`` the upper confidence bound
    ``mean + ucb_beta * std`` (arm name ``gp-ucb``): EI concentrates on the incumbent's
    neighbourhood, UCB keeps exploring where the model is unsure (wf-default's third arm, beta 3;
    the screen that chose it is in docs/search.md, session 5).
    """

    name = "gp"

    def __init__(
        self, seed: int | None = None, max_candidates: int = 5000, n_startup: int = 5, ucb_beta: float | None = None
    ) -> None:
        # The fit and the argmax are deterministic: nothing to seed.
        super().__init__(max_candidates, n_startup, top_k=1)
        self.ucb_beta = ucb_beta
        if ucb_beta is not None:
            self.name = "gp-ucb"
        self._cache: Any = None  # the last fitted regressor: warm start for the next fit

    def acquisition(self, ctx: Context, rows: np.ndarray) -> np.ndarray:
        """log EI, or UCB, of the copula of negative time (maximised) at the given feasible rows."""
        import torch

        from warpforge.search.optuna_private import gp_modules

        acqf, gp, prior = gp_modules()

        space = ctx.space
        cols = [j for j, v in enumerate(space.params.values()) if len(v) > 1]

        def features(r: list[int] | np.ndarray) -> np.ndarray:  # only the rows needed, not all 18k
            return space.index_matrix[np.ix_(np.asarray(r, dtype=int), np.asarray(cols, dtype=int))].astype(np.float64)

        told = [i for i, (v, f) in enumerate(zip(ctx.values, ctx.failed)) if v is not None or f]
        times = np.array([np.nan if ctx.values[i] is None else ctx.values[i] for i in told], dtype=float)
        y = copula_target(times)
        x = features([ctx.rows[i] for i in told])
        with _one_thread():
            model = gp.fit_kernel_params(
                X=x,
                Y=y,
                is_categorical=np.ones(len(cols), dtype=bool),
                log_prior=prior.default_log_prior,
                minimum_noise=prior.DEFAULT_MINIMUM_NOISE_VAR,
                deterministic_objective=False,
                gpr_cache=self._cache,
            )
            self._cache = model
            with torch.no_grad():
                mean, var = model.posterior(torch.from_numpy(features(rows)))
                if self.ucb_beta is not None:
                    return (mean + self.ucb_beta * var.clamp_min(0.0).sqrt()).numpy()
                return acqf.logei(mean, var + 1e-12, float(y.max())).numpy()


def copula_target(times: np.ndarray) -> np.ndarray:
    """Standard-normal quantiles of the times' ranks, fastest highest, standardised; NaN (a failure)
    ties with the slowest.

    Example:
        >>> copula_target(np.array([2.0, 1.0, np.nan, 4.0])).round(2).tolist()
        [0.38, 1.47, -0.92, -0.92]
    """
    from scipy.stats import norm, rankdata

    slowest = np.nanmax(times) if np.isfinite(times).any() else 1.0
    ranks = rankdata(-np.where(np.isnan(times), slowest, times))  # ties (failures) share their mean rank
    z = np.asarray(norm.ppf((ranks - 0.5) / len(ranks)), dtype=float)
    return (z - z.mean()) / max(float(z.std()), 1e-12)  # what Optuna's GP priors expect


@contextmanager
def _one_thread() -> Iterator[None]:
    """Torch on one thread for these small solves: intra-op threads only add contention here
    (Optuna's GPSampler does the same, see ``optuna._gp.thread_limiting``)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)
