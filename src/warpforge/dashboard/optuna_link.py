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

    from warpforge.dashboard.health import readonly_url

    # skip_table_creation/compatibility check: the storage only reads (the URL refuses writes anyway).
    return optuna.storages.RDBStorage(readonly_url(url), skip_table_creation=True, skip_compatibility_check=True)


def study_links(url: str, campaign: str, base: str) -> tuple[StudyLink, ...]:
    """Links into optuna-dashboard for every study of ``campaign`` (empty when Optuna has none)."""
    try:
        storage = _storage(url)
        names = [s.study_name for s in storage.get_all_studies() if s.study_name.startswith(campaign + ":")]
        links = tuple(StudyLink(n, f"{base}/dashboard/studies/{storage.get_study_id_from_name(n)}")
                      for n in sorted(names))
        storage.remove_session()
        return links
    except Exception as exc:  # noqa: BLE001 - no Optuna tables yet: no links, the page still renders
        log.info("no optuna studies for %s: %s", quote(campaign), exc)
        return ()


def serve_optuna_dashboard(url: str, host: str, port: int) -> threading.Thread:
    """Start optuna-dashboard on ``host:port`` in a daemon thread; raises ImportError with the install hint."""
    try:
        import optuna_dashboard
    except ImportError as exc:
        raise ImportError("optuna-dashboard is not installed: pip install optuna-dashboard") from exc
    storage = _storage(url)
    thread = threading.Thread(target=optuna_dashboard.run_server, args=(storage,),
                              kwargs={"host": host, "port": port}, name="optuna-dashboard", daemon=True)
    thread.start()
    return thread
