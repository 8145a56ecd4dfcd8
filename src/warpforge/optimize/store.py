"""A ``warpforge optimize`` report stored in the results database (``wf_optimize_runs``), for the dashboard's
``/optimize`` pages.

The columns the run list shows are taken from the report; the report itself is stored whole, as its JSON
document (what ``--json`` prints: a value that is not finite is null, which PostgreSQL's JSON accepts).

Example::

    >>> run_id = store_report("sqlite:///wf.db", report)     # doctest: +SKIP
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from warpforge import __version__
from warpforge.optimize.report import OptimizeReport

if TYPE_CHECKING:
    from warpforge.db.optimize_store import OptimizeRunRecord


def run_record(report: OptimizeReport, package_source: dict[str, Any] | None = None) -> OptimizeRunRecord:
    """The ``wf_optimize_runs`` row of a report: the listed columns taken from it, and the report whole, with
    ``package_source`` under that key (the patches, the target's files and settings, the campaigns:
    ``warpforge export --optimize-run ID`` writes the package again from it, on any machine with the database)."""
    from warpforge.db.optimize_store import OptimizeRunRecord

    s = report.speedup
    measured = s.measured is not None
    return OptimizeRunRecord(
        target=report.target[:1000],
        kind=report.kind,
        mode="train" if report.train else "infer",
        dtype=report.dtype,
        gpu=report.gpu,
        coverage=report.coverage,
        speedup=s.measured if measured else s.estimated,
        measured=measured,
        regions=len(report.regions),
        patched=sum(r.patched for r in report.regions),
        report=json.loads(report.model_dump_json()) | ({"package_source": package_source} if package_source else {}),
        warpforge_version=__version__,
    )


def store_report(url: str | None, report: OptimizeReport, package_source: dict[str, Any] | None = None) -> int:
    """Insert the report as one run (migrating the database first); returns the run's id."""
    from warpforge.db.optimize_store import write_optimize_run

    return write_optimize_run(url, run_record(report, package_source))
