"""The backup file: one tar archive named with the time it was taken, holding the
database (a SQLite file, or a pg_dump archive in its custom format) and, last, the
manifest with the database's SHA-256. One file, so a copy kept elsewhere is whole or
plainly not; `tar -xf` opens it with nothing but standard tools.

The archive is written under a hidden temporary name and given its own only once
complete, so a backup that fails midway never leaves a file that looks like a backup.
Backups hold every account's data and password hashes: the files are readable by their
owner only, and so is a folder the command creates.
"""

import hashlib
import io
import os
import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

from memories.portability.backups.errors import BackupError
from memories.portability.backups.manifest import Manifest
from memories.portability.backups.progress import Progress

MANIFEST = "manifest.json"
# A manifest is a few kilobytes; reading more than this of one would be reading garbage.
MANIFEST_LIMIT = 1024 * 1024
# taproot-20261202T033000Z.tar; a second one in the same second gets -2, then -3.
NAME = re.compile(r"^taproot-(?P<stamp>\d{8}T\d{6}Z)(?:-(?P<sequence>\d+))?\.tar$")
CHUNK = 1024 * 1024


@dataclass(frozen=True, order=True)
class BackupFile:
    """A backup in a folder, ordered by the time in its name (then its sequence)."""

    stamp: str
    sequence: int
    path: Path


def backups_in(folder: Path) -> list[BackupFile]:
    """The backups in `folder` (regular files named as this module names them, never a
    link), oldest first."""
    found = []
    for path in folder.iterdir():
        match = NAME.match(path.name)
        if match and not path.is_symlink() and path.is_file():
            found.append(BackupFile(match["stamp"], int(match["sequence"] or 1), path))
    return sorted(found)


@dataclass(frozen=True)
class Pruned:
    """What retention did: the backups deleted, and those left alone because their
    names carry a time later than now (a clock that once ran ahead)."""

    removed: list[Path]
    from_the_future: list[Path]


def prune(folder: Path, *, keep: int, written: Path | None = None, now: datetime) -> Pruned:
    """Delete all but the newest `keep` backups in `folder`. Files not named like a
    backup, links and anything not a regular file are never touched; nor is `written`,
    the backup just made; nor a backup stamped later than `now`, which is neither
    counted nor deleted, since its time cannot be trusted to say how old it is."""
    if keep < 1:
        raise BackupError("--keep must be at least 1: it counts the backups to keep.")
    latest = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    backups = backups_in(folder)
    future = [b.path for b in backups if b.stamp > latest and b.path != written]
    counted = [b for b in backups if b.stamp <= latest or b.path == written]
    removed = []
    for old in counted[:-keep]:
        if old.path == written:
            continue
        old.path.unlink(missing_ok=True)
        removed.append(old.path)
    return Pruned(removed, future)


def remove_stale_work(folder: Path, *, now: datetime, older_than: timedelta) -> list[Path]:
    """Delete the hidden `.taproot-*` work folders and partial files that a backup or
    restore killed midway left in `folder`, once older than `older_than`: each holds a
    whole copy of the database. Younger ones may belong to a backup running now."""
    removed = []
    cutoff = (now - older_than).timestamp()
    for path in folder.iterdir():
        if not path.name.startswith(".taproot-") or path.is_symlink():
            continue
        try:
            if path.stat().st_mtime > cutoff:
                continue
            if path.is_dir():
                shutil.rmtree(path)
            elif path.is_file():
                path.unlink()
            else:
                continue
        except OSError:
            continue  # someone else's to clean; the next backup tries again
        removed.append(path)
    return removed


def prepare_folder(folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise BackupError(f"{folder} is a file: --output names the folder backups go to.")
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        raise BackupError(f"Cannot make the folder {folder}: {error.strerror or error}.") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BackupError(f"Cannot write to {folder}: choose another folder with --output.")


def write_archive(
    folder: Path,
    database: Path,
    manifest_for: Callable[[int, str], Manifest],
    *,
    taken_at: datetime,
    progress: Progress,
) -> tuple[Path, Manifest]:
    """Pack `database` and its manifest into a new backup in `folder`; the path and the
    manifest. `manifest_for(size, sha256)` makes the manifest once the database has been
    read (and hashed) into the archive."""
    size = database.stat().st_size
    digest = hashlib.sha256()
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".taproot-", suffix=".partial")
    except OSError as error:
        raise BackupError(f"Cannot write in {folder}: {error.strerror or error}.") from None
    partial = Path(name)
    try:
        with (
            os.fdopen(fd, "wb") as raw,
            tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar,
        ):
            member = tarfile.TarInfo(database.name)
            member.size, member.mtime, member.mode = size, int(taken_at.timestamp()), 0o600
            with (
                database.open("rb") as source,
                progress.bar("Packing", total=size, unit="B") as bar,
            ):
                tar.addfile(member, _Hashing(source, digest, bar.update))
            manifest = manifest_for(size, digest.hexdigest())
            _add_bytes(tar, MANIFEST, manifest.to_json(), mtime=member.mtime)
            tar.close()
            raw.flush()
            os.fsync(raw.fileno())
        final = _link_free_name(partial, folder, taken_at)
        _sync_folder(folder)
    except OSError as error:
        raise BackupError(
            f"Cannot write the backup in {folder}: {error.strerror or error}."
        ) from None
    finally:
        partial.unlink(missing_ok=True)
    return final, manifest


