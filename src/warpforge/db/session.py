"""Database URLs, engines, migrations and transactional sessions.

One URL (``--db``, else ``WARPFORGE_DB``, else a SQLite file in the user's data dir) holds warpforge's
``wf_*`` tables and Optuna's RDBStorage tables. Schema changes go through Alembic only.

Example::

    >>> from warpforge.db.session import Database
    >>> db = Database("sqlite:///:memory:")  # doctest: +SKIP
    >>> db.upgrade()                         # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import platformdirs
from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
VERSION_TABLE = "wf_alembic_version"


class DatabaseError(RuntimeError):
    """The database cannot be used; the message says what to do."""


def default_url() -> str:
    env = os.environ.get("WARPFORGE_DB")
    if env:
        return env
    path = Path(platformdirs.user_data_dir("warpforge")) / "warpforge.db"
    return f"sqlite:///{path}"


def sqlite_path(url: str) -> Path | None:
    """The file of a plain SQLite URL (None for other databases, in-memory and URI forms)."""
    if url.startswith("sqlite:///") and ":memory:" not in url and "file:" not in url:
        return Path(url.removeprefix("sqlite:///"))
    return None


class Database:
    """An engine plus its session factory; ``upgrade()`` brings the schema to head."""

    def __init__(self, url: str | None = None, *, create_dirs: bool = True) -> None:
        self.url = url or default_url()
        path = sqlite_path(self.url)
        if path is not None and create_dirs:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise DatabaseError(f"cannot create {path.parent}: {exc.strerror}; pass a writable --db URL") from exc
        try:
            self.engine: Engine = create_engine(self.url, future=True, pool_pre_ping=True)
        except (SQLAlchemyError, ImportError, ValueError) as exc:
            raise DatabaseError(f"bad database URL {self.safe_url}: {exc}; e.g. sqlite:///wf.db") from exc
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def safe_url(self) -> str:
        """The URL with any password hidden (secrets are never printed)."""
        try:
            from sqlalchemy.engine import make_url

            return make_url(self.url).render_as_string(hide_password=True)
        except Exception:
            return "<unparseable URL>"

    def check(self) -> None:
        """Connect once; raise DatabaseError with advice when the database is unreachable."""
        try:
            with self.engine.connect():
                pass
        except OperationalError as exc:
            raise DatabaseError(
                f"cannot connect to {self.safe_url}: {str(exc.orig).strip().splitlines()[0]}; "
                "check the server is running and the URL is right"
            ) from exc

    def upgrade(self) -> None:
        """Apply Alembic migrations up to head (idempotent)."""
        from alembic import command
        from alembic.config import Config

        self.check()
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
        cfg.attributes["engine"] = self.engine
        try:
            command.upgrade(cfg, "head")
        except OperationalError as exc:
            msg = str(exc.orig).strip().splitlines()[0]
            hint = "the database is read-only: pass a writable --db URL" if "readonly" in msg else "check --db"
            raise DatabaseError(f"cannot migrate {self.safe_url}: {msg}; {hint}") from exc

    def current_revision(self) -> str | None:
        with self.engine.connect() as conn:
            if not inspect(conn).has_table(VERSION_TABLE):
                return None
            from sqlalchemy import text

            return conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A transaction: committed on success, rolled back on any error (nothing half-written)."""
        session = self._sessions()
        try:
            yield session
            session.commit()
        except OperationalError as exc:
            session.rollback()
            msg = str(exc.orig).strip().splitlines()[0]
            hint = "the database is read-only: pass a writable --db URL" if "readonly" in msg else "check --db"
            raise DatabaseError(f"database write failed on {self.safe_url}: {msg}; {hint}") from exc
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()


def _sqlite_pragmas(dbapi_conn: object, _record: object) -> None:
    cursor = dbapi_conn.cursor()  # type: ignore[attr-defined]
    # 30 s busy timeout rides out Optuna's writes; WAL lets the dashboard read while a campaign writes
    # (it needs a writable file, so a read-only database keeps its journal mode).
    cursor.execute("PRAGMA busy_timeout=30000")
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        # With WAL, NORMAL is durable against a killed process (only an OS crash can lose the last
        # commits) and skips an fsync per commit: Optuna commits ~17 times per evaluation.
        cursor.execute("PRAGMA synchronous=NORMAL")
    except Exception:  # noqa: BLE001 - read-only database
        pass
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
