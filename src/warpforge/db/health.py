"""Read-only database URLs and the start-up check that turns a bad database into one clear sentence.

The dashboard must never write: SQLite is opened with ``mode=ro`` (the OS refuses writes), PostgreSQL with
``default_transaction_read_only=on`` (the server refuses them). A missing file, an unreachable server or a
schema older than this warpforge's migrations each give a :class:`DbStatus` whose ``problem`` says what to
do; the CLI prints it as one line and the app shows it as a page.

Example::

    >>> readonly_url("sqlite:////tmp/wf.db")
    'sqlite:///file:/tmp/wf.db?mode=ro&uri=true'
    >>> check_database("sqlite:////nonexistent/wf.db").ok
    False
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from urllib.parse import quote

from warpforge.db.session import mask_url, sqlite_file

log = logging.getLogger("warpforge.db")


@dataclass(frozen=True)
class DbStatus:
    ok: bool
    safe_url: str
    revision: str | None = None
    head: str | None = None
    problem: str = ""  # one line: what is wrong and what to do
    usage: bool = False  # the URL names no database (missing file, bad URL): exit 2 by the README's rule


def readonly_url(url: str) -> str:
    """A URL whose connections cannot write (the database engine itself refuses)."""
    path = sqlite_file(url)
    if path is not None:
        # SQLite URI filenames: the OS-level read-only open; a write raises "attempt to write a readonly database".
        return f"sqlite:///file:{quote(str(path.resolve()))}?mode=ro&uri=true"
    if url.startswith("postgresql"):
        from sqlalchemy.engine import make_url

        u = make_url(url)
        options = (str(u.query.get("options", "")) + " -c default_transaction_read_only=on").strip()
        return u.update_query_dict({"options": options}).render_as_string(hide_password=False)
    return url


def head_revision() -> str | None:
    """The newest Alembic revision this warpforge ships (read from the migration scripts, no database)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from warpforge.db.session import MIGRATIONS_DIR

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return ScriptDirectory.from_config(cfg).get_current_head()


def check_database(url: str) -> DbStatus:
    """Can the dashboard read this database? Never raises; the answer's ``problem`` says what to do."""
    from sqlalchemy import create_engine, inspect, text
    from sqlalchemy.exc import SQLAlchemyError

    shown = mask_url(url)
    path = sqlite_file(url)
    if path is not None and not path.is_file():
        return DbStatus(
            False,
            shown,
            usage=True,
            problem=f"no database at {path}: run a campaign first (warpforge run TASK --db {shown}) or "
            "pass the right --db URL",
        )
    head = head_revision()
    try:
        engine = create_engine(readonly_url(url))
    except (SQLAlchemyError, ImportError, ValueError) as exc:
        return DbStatus(
            False, shown, head=head, usage=True, problem=f"bad database URL {shown}: {exc}; e.g. sqlite:///wf.db"
        )
    try:
        with engine.connect() as conn:
            from warpforge.db.session import VERSION_TABLE

            if not inspect(conn).has_table(VERSION_TABLE):
                return DbStatus(
                    False,
                    shown,
                    head=head,
                    problem=f"{shown} holds no warpforge tables: run "
                    f"`warpforge db upgrade --db {shown}` or point --db at a results database",
                )
            revision = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
    except SQLAlchemyError as exc:
        orig = getattr(exc, "orig", None) or exc
        first = (str(orig).strip().splitlines() or ["unknown error"])[0]
        return DbStatus(
            False,
            shown,
            head=head,
            problem=f"cannot read {shown}: {first}; check the server is running and the --db URL is right",
        )
    finally:
        engine.dispose()
    if head is not None and revision != head:
        return DbStatus(
            False,
            shown,
            revision,
            head,
            problem=f"{shown} is at schema revision {revision}, this "
            f"warpforge needs {head}: run `warpforge db upgrade --db {shown}` (the dashboard never "
            "migrates)",
        )
    return DbStatus(True, shown, revision, head)