def read_archive(
    path: Path, workdir: Path | None, *, progress: Progress
) -> tuple[Manifest, Path | None]:
    """The manifest of the backup at `path`, and its database extracted into `workdir`
    (with no workdir, only read), checked against the manifest's size and SHA-256.
    BackupError when the file is not a Taproot backup, or is damaged or cut short."""
    if not path.is_file():
        raise BackupError(f"There is no backup file at {path}.")
    damaged = f"{path} is not a Taproot backup, or it is damaged"
    extracted: dict[str, tuple[Path | None, int, str]] = {}
    manifest_bytes: bytes | None = None
    size = path.stat().st_size
    try:
        with (
            tarfile.open(path, mode="r:") as tar,
            progress.bar("Reading", total=size, unit="B") as bar,
        ):
            for member in tar:
                if not member.isfile():
                    raise BackupError(f"{damaged}: it holds {member.name!r}, which is not a file.")
                source = tar.extractfile(member)
                assert source is not None  # a regular file's member always has data
                if member.name == MANIFEST:
                    manifest_bytes = source.read(MANIFEST_LIMIT)
                    continue
                name = Path(member.name).name
                if name != member.name or name.startswith(".") or name in extracted:
                    raise BackupError(f"{damaged}: it holds an unexpected entry {member.name!r}.")
                target = workdir / name if workdir is not None else None
                copied, sha256 = _copy(source, target, bar.update)
                if copied != member.size:
                    raise BackupError(f"{damaged}: it ends inside {member.name!r} (cut short).")
                extracted[name] = (target, copied, sha256)
            bar.update(size - bar.n)  # the tar's own headers and padding
    except (tarfile.TarError, EOFError) as error:
        if _looks_like_json(path):
            raise BackupError(
                f"{path} is not a backup but looks like an export (JSON, as export_taproot "
                "writes): to bring its memories into an account, use `python manage.py "
                f"import_taproot {path} --user NAME`."
            ) from None
        raise BackupError(f"{damaged}: {error}.") from None
    except OSError as error:
        raise BackupError(f"Cannot read {path}: {error.strerror or error}.") from None
    if manifest_bytes is None:
        raise BackupError(f"{damaged}: it has no manifest (a backup cut short ends before it).")
    manifest = Manifest.from_json(manifest_bytes)
    if manifest.file not in extracted:
        raise BackupError(f"{damaged}: the database file {manifest.file!r} is missing.")
    database, size, sha256 = extracted[manifest.file]
    if size != manifest.size or sha256 != manifest.sha256:
        raise BackupError(
            f"{damaged}: its database file does not match the checksum in its manifest. "
            "Restore another backup."
        )
    return manifest, database


def _looks_like_json(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            start = file.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError:
        return False
    return start[:1] in (b"{", b"[")


def _link_free_name(partial: Path, folder: Path, taken_at: datetime) -> Path:
    """Give the finished file its name, never taking one another backup has: a hard link
    fails rather than replace a file (where the filesystem has no hard links, the name is
    checked first, then taken by a rename)."""
    stamp = taken_at.strftime("%Y%m%dT%H%M%SZ")
    sequence = 1
    while True:
        name = f"taproot-{stamp}.tar" if sequence == 1 else f"taproot-{stamp}-{sequence}.tar"
        final = folder / name
        try:
            os.link(partial, final)
        except FileExistsError:
            sequence += 1
            continue
        except OSError:
            if final.exists():
                sequence += 1
                continue
            os.rename(partial, final)
        return final


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, *, mtime: int) -> None:
    member = tarfile.TarInfo(name)
    member.size, member.mtime, member.mode = len(data), mtime, 0o600
    tar.addfile(member, io.BytesIO(data))


def _copy(
    source: IO[bytes], target: Path | None, advance: Callable[[int], object]
) -> tuple[int, str]:
    """Copy `source` into a new file `target` (or only read it); its size and SHA-256."""
    digest = hashlib.sha256()
    copied = 0
    with target.open("wb") if target is not None else nullcontext() as out:
        while chunk := source.read(CHUNK):
            if out is not None:
                out.write(chunk)
            digest.update(chunk)
            copied += len(chunk)
            advance(len(chunk))
    return copied, digest.hexdigest()


class _Hashing:
    """A file read by tarfile, hashed and counted on the way."""

    def __init__(
        self, source: IO[bytes], digest: "hashlib._Hash", advance: Callable[[int], object]
    ) -> None:
        self.source, self.digest, self.advance = source, digest, advance

    def read(self, size: int = -1) -> bytes:
        chunk = self.source.read(size)
        self.digest.update(chunk)
        self.advance(len(chunk))
        return chunk


def _sync_folder(folder: Path) -> None:
    # The rename is durable only once the folder itself is on disk.
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
