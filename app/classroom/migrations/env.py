"""Alembic's environment for the live class: the URL comes from app/classroom/db.py (never an
ini file), and on PostgreSQL an advisory lock makes replicas starting together migrate one at
a time."""

from alembic import context
from sqlalchemy import create_engine, text

from app.classroom.models import metadata

# Any fixed number: the key of the advisory lock the migrating process holds.
MIGRATION_LOCK = 3_4_2026

config = context.config
url = config.attributes["url"]
engine = create_engine(url)
with engine.connect() as connection:
    postgres = connection.dialect.name == "postgresql"
    if postgres:
        connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK})
        connection.commit()
    try:
        context.configure(connection=connection, target_metadata=metadata,
                          render_as_batch=not postgres)
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
    finally:
        if postgres:
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK})
            connection.commit()
engine.dispose()
