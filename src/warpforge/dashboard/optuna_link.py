"""optuna-dashboard beside the dashboard, on its own port, and links from campaigns to their studies.

optuna-dashboard cannot be mounted under a sub-path (its JS bundle hard-codes ``/static``, ``/api`` and
``/dashboard``; docs/design.md §8), so ``--optuna-port`` runs it as a second server in a daemon thread on the same
read-only database URL. A campaign's studies are named ``<campaign>:<task>:<variant>:<hash12>``
(``search.campaign.study_name``); the links use Optuna's public storage API (study names and ids), never
its tables.

Example::

    >>> links = study_links("sqlite:///wf.db", "demo", "http://127.0.0.1:8788")   # doctest: +SKIP
    >>> links[0].url                                                               # doctest: +SKIP
    'http://127.0.0.1:8788/dashboard/studies/1'
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

log = logging.getLogger("warpforge.dashboard")


@dataclass(frozen=True)
class StudyLink:
    name: str
    url: str


def _storage(url: str) -> Any:
    import optuna

    from warpforge.db.health import readonly_url

    # skip_table_creation/compatibility check: the storage only reads (the URL refuses writes anyway).
    return optuna.storages.RDBStorage(readonly_url(url), skip_table_creation=True, skip_compatibility_check=True)


def study_links(url: str, campaign: str, base: str) -> tuple[StudyLink, ...]:
    """Links into optuna-dashboard for every study of ``campaign`` (empty when Optuna has none)."""
    try:
        storage = _storage(url)
        names = [s.study_name for s in storage.get_all_studies() if s.study_name.startswith(campaign + ":")]
        links = tuple(
            StudyLink(n, f"{base}/dashboard/studies/{storage.get_study_id_from_name(n)}") for n in sorted(names)
        )
        storage.remove_session()
        return links
    except Exception as exc:  # noqa: BLE001 - no Optuna tables yet: no links, the page still renders
        log.info("no optuna studies for %s: %s", quote(campaign), exc)
        return ()


READ_ONLY_REASON = (
    "read-only: warpforge serves this database read-only, so studies and trials cannot be created, "
    "changed or deleted here"
)
_READS = frozenset({"GET", "HEAD", "OPTIONS"})


def read_only(app: Any) -> Any:
    """Wrap optuna-dashboard's WSGI app so that every write answers 403 with a one-line ``reason``.

    optuna-dashboard 0.21 has no read-only mode: its Create/Delete/Note controls are always drawn, and on our
    read-only storage each answered a 500. Its front end shows an error response's ``reason`` field,
    so the user now reads why instead of "Internal Server Error". An allowlist of read methods, not a list of
    write routes: a route added upstream is refused too.
    """
    import json

    body = json.dumps({"reason": READ_ONLY_REASON}).encode()

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("REQUEST_METHOD", "GET").upper() in _READS:
            return app(environ, start_response)
        start_response("403 Forbidden", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    return wrapped


def serve_optuna_dashboard(url: str, host: str, port: int) -> threading.Thread:
    """Start optuna-dashboard (writes refused, :func:`read_only`) on ``host:port`` in a daemon thread; raises
    ImportError with the install hint."""
    try:
        import optuna_dashboard
    except ImportError as exc:
        raise ImportError("optuna-dashboard is not installed: pip install optuna-dashboard") from exc
    from wsgiref.simple_server import make_server

    server = make_server(host, port, read_only(optuna_dashboard.wsgi(_storage(url))))
    thread = threading.Thread(target=server.serve_forever, name="optuna-dashboard", daemon=True)
    thread.start()
    return thread
