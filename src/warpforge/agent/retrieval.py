"""Past winners for a prompt, through the one read layer (``warpforge.db.queries.Reader``).

Two kinds of evidence: the same task's accepted winners measured on *other* GPUs (what worked there), and
other tasks' winners on *this* GPU (what this GPU rewards). One line each, never raw rows; at most
``limit`` lines. Any database problem gives no winners rather than a failed proposal: retrieval is a hint.

Example::

    >>> past_winners("sqlite:///wf.db", "softmax", "NVIDIA H200")   # doctest: +SKIP
    ['softmax on NVIDIA A100: online {"BLOCK": 4096, "num_warps": 8} 0.21 ms (1.9x)']
"""

from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger("warpforge.agent")


def _line(w: Any) -> str | None:
    d = w.decision
    if not d.accepted or d.variant_name is None or d.objective_ms is None:
        return None
    speed = f" ({d.speedup:.3g}x)" if d.speedup else ""
    return f"{w.task} on {w.gpu}: {d.variant_name} {json.dumps(dict(d.params or {}))} {d.objective_ms:.4g} ms{speed}"


def past_winners(db_url: str | None, task: str, gpu: str | None, limit: int = 6) -> list[str]:
    if db_url is None:
        return []
    try:
        from warpforge.db.queries import Reader

        reader = Reader(db_url)
        same_task = [w for w in reader.winners(task=task) if w.gpu != gpu]
        same_gpu = [w for w in reader.winners(gpu=gpu) if w.task != task] if gpu else []
    except Exception as exc:  # noqa: BLE001 - a hint only: never fail a proposal over it
        log.info("no past winners for %s: %s: %s", task, type(exc).__name__, exc)
        return []
    lines = [line for w in same_task + same_gpu if (line := _line(w)) is not None]
    return list(dict.fromkeys(lines))[:limit]
