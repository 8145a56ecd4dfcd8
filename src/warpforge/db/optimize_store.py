"""The store's writes to ``wf_optimize_runs``: one ``warpforge optimize`` report per run. Reads are
db/optimize_reads.py's.

The optimizer (optimize/store.py) turns its report into an :class:`OptimizeRunRecord`; this layer builds the
ORM row and imports nothing of the optimizer.

Example::

    >>> write_optimize_run("sqlite:///wf.db", OptimizeRunRecord(target="./qwen3-tiny", ...))   # doctest: +SKIP
    1
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from warpforge.db.models import OptimizeRun
from warpforge.db.session import Database


@dataclass(frozen=True)
class OptimizeRunRecord:
    """One ``wf_optimize_runs`` row: the report as a JSON document, and the columns the run list shows."""

    target: str
    kind: str
    mode: str  # train | infer
    dtype: str
    gpu: str
    coverage: float
    speedup: float | None
    measured: bool
    regions: int
    patched: int
    report: dict[str, Any]
    warpforge_version: str


def write_optimize_run(url: str | None, record: OptimizeRunRecord) -> int:
    """Insert one run (migrating the database first); returns its id."""
    db = Database(url)
    db.upgrade()
    with db.session() as s:
        row = OptimizeRun(**asdict(record))
        s.add(row)
        s.flush()
        return int(row.id)
