"""Basic Memory: a folder of Markdown notes (read from disk, or from a zip of the folder),
each with optional YAML front matter (title, type, permalink, tags as a list or inline),
a body, an `## Observations` list (`- [category] text #tag`) and an `## Relations` list
(`- relation_type [[Target]]`).

One memory per note: the title as the gist, the body (observations and relations
included) as the content, the front matter's tags; a relation to a note of the same
import becomes a link between their memories, one to another note stays as text. Dates
come from the front matter (created, modified) or else the file's time.

A zip is read as hostile input: never unpacked to disk, its entries' paths checked, the
sizes they claim added up before anything is read and held to while reading.
"""

import io
import os
import re
import stat
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from memories.limits import MAX_CONTENT
from memories.portability.importers.base import (
    BadFile,
    Entry,
    Source,
    check_utf8,
    derived_id,
    max_import_bytes,
    provenance,
    without_bom,
)
from memories.portability.importers.text import fitted_gist
from memories.quoting import shown
from memories.timeutil import isoformat

NAME = "basic-memory"
DANGLING = "relations to a note not in the import (kept as text)"
OTHER_FILES = "files that are not Markdown notes"
# Far more notes than a person writes; bounds the work a zip of empty entries can cause.
MAX_NOTES = 100_000
MAX_FRONT_MATTER = 64 * 1024
_RELATION = re.compile(r"^\s*[-*]\s+(\S.*?)\s+\[\[([^\]\n]+)\]\]")
_HEADING = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)
_SECTION = re.compile(r"^##\s+(.+?)\s*$")
_SLUG_DROP = re.compile(r"[^\w\s/-]")
_SLUG_SPACE = re.compile(r"[\s_]+")


# How deep front matter may nest (a list in a map in a list…): a note needs two or three
# levels; 30,000 exhausted the parser's recursion.
MAX_NESTING = 20
# The most of one note that is read: a memory's content at its longest in UTF-8, its
# front matter and room for a title. Past it the note could never be imported, and a zip
# may hold a note of any size behind a few kilobytes.
MAX_NOTE_BYTES = 4 * MAX_CONTENT + MAX_FRONT_MATTER + 4096


