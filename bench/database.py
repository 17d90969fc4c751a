"""The benchmark's own databases, and setting Django up on one of them.

Each measurement runs in a child process that calls `setup_django(url)` before it
imports anything that touches models, so one command can measure several databases.
"""

import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

DEFAULT_POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/taproot_bench"


@dataclass(frozen=True)
class BenchDatabase:
    backend: str  # "sqlite" or "postgres"
    url: str

    @property
    def label(self) -> str:
        return "SQLite" if self.backend == "sqlite" else "PostgreSQL"


def sqlite_database(directory: Path, name: str) -> BenchDatabase:
    return BenchDatabase("sqlite", f"sqlite:///{(directory / f'{name}.sqlite3').resolve()}")


def postgres_database(base_url: str, suffix: str) -> BenchDatabase:
    parts = urlsplit(base_url)
    name = parts.path.lstrip("/") or "taproot_bench"
    return BenchDatabase("postgres", urlunsplit(parts._replace(path=f"/{name}_{suffix}")))


def _postgres_parts(url: str) -> tuple[str, str]:
    """The maintenance-database URL to connect to, and the database name."""
    parts = urlsplit(url.replace("postgres://", "postgresql://", 1))
    return urlunsplit(parts._replace(path="/postgres")), parts.path.lstrip("/")


def postgres_reachable(url: str) -> str | None:
    """None when PostgreSQL answers at this URL's server, else why not."""
    import psycopg

    maintenance, _ = _postgres_parts(url)
    try:
        with psycopg.connect(maintenance, connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return str(exc).strip().splitlines()[0]


def recreate(database: BenchDatabase) -> None:
    """Start from an empty database (nothing connected to it may stay open)."""
    if database.backend == "sqlite":
        path = Path(database.url[len("sqlite:///") :])
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        return
    import psycopg
    from psycopg import sql

    maintenance, name = _postgres_parts(database.url)
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def exists(database: BenchDatabase) -> bool:
    if database.backend == "sqlite":
        return Path(database.url[len("sqlite:///") :]).exists()
    import psycopg

    maintenance, name = _postgres_parts(database.url)
    with psycopg.connect(maintenance, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        return found is not None


def copy_database(source: BenchDatabase, target: BenchDatabase) -> None:
    """Make `target` an exact copy of `source` (which nothing may be connected to)."""
    if source.backend == "sqlite":
        drop(target)
        shutil.copyfile(source.url[len("sqlite:///") :], target.url[len("sqlite:///") :])
        return
    import psycopg
    from psycopg import sql

    maintenance, name = _postgres_parts(target.url)
    _, template = _postgres_parts(source.url)
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )


def drop(database: BenchDatabase) -> None:
    if database.backend == "sqlite":
        path = Path(database.url[len("sqlite:///") :])
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    import psycopg
    from psycopg import sql

    maintenance, name = _postgres_parts(database.url)
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def bench_environment(url: str) -> dict[str, str]:
    """Environment for a process that serves or measures this database: production-like
    (DEBUG off, so Django keeps no query log)."""
    return {
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "taproot_site.settings",
        "DEBUG": "0",
        "SECRET_KEY": os.environ.get("TAPROOT_BENCH_SECRET_KEY") or secrets.token_urlsafe(50),
    }


def setup_django(url: str, *, migrate: bool = True) -> None:
    import django

    os.environ.update(bench_environment(url))
    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)
        call_command("createcachetable", verbosity=0)


def analyze() -> None:
    """Refresh the planner's statistics as a deployment has them: Taproot analyses SQLite
    at every start (migrate) and after an import; PostgreSQL's autovacuum vacuums and
    analyses soon after a bulk load, as reindex_taproot does at its end."""
    from memories.maintenance import refresh_planner_statistics

    refresh_planner_statistics(vacuum=True)


def checkpoint() -> None:
    """Fold SQLite's write-ahead log into the main file, so the file alone is the database."""
    from django.db import connection

    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
