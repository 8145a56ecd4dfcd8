"""What every route reads from the app's state: the settings, the Reader, and page rendering.

Its own module so that the routers (``api``, ``pages``) and the app factory (``app``) all depend on it,
never on each other.

Example::

    >>> from warpforge.dashboard.state import get_reader, html   # inside a route: reader = get_reader(request)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from warpforge.db.health import DbStatus


class DatabaseUnavailable(Exception):
    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


@dataclass(frozen=True)
class Settings:
    db_url: str  # the URL as given (shown only through safe_url)
    optuna_base: str | None = None  # e.g. http://127.0.0.1:8788 when optuna-dashboard runs beside us
    refresh_s: float = 5.0  # polling period of live pages (running campaigns)


def get_reader(request: Request) -> Any:
    """The app's Reader, or DatabaseUnavailable with the start-up check's reason."""
    reader = request.app.state.reader
    if reader is None:
        status: DbStatus = request.app.state.db_status
        raise DatabaseUnavailable(status.problem)
    return reader


def html(request: Request, name: str, context: dict[str, Any]) -> HTMLResponse:
    """Render a page with the settings every page needs (nav, optuna link, refresh period)."""
    t: Jinja2Templates = request.app.state.templates
    settings: Settings = request.app.state.settings
    ctx = {"settings": settings, "db": request.app.state.db_status.safe_url, **context}
    return t.TemplateResponse(request, name, ctx)