class _FrontMatterLoader(yaml.BaseLoader):
    """Front matter as text only: every value a string, a list or a map. No numbers,
    dates, times or zones are built by the loader (a 60,000-digit number, a date of the
    13th month or a +99:99 offset made it fail), so Taproot reads dates itself (and
    refuses them as the import's own words say). Aliases are refused: front matter never
    needs them, and they let a few bytes stand for a structure of any size ("billion
    laughs"); so is nesting past MAX_NESTING."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("aliases (*name) are not read")
        self.depth += 1
        try:
            if self.depth > MAX_NESTING:
                raise yaml.YAMLError(f"it nests lists and maps deeper than {MAX_NESTING} levels")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


@dataclass(frozen=True)
class Note:
    path: str
    title: str
    permalink: str
    note_type: str | None
    tags: list[str]
    body: str
    relations: list[tuple[str, str]]
    created: str | None
    modified: str | None


class BasicMemory(Source):
    name = NAME
    repeats_refused = False  # one permalink, one memory
    default_category = "episodic"

    def __init__(self, owner_id: int) -> None:
        super().__init__()
        self.owner_id = owner_id
        self._zip: bytes | None = None
        self._folder: Path | None = None
        self._single: bytes | None = None

    @classmethod
    def folder(cls, path: Path, *, owner_id: int) -> "BasicMemory":
        source = cls(owner_id)
        source._folder = path
        total = sum(size for _, _, size in _folder_files(path))
        if total > max_import_bytes():
            raise BadFile(
                f"its notes come to {total / 1024 / 1024:,.1f} MB, over the import limit "
                f"of {max_import_bytes() // 1024 // 1024:,} MB (TAPROOT_IMPORT_MAX_MB)"
            )
        return source

    @classmethod
    def zip(cls, data: bytes, *, owner_id: int) -> "BasicMemory":
        source = cls(owner_id)
        source._zip = data
        _zip_notes(data)  # checks the whole directory before anything is read
        return source

    @classmethod
    def single(cls, data: bytes, *, owner_id: int) -> "BasicMemory":
        source = cls(owner_id)
        source._single = data
        return source

    def _files(self) -> Iterator[tuple[str, bytes, datetime | None]]:
        """(path within the store, bytes, the file's time) of each note."""
        if self._single is not None:
            _check_note_size(len(self._single), "note.md")
            yield "note.md", self._single, None
        elif self._zip is not None:
            yield from _read_zip(self._zip, self.left_out)
        elif self._folder is not None:
            for path, relative, _ in _folder_files(self._folder):
                moment = datetime.fromtimestamp(path.stat().st_mtime, UTC)
                yield relative, _read_note(path, relative), moment

    def _notes(self) -> Iterator[Note]:
        for path, data, moment in self._files():
            yield parse_note(path, data, moment)

    def entries(self) -> Iterator[Entry]:
        self.left_out.clear()
        known: dict[str, str] = {}  # a title or permalink, folded -> the note's permalink
        count = 0
        for note in self._notes():
            count += 1
            known.setdefault(note.permalink.casefold(), note.permalink)
            known.setdefault(note.title.casefold(), note.permalink)
        if not count:
            raise BadFile("it holds no Markdown notes (.md files)")
        self.left_out.clear()  # counted again below, once
        for note in self._notes():
            links = []
            for _, target in note.relations:
                permalink = known.get(target.strip().casefold())
                if permalink is None:
                    self.left_out[DANGLING] += 1
                elif permalink != note.permalink:
                    links.append(derived_id(self.owner_id, NAME, permalink))
            yield Entry(
                "memory",
                f"note {shown(note.path)}",
                {
                    "id": derived_id(self.owner_id, NAME, note.permalink),
                    "content": note.body.strip() or note.title,
                    "gist": fitted_gist(note.title),
                    "tags": note.tags,
                    "linked_memories": list(dict.fromkeys(links)),
                    "created_at": note.created or note.modified,
                    "updated_at": note.modified or note.created,
                    "provenance": provenance(
                        NAME, permalink=note.permalink, path=note.path, type=note.note_type
                    ),
                },
            )


def parse_note(path: str, data: bytes, moment: datetime | None) -> Note:
    label = f"note {shown(path)}"
    check_utf8(data, label)
    text = without_bom(data).decode("utf-8").replace("\r\n", "\n")
    front: dict[str, Any] = {}
    body = text
    if text.startswith("---\n") or text == "---":
        end = re.search(r"^---[ \t]*$", text[4:], re.MULTILINE)
        if end is None:
            raise BadFile(f"{label} has front matter that never ends (close it with a line of ---)")
        raw = text[4 : 4 + end.start()]
        body = text[4 + end.end() :].lstrip("\n")
        front = _front_matter(raw, label)
    title = _string(front.get("title")) or _first_heading(body) or PurePosixPath(path).stem
    permalink = _string(front.get("permalink")) or _slug(str(PurePosixPath(path).with_suffix("")))
    if path == "note.md" and not _string(front.get("permalink")):
        permalink = _slug(title)  # a single note has no path of its own
    file_time = isoformat(moment) if moment else None
    return Note(
        path=path,
        title=title,
        permalink=permalink,
        note_type=_string(front.get("type")),
        tags=_tags(front.get("tags")),
        body=body,
        relations=_relations(body),
        created=_date(front, ("created", "created_at", "date")) or file_time,
        modified=_date(front, ("modified", "updated", "updated_at")) or file_time,
    )


def _front_matter(raw: str, label: str) -> dict[str, Any]:
    if len(raw) > MAX_FRONT_MATTER:
        raise BadFile(f"{label} has front matter longer than {MAX_FRONT_MATTER // 1024} KB")
    try:
        loaded = yaml.load(raw, Loader=_FrontMatterLoader)
    except (yaml.YAMLError, RecursionError, ValueError) as error:
        where = getattr(error, "problem_mark", None)
        at = f" at line {where.line + 2}" if where is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise BadFile(f"{label} has front matter that is not YAML{at} ({problem})") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise BadFile(f"{label} has front matter that is not a list of 'key: value' lines")
    return loaded


def _string(value: Any) -> str | None:
    if isinstance(value, str):
        return " ".join(value.split()) or None
    return None


def _tags(value: Any) -> list[str]:
    if isinstance(value, str):
        items: list[Any] = re.split(r"[,\s]+", value)
    elif isinstance(value, list):
        items = value
    else:
        return []
    tags = [_string(item) for item in items]
    return list(dict.fromkeys(t.lstrip("#") for t in tags if t and t.lstrip("#")))


def _date(front: dict[str, Any], names: tuple[str, ...]) -> str | None:
    """The first of these fields that is given, as written: the import reads it as an
    ISO-8601 date-time and refuses the note, by name, when it is none."""
    for name in names:
        value = front.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _first_heading(body: str) -> str | None:
    found = _HEADING.search(body)
    return found.group(1).strip() if found else None


def _slug(text: str) -> str:
    folded = _SLUG_DROP.sub("", text.casefold())
    return _SLUG_SPACE.sub("-", folded).strip("-/") or "note"


def _relations(body: str) -> list[tuple[str, str]]:
    relations = []
    in_section = False
    for line in body.splitlines():
        if section := _SECTION.match(line):
            in_section = section.group(1).strip().casefold() == "relations"
        elif in_section and (found := _RELATION.match(line)):
            relations.append((found.group(1), found.group(2)))
    return relations


# The files of a folder -------------------------------------------------------------------


def _hidden(part: str) -> bool:
    return part.startswith(".") or part == "__MACOSX"


def _folder_files(root: Path) -> Iterator[tuple[Path, str, int]]:
    """(path, path within the folder, size) of each note; hidden folders (.git,
    .basic-memory), links and anything that is not a regular file (a FIFO would never end
    a read, a device never end it either) are left out."""
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not _hidden(d))
        for name in sorted(files):
            path = Path(folder) / name
            if _hidden(name) or not name.lower().endswith(".md"):
                continue
            status = path.lstat()
            if not stat.S_ISREG(status.st_mode):
                continue
            yield path, path.relative_to(root).as_posix(), status.st_size


