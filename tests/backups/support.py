"""Running the backup commands as an operator does, and reading the databases they write."""

import os
import sqlite3
import subprocess
import sys
import tarfile
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
from django.apps import apps
from django.conf import settings

from memories.portability.backups.archive import write_archive
from memories.portability.backups.manifest import Manifest
from memories.portability.backups.progress import Progress

ROOT = Path(__file__).resolve().parent.parent.parent


def manage(*args: str, database_url: str, env: dict[str, str] | None = None) -> Any:
    """`python manage.py ARGS` in a process of its own, on the database `database_url`
    names (as an operator runs it, with the server's SECRET_KEY)."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={
            **os.environ,
            "DATABASE_URL": database_url,
            "SECRET_KEY": settings.SECRET_KEY,
            "DEBUG": "1" if settings.DEBUG else "0",
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def query(database_url: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of `sql` in the database `database_url` names (not the test database)."""
    if database_url.startswith("sqlite:"):
        path = database_url[len("sqlite:///") :]
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as database:
            return database.execute(sql).fetchall()
    with psycopg.connect(_libpq(database_url)) as database:
        return database.execute(sql).fetchall()  # type: ignore[arg-type]


def create_postgres_database(database_url: str) -> None:
    name = urlsplit(database_url).path.lstrip("/")
    with psycopg.connect(_libpq(database_url, name="postgres"), autocommit=True) as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]
        server.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]


def drop_postgres_database(database_url: str) -> None:
    name = urlsplit(database_url).path.lstrip("/")
    with psycopg.connect(_libpq(database_url, name="postgres"), autocommit=True) as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]


def _libpq(database_url: str, *, name: str | None = None) -> str:
    parts = urlsplit(database_url)
    if name is not None:
        parts = parts._replace(path=f"/{name}")
    return parts._replace(scheme="postgresql").geturl()


def whole_database() -> dict[str, list[dict[str, Any]]]:
    """Every row of every model's table in the test database, every column."""
    return {
        model._meta.label: list(model._default_manager.order_by("pk").values())
        for model in apps.get_models(include_auto_created=True)
    }


def the_backup(folder: Path) -> Path:
    """The one backup file in `folder`."""
    found = sorted(folder.glob("taproot-*.tar"))
    assert len(found) == 1, found
    return found[0]


def manifest_of(backup: Path) -> Manifest:
    with tarfile.open(backup) as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        return Manifest.from_json(member.read())


def database_of(backup: Path, into: Path) -> Path:
    """The database file inside a backup, extracted into the folder `into`."""
    manifest = manifest_of(backup)
    with tarfile.open(backup) as tar:
        member = tar.extractfile(manifest.file)
        assert member is not None
        target = into / manifest.file
        target.write_bytes(member.read())
    return target


def repacked(backup: Path, folder: Path, **changes: Any) -> Path:
    """A new backup in `folder` of the database in `backup` (or `database=` another
    file), its manifest changed as `changes` say and its checksum made to match: a file
    whose only fault is the one a test puts in it."""
    folder.mkdir(exist_ok=True)
    manifest = manifest_of(backup)
    database = changes.pop("database", None) or database_of(backup, folder)

    def manifest_for(size: int, sha256: str) -> Manifest:
        return replace(manifest, size=size, sha256=sha256, **changes)

    path, _ = write_archive(
        folder, database, manifest_for, taken_at=manifest.created_at, progress=Progress.quiet()
    )
    return path
