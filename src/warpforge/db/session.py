"""Database URLs, engines, migrations and transactional sessions.

One URL (``--db``, else ``WARPFORGE_DB``, else a SQLite file in the user's data dir) holds warpforge's
``wf_*`` tables and Optuna's RDBStorage tables. Schema changes go through Alembic only.

Readers and writers open it differently:

- ``Database(url)`` (a writer: ``run``, ``db upgrade``, ``plan ... --db``) creates a missing SQLite file,
  and its directory, saying so on the ``warpforge.db`` logger (the CLI prints it as a ``note:`` line).
- ``Database(url, create=False)`` (a reader: ``results``, ``best``, the dashboard) creates nothing: a
  SQLite file that does not exist raises :class:`DatabaseURLError` at once, before any connection.

Every failure is a :class:`DatabaseError` whose message is one line naming the URL (password masked) and
what to do. ``DatabaseError.usage`` tells the CLI's exit code: True (exit 2) when the URL itself is wrong
(unknown scheme, unparseable, no such file, a file that is not a database), False (exit 1) when a right
URL cannot be used now (server unreachable, read-only file).

Example::

    >>> from warpforge.db.session import Database
    >>> db = Database("sqlite:///:memory:")  # doctest: +SKIP
    >>> db.upgrade()                         # doctest: +SKIP
    >>> Database("sqlite:////no/such/wf.db", create=False)  # doctest: +SKIP
    Traceback (most recent call last):
    DatabaseURLError: no database at /no/such/wf.db (sqlite:////no/such/wf.db): ...
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import platformdirs
from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, NoSuchModuleError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import DatabaseError as SQLDatabaseError
from sqlalchemy.orm import Session, sessionmaker

from warpforge.errors import UsageError, WarpforgeError

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
VERSION_TABLE = "wf_alembic_version"
EXAMPLE_URLS = "sqlite:///PATH/wf.db (a file) or postgresql://USER:PASSWORD@HOST/DB"
log = logging.getLogger("warpforge.db")


class DatabaseError(WarpforgeError, RuntimeError):
    """The database cannot be used; the message says what to do."""

    usage = False  # the URL is right but cannot be used now (exit 1)


class DatabaseURLError(DatabaseError, UsageError):
    """The URL names no usable database (bad scheme, no such file, not a database): a usage error (exit 2)."""

    usage = True


# What a driver raises, for callers above the read layer that must recognise one without importing SQLAlchemy
# (the CLI's error boundary: an error that reached it unexplained, e.g. through Optuna's storage).
DRIVER_ERRORS: tuple[type[BaseException], ...] = (SQLAlchemyError,)
DriverError: type[Exception] = SQLAlchemyError  # the same, as one class (the dashboard's exception handler)


def default_url() -> str:
    env = os.environ.get("WARPFORGE_DB")
    if env:
        return env
    path = Path(platformdirs.user_data_dir("warpforge")) / "warpforge.db"
    return f"sqlite:///{path}"


def mask_url(url: str) -> str:
    """The URL with any password hidden, even when SQLAlchemy cannot parse it."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - unparseable: mask a user:password@ part by hand
        return re.sub(r"(://[^/:@]*:)[^@/]*@", r"\1***@", url)


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names (``file:`` URIs included); None for in-memory and server URLs."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    name = parsed.database
    if name.startswith("file:"):
        name = name.removeprefix("file:").split("?", 1)[0]
        if not name or name == ":memory:" or parsed.query.get("mode") == "memory":
            return None
    return Path(name)