def _read_note(path: Path, relative: str) -> bytes:
    """A note's bytes, read no further than MAX_NOTE_BYTES (a file can grow after it was
    measured)."""
    with path.open("rb") as note:
        data = note.read(MAX_NOTE_BYTES + 1)
    _check_note_size(len(data), relative)
    return data


def _check_note_size(size: int, name: str) -> None:
    if size > MAX_NOTE_BYTES:
        raise BadFile(
            f"note {shown(name)} is longer than a memory may be ({MAX_CONTENT:,} characters "
            "of content); split it into several notes"
        )


# The files of a zip ----------------------------------------------------------------------


def _declared_entries(data: bytes) -> int | None:
    """How many entries the zip's end record says it holds (its zip64 record's count when
    there is one), read before zipfile builds an object for each; None when there is no
    end record (zipfile then says what is wrong)."""
    end = data.rfind(b"PK\x05\x06", max(0, len(data) - 65_557))
    if end < 0 or end + 22 > len(data):
        return None
    count = int.from_bytes(data[end + 10 : end + 12], "little")
    locator = end - 20
    if count == 0xFFFF and locator >= 0 and data[locator : locator + 4] == b"PK\x06\x07":
        offset = int.from_bytes(data[locator + 8 : locator + 16], "little")
        if data[offset : offset + 4] == b"PK\x06\x06":
            count = int.from_bytes(data[offset + 32 : offset + 40], "little")
    return count


def _zip_notes(data: bytes) -> list[zipfile.ZipInfo]:
    """The notes of a zip, checked before any is read: not too many entries, paths that
    stay inside it, no encryption, and sizes that add up to less than the import limit."""
    declared = _declared_entries(data)
    if declared is not None and declared > MAX_NOTES:
        raise BadFile(f"the zip holds more than {MAX_NOTES:,} files")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise BadFile(f"it is not a readable zip file ({error})") from None
    infos = archive.infolist()
    if len(infos) > MAX_NOTES:
        raise BadFile(f"the zip holds more than {MAX_NOTES:,} files")
    notes = []
    total = 0
    for info in infos:
        name = info.filename.replace("\\", "/")
        parts = PurePosixPath(name).parts
        if name.startswith("/") or re.match(r"^[A-Za-z]:", name) or ".." in parts:
            raise BadFile(f"the zip holds a path that leads outside its folder ({shown(name)})")
        if info.is_dir() or any(_hidden(p) for p in parts) or not name.lower().endswith(".md"):
            continue
        if info.flag_bits & 0x1:
            raise BadFile(f"the zip's note {shown(name)} is encrypted; zip it without a password")
        total += info.file_size
        notes.append(info)
    if total > max_import_bytes():
        raise BadFile(
            f"its notes unpack to {total / 1024 / 1024:,.1f} MB, over the import limit of "
            f"{max_import_bytes() // 1024 // 1024:,} MB (TAPROOT_IMPORT_MAX_MB)"
        )
    return notes


def _read_zip(data: bytes, left_out: Counter[str]) -> Iterator[tuple[str, bytes, datetime | None]]:
    archive = zipfile.ZipFile(io.BytesIO(data))
    notes = _zip_notes(data)
    left_out[OTHER_FILES] = sum(1 for i in archive.infolist() if not i.is_dir()) - len(notes)
    if not left_out[OTHER_FILES]:
        del left_out[OTHER_FILES]
    for info in notes:
        name = info.filename.replace("\\", "/")
        try:
            _check_note_size(info.file_size, name)
            with archive.open(info) as member:
                # Held to the size it claims: a zip may lie about it.
                content = member.read(info.file_size + 1)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as error:
            raise BadFile(f"the zip's note {shown(name)} cannot be read ({error})") from None
        if len(content) > info.file_size:
            raise BadFile(f"the zip's note {shown(name)} is larger than the zip says")
        try:
            moment: datetime | None = datetime(*info.date_time, tzinfo=UTC)
        except ValueError:
            moment = None
        yield name, content, moment
