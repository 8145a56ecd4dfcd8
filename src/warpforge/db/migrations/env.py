"""Alembic environment: warpforge's own version table, and Optuna's tables left alone."""

from __future__ import annotations

from alembic import context

from warpforge.db.models import Base
from warpforge.db.session import VERSION_TABLE


def include_object(obj, name, type_, reflected, compare_to):  # type: ignore[no-untyped-def]
    if type_ == "table":
        return bool(name) and name.startswith("wf_")
    return True


def run_migrations_online() -> None:
    engine = context.config.attributes.get("engine")
    if engine is None:
        from sqlalchemy import create_engine

        engine = create_engine(context.config.get_main_option("sqlalchemy.url") or "sqlite://")
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # Batch migrations re-create SQLite tables (DROP + rename); with foreign keys on, dropping a
            # referenced table (wf_variants, wf_campaigns) fails. Alembic's documented remedy: off for the
            # migration (the pragma only takes effect outside a transaction, hence before it), on again after.
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            version_table=VERSION_TABLE,
            include_object=include_object,
            render_as_batch=sqlite,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
        if sqlite:
            connection.exec_driver_sql("PRAGMA foreign_keys=ON")
            connection.commit()


run_migrations_online()