class Database:
    """An engine plus its session factory; ``upgrade()`` brings the schema to head.

    ``create=False`` opens an existing database only (readers); ``create_dirs=False`` never makes the SQLite
    file's directory (callers that only want ``safe_url``).
    """

    def __init__(self, url: str | None = None, *, create: bool = True, create_dirs: bool = True) -> None:
        self.url = url or default_url()
        self.path = sqlite_file(self.url)
        try:
            parsed = make_url(self.url)
        except ArgumentError:
            raise DatabaseURLError(f"cannot parse database URL {self.safe_url!r}: use {EXAMPLE_URLS}") from None
        if self.path is not None and not create and not self.path.is_file():
            raise DatabaseURLError(
                f"no database at {self.path} ({self.safe_url}): nothing is stored there; check --db or "
                "WARPFORGE_DB, or run a campaign first (warpforge run)"
            )
        if self.path is not None and create and create_dirs and not self.path.parent.is_dir():
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise DatabaseError(
                    f"cannot create {self.path.parent} for {self.safe_url}: {exc.strerror}; pass a writable --db URL"
                ) from None
            log.warning("created directory %s for the database %s", self.path.parent, self.safe_url)
        try:
            self.engine: Engine = create_engine(self.url, future=True, pool_pre_ping=True)
        except NoSuchModuleError:
            raise DatabaseURLError(
                f"unknown database scheme {parsed.drivername!r} in {self.safe_url}: use {EXAMPLE_URLS}"
            ) from None
        except ImportError as exc:
            raise DatabaseURLError(
                f"the driver for {parsed.drivername} ({self.safe_url}) is not installed "
                f"({exc}): pip install it, or use {EXAMPLE_URLS}"
            ) from None
        except (SQLAlchemyError, ValueError) as exc:
            raise DatabaseURLError(
                f"bad database URL {self.safe_url}: {_first_line(exc)}; use {EXAMPLE_URLS}"
            ) from None
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def safe_url(self) -> str:
        """The URL with any password hidden (secrets are never printed)."""
        return mask_url(self.url)

    def explain(self, exc: BaseException, doing: str) -> DatabaseError:
        """One line for a driver error: what failed on which URL, and what to do (never a traceback)."""
        orig = getattr(exc, "orig", None) or exc
        msg = _first_line(orig)
        low = msg.lower()
        where = f"{self.safe_url}"
        if self.path is not None:  # SQLite: a file, never a server
            if "not a database" in low or "encrypted" in low or "malformed" in low:
                return DatabaseURLError(
                    f"{self.path} is not a SQLite database ({where}): {msg}; pass --db with a "
                    "warpforge database file, or move this file aside"
                )
            if "readonly" in low or "read-only" in low:
                return DatabaseError(
                    f"{doing} failed on {where}: {msg}; the database is read-only: pass a writable --db URL"
                )
            if "unable to open" in low:
                return DatabaseError(
                    f"cannot open {where}: {msg}; check that {self.path.parent} exists and is writable"
                )
            if "locked" in low:
                return DatabaseError(
                    f"{doing} failed on {where}: {msg}; another process holds the file: retry when it is done"
                )
            return DatabaseError(f"{doing} failed on {where}: {msg}; check the file and --db")
        if self.engine.dialect.name == "sqlite":  # in-memory or URI forms
            hint = "the database is read-only: pass a writable --db URL" if "readonly" in low else "check --db"
            return DatabaseError(f"{doing} failed on {where}: {msg}; {hint}")
        if isinstance(exc, OperationalError) and doing == "connect":
            return DatabaseError(
                f"cannot connect to {where}: {msg}; check the server is running and the URL "
                "(host, port, user, database name) is right"
            )
        hint = "the database is read-only: pass a writable --db URL" if "read-only" in low else "check --db"
        return DatabaseError(f"{doing} failed on {where}: {msg}; {hint}")

    def check(self) -> None:
        """Connect once and read the schema header; raise DatabaseError with advice when that fails."""
        try:
            with self.engine.connect() as conn:
                if self.engine.dialect.name == "sqlite":
                    # Connecting opens no file page; this reads the header, so a non-database file fails here.
                    conn.exec_driver_sql("PRAGMA schema_version")
        except SQLDatabaseError as exc:
            raise self.explain(exc, "connect") from None

    def upgrade(self, revision: str = "head") -> None:
        """Apply Alembic migrations up to ``revision`` (head by default; idempotent)."""
        self._migrate(revision, down=False)

    def downgrade(self, revision: str) -> None:
        """Undo Alembic migrations down to ``revision``."""
        self._migrate(revision, down=True)

    def _migrate(self, revision: str, down: bool) -> None:
        from alembic import command
        from alembic.config import Config

        self.check()
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
        cfg.attributes["engine"] = self.engine
        try:
            (command.downgrade if down else command.upgrade)(cfg, revision)
        except SQLDatabaseError as exc:
            raise self.explain(exc, "migration") from None

    def current_revision(self) -> str | None:
        try:
            with self.engine.connect() as conn:
                if not inspect(conn).has_table(VERSION_TABLE):
                    return None
                from sqlalchemy import text

                return conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
        except SQLDatabaseError as exc:
            raise self.explain(exc, "reading the schema revision") from None

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A transaction: committed on success, rolled back on any error (nothing half-written)."""
        session = self._sessions()
        try:
            yield session
            session.commit()
        except IntegrityError:
            session.rollback()
            raise
        except SQLDatabaseError as exc:
            session.rollback()
            raise self.explain(exc, "database access") from exc
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


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
