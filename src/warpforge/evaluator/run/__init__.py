"""Running an evaluation: backends, worker pools, and the stages each job goes through.

``backend`` holds the backend contract, its registry and backend selection, with one module per backend
(``interpret``, ``cuda``, ``replay``); ``stages`` runs static check, correctness, ahead-of-time compile and
timing for a ``Job``; ``provenance`` stamps results with the software and hardware that produced them;
``pool`` and ``ray_pool`` schedule jobs, and :func:`make_pool` here picks between them; ``timing`` and
``stats`` plan and judge timed runs.

Example::

    >>> from warpforge.evaluator.run import make_pool
    >>> from warpforge.evaluator.run.pool import PoolConfig
    >>> pool = make_pool("interpret", PoolConfig(workers=1, use_ray=False))
    >>> pool.backend_name
    'interpret'
    >>> pool.close()
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from warpforge.evaluator.run.backend import Backend
    from warpforge.evaluator.run.pool import EvalPool, PoolConfig


def make_pool(backend: str | type[Backend], config: PoolConfig) -> EvalPool:
    """The pool for one backend: ``LocalPool`` when Ray isn't wanted, else a ``RayPool`` (ray_pool.py)."""
    from warpforge.evaluator.run.backend import BACKENDS
    from warpforge.evaluator.run.pool import LocalPool, PoolError

    cls = BACKENDS[backend] if isinstance(backend, str) else backend
    if config.wants_ray:
        from warpforge.evaluator.run.ray_pool import RayPool  # importing ray costs ~1 s: only when wanted

        return RayPool(cls, config)
    workers = config.workers or (os.cpu_count() or 1)
    if cls.uses_gpu and workers > 1:
        raise PoolError(
            f"{workers} in-process workers would time candidates on one GPU at once, which corrupts "
            "the times: drop --no-ray (one Ray worker per GPU) or use --workers 1"
        )
    return LocalPool(cls, config.backend_kwargs, workers, config.interpret_check)
