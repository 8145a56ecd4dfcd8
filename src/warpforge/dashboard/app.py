"""The FastAPI application factory: pages, ``/api``, packaged static assets, read-only database access.

``create_app(url)`` checks the database once (missing, unreachable or old schema -> every page answers 503
with the one-line reason, the API answers ``{"detail": reason}``), then serves through a single
:class:`warpforge.db.queries.Reader` opened on a read-only URL. Assets come from the package only (no CDN):
``/static/plotly.min.js`` is the file shipped inside the installed ``plotly`` package.

Example::

    >>> from fastapi.testclient import TestClient          # doctest: +SKIP
    >>> client = TestClient(create_app("sqlite:///wf.db"))  # doctest: +SKIP
    >>> client.get("/api/campaigns").json()["total"]        # doctest: +SKIP
    3
"""

from __future__ import annotations

import logging
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException

from warpforge.dashboard.state import DatabaseUnavailable, Settings
from warpforge.db.health import check_database, readonly_url

log = logging.getLogger("warpforge.dashboard")
HERE = Path(__file__).resolve().parent

# Scripts only from this origin: even if escaping were bypassed, an injected inline <script> or onerror=
# handler would not run. Plotly sets inline styles, hence 'unsafe-inline' for styles only.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)


@lru_cache(maxsize=1)
def plotly_js() -> Path:
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: reinstall plotly (pip install --force-reinstall plotly)")
    return path


def _inert_value(value: Any) -> Any:
    """Every string a page prints, control characters and bidi overrides written as escapes (warpforge/inert.py);
    markup stays markup (it is escaped text already, or the page's own)."""
    from markupsafe import Markup

    from warpforge.inert import inert

    if isinstance(value, Markup):
        return Markup(inert(str(value)))  # the same markup, control characters written as escapes
    return inert(value) if isinstance(value, str) else value


def templates() -> Jinja2Templates:
    t = Jinja2Templates(directory=str(HERE / "templates"))  # autoescape is on for .html templates
    from warpforge.dashboard import fmt

    t.env.filters.update(fmt.FILTERS)
    t.env.finalize = _inert_value
    return t


def create_app(url: str | None = None, *, optuna_base: str | None = None, refresh_s: float = 5.0) -> FastAPI:
    """The dashboard app for one database URL (default: ``WARPFORGE_DB``, else warpforge's SQLite file)."""
    from warpforge.db.session import default_url

    url = url or default_url()
    status = check_database(url)
    # No Swagger UI: FastAPI's loads from a CDN and the dashboard works offline; the schema is /api/openapi.json.
    app = FastAPI(
        title="warpforge dashboard",
        version=_version(),
        docs_url=None,
        openapi_url="/api/openapi.json",
        redoc_url=None,
        description="Read-only JSON API over warpforge's stored results; every page uses the same "
        "queries. Lists are paginated with offset/limit.",
    )
    app.state.settings = Settings(url, optuna_base, refresh_s)
    app.state.db_status = status
    app.state.reader = _open_reader(url) if status.ok else None
    app.state.templates = templates()
    if not status.ok:
        log.warning("dashboard database problem: %s", status.problem)
    else:
        # The roofline needs the tasks' flops/bytes models, whose module imports torch (~3 s idle, ~10 s on a
        # loaded machine): import it now in the background so the first charts page does not wait for it.
        threading.Thread(target=_warm_task_models, name="warm-task-models", daemon=True).start()

    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")

    @app.get("/static-lib/plotly.min.js", include_in_schema=False)
    def plotly_asset() -> FileResponse:
        return FileResponse(
            plotly_js(), media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"}
        )

    @app.get("/static-lib/pygments.css", include_in_schema=False)
    def pygments_asset() -> Response:
        from warpforge.dashboard.views import pygments_css

        return Response(pygments_css(), media_type="text/css", headers={"Cache-Control": "public, max-age=86400"})

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Any) -> Response:
        start = time.perf_counter()
        response: Response = await call_next(request)
        # The server's own time for the request (benchmarks/dashboard_routes.py reads it; browsers show it).
        response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - start) * 1e3:.1f}"
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        return response

    @app.exception_handler(DatabaseUnavailable)
    async def db_unavailable(request: Request, exc: DatabaseUnavailable) -> Response:
        return _problem(request, 503, "Database unavailable", exc.problem)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return _problem(request, exc.status_code, "Not found" if exc.status_code == 404 else "Error", str(exc.detail))

    from warpforge.db.session import DatabaseError, DriverError

    @app.exception_handler(DatabaseError)
    async def reader_error(request: Request, exc: DatabaseError) -> Response:
        return _problem(request, 503, "Database unavailable", str(exc))

    from warpforge.errors import UsageError

    # A request asked wrongly (bad sort, cursor, hash prefix) is the reader's UsageError: 400 with its line.
    # Any other exception is our bug: 500, logged with its traceback, never mistaken for the user's fault
    # (every ValueError used to answer 400).
    @app.exception_handler(UsageError)
    async def bad_request(request: Request, exc: UsageError) -> Response:
        return _problem(request, 400, "Bad request", str(exc))

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> Response:
        log.error("dashboard bug on %s", request.url.path, exc_info=exc)
        return _problem(
            request,
            500,
            "Internal error",
            f"{type(exc).__name__} while serving {request.url.path}: a warpforge bug; the server log has the traceback",
        )

    @app.exception_handler(DriverError)  # the database driver's own errors (db/session.py names them)
    async def db_error(request: Request, exc: Exception) -> Response:
        orig = getattr(exc, "orig", None) or exc
        first = (str(orig).strip().splitlines() or ["database error"])[0]
        log.warning("database error on %s: %s", request.url.path, first)
        return _problem(
            request,
            503,
            "Database error",
            f"reading {status.safe_url} failed: {first}; check the server and the --db URL",
        )

    from warpforge.dashboard.api import router as api_router
    from warpforge.dashboard.pages import router as page_router

    app.include_router(api_router)
    app.include_router(page_router)
    return app


def _warm_task_models() -> None:
    try:
        import warpforge.kernels.task  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - the roofline then says it has no work model
        log.info("task models unavailable: %s", exc)


def _open_reader(url: str) -> Any:
    from warpforge.db.queries import Reader

    return Reader(readonly_url(url))


def _problem(request: Request, code: int, title: str, detail: str) -> Response:
    if request.url.path.startswith("/api"):
        return JSONResponse({"detail": detail}, status_code=code)
    t: Jinja2Templates = request.app.state.templates
    ctx = {
        "settings": request.app.state.settings,
        "db": request.app.state.db_status.safe_url,
        "title": title,
        "detail": detail,
        "code": code,
    }
    return t.TemplateResponse(request, "error.html", ctx, status_code=code)


def _version() -> str:
    from warpforge import __version__

    return str(__version__)
