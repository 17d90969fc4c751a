"""What a backup says about itself: which Taproot made it, from which database, at which
schema, holding what. It travels inside the backup file, beside the database.

    {"format": "taproot-backup", "version": 1,
     "created_at": "2026-12-02T03:30:00Z", "reason": "requested",
     "taproot": {"version": "0.1.0", "commit": "189543f…"},
     "database": {"kind": "sqlite", "server_version": "3.40.1",
                  "file": "database.sqlite3", "bytes": 1234, "sha256": "…"},
     "migrations": {"memories": ["0001_initial", …], …},
     "recall": {"ranking": "taproot", "embedder": "wordllama"},
     "counts": {"accounts": 2, "memories": 120, …},
     "tables": {"auth_user": 2, "memories_memory": 120, …}}

`tables` holds the rows of every table, as the backup's own consistent view saw them;
a restore checks the database it wrote against it. `counts` says the same for people.
"""

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memories.portability.backups.errors import BackupError

FORMAT = "taproot-backup"
VERSION = 1
SQLITE = "sqlite"
POSTGRESQL = "postgresql"
KINDS = {SQLITE: "SQLite", POSTGRESQL: "PostgreSQL"}
# Why a backup was made.
REQUESTED = "requested"
BEFORE_RESTORE = "before-restore"


@dataclass(frozen=True)
class Manifest:
    created_at: datetime
    reason: str
    taproot_version: str
    taproot_commit: str | None
    kind: str
    server_version: str
    file: str
    size: int
    sha256: str
    migrations: dict[str, list[str]]
    ranking: str
    embedder: str
    counts: dict[str, int]
    tables: dict[str, int]

    @property
    def kind_name(self) -> str:
        return KINDS[self.kind]

    def describe(self) -> str:
        """One line for people: what the backup holds and who made it when."""
        made = self.created_at.strftime("%Y-%m-%d %H:%M:%S UTC")
        commit = f" (commit {self.taproot_commit[:12]})" if self.taproot_commit else ""
        held = counted(self.counts)
        return (
            f"a {self.kind_name} backup made {made} by Taproot {self.taproot_version}"
            f"{commit}, holding {held}"
        )

    def to_json(self) -> bytes:
        document = {
            "format": FORMAT,
            "version": VERSION,
            "created_at": self.created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "reason": self.reason,
            "taproot": {"version": self.taproot_version, "commit": self.taproot_commit},
            "database": {
                "kind": self.kind,
                "server_version": self.server_version,
                "file": self.file,
                "bytes": self.size,
                "sha256": self.sha256,
            },
            "migrations": self.migrations,
            "recall": {"ranking": self.ranking, "embedder": self.embedder},
            "counts": self.counts,
            "tables": self.tables,
        }
        return (json.dumps(document, indent=1, ensure_ascii=False) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes) -> "Manifest":
        """The manifest in `data`, or BackupError naming what is wrong with it."""
        try:
            document = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise _bad("it is not JSON") from None
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise _bad(f"it does not say it is a {FORMAT}")
        if document.get("version") != VERSION:
            raise BackupError(
                f"The backup is of format version {document.get('version')!r}; this Taproot "
                f"reads version {VERSION}. Restore it with a Taproot as new as the one that "
                "made it."
            )
        taproot = _object(document, "taproot")
        database = _object(document, "database")
        recall = _object(document, "recall")
        kind = _text(database, "kind", "database.kind")
        if kind not in KINDS:
            raise _bad(f"database.kind is {kind!r}, not one of {', '.join(KINDS)}")
        file = _text(database, "file", "database.file")
        if "/" in file or file.startswith("."):
            raise _bad("database.file must be a plain file name")
        sha256 = _text(database, "sha256", "database.sha256")
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise _bad("database.sha256 is not a SHA-256 digest")
        commit = taproot.get("commit")
        if commit is not None and not isinstance(commit, str):
            raise _bad("taproot.commit must be text or null")
        return cls(
            created_at=_time(document, "created_at"),
            reason=_text(document, "reason", "reason"),
            taproot_version=_text(taproot, "version", "taproot.version"),
            taproot_commit=commit,
            kind=kind,
            server_version=_text(database, "server_version", "database.server_version"),
            file=file,
            size=_count(database, "bytes", "database.bytes"),
            sha256=sha256,
            migrations=_migrations(document),
            ranking=_text(recall, "ranking", "recall.ranking"),
            embedder=_text(recall, "embedder", "recall.embedder"),
            counts=_counts(document, "counts"),
            tables=_counts(document, "tables"),
        )


# The counts a manifest shows people, each with its word for one.
ONE = {
    "accounts": "account",
    "memories": "memory",
    "revisions": "revision",
    "snapshots": "snapshot",
    "closings": "closing",
}


def counted(counts: dict[str, int]) -> str:
    """ "2 accounts, 1 memory, 0 closings" """
    return ", ".join(
        f"{count} {ONE.get(name, name) if count == 1 else name}" for name, count in counts.items()
    )


def _bad(problem: str) -> BackupError:
    return BackupError(f"The backup's manifest cannot be read: {problem}.")


def _object(document: dict[str, Any], key: str) -> dict[str, Any]:
    value = document.get(key)
    if not isinstance(value, dict):
        raise _bad(f"{key} must be an object")
    return value


def _text(document: dict[str, Any], key: str, where: str) -> str:
    value = document.get(key)
    if not isinstance(value, str) or not value:
        raise _bad(f"{where} must be non-empty text")
    return value


def _count(document: dict[str, Any], key: str, where: str) -> int:
    value = document.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _bad(f"{where} must be a whole number")
    return value


def _time(document: dict[str, Any], key: str) -> datetime:
    text = _text(document, key, key)
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise _bad(f"{key} is not a time") from None
    if value.tzinfo is None:
        raise _bad(f"{key} has no time zone")
    return value.astimezone(UTC)


def _counts(document: dict[str, Any], key: str) -> dict[str, int]:
    counts = _object(document, key)
    return {name: _count(counts, name, f"{key}.{name}") for name in counts}


def _migrations(document: dict[str, Any]) -> dict[str, list[str]]:
    applied = _object(document, "migrations")
    for app, names in applied.items():
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise _bad(f"migrations.{app} must be a list of migration names")
    return applied
