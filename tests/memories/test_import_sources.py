"""Importing the stores of other memory servers (issue 23): the MCP reference memory
server's JSONL, an mcp-memory-service SQLite file, a Basic Memory folder or zip, and a
plain list. The fixtures are written here, by hand, in each store's format as its source
code writes it (the reference server's saveGraph, mcp-memory-service 12.4's `memories`
table)."""

import io
import json
import os
import sqlite3
import tracemalloc
import uuid
import zipfile
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from mcp_bridge import handlers
from memories.errors import InvalidInput
from memories.models import Category, Memory
from memories.services import import_store
from tests.conftest import NOW
from tests.store import unchanged

pytestmark = pytest.mark.django_db


def jsonl(*items):
    return "\n".join(json.dumps(item, ensure_ascii=False) for item in items).encode()


REFERENCE = jsonl(
    {
        "type": "entity",
        "name": "Maya",
        "entityType": "person",
        "observations": ["Writes the garden book", "Drinks her coffee black ☕"],
    },
    {"type": "entity", "name": "Garden_Book", "entityType": "project", "observations": []},
    {"type": "entity", "name": "東京", "entityType": "place", "observations": ["Maya lived here"]},
    {"type": "relation", "from": "Maya", "to": "Garden_Book", "relationType": "co-writes"},
    {"type": "relation", "from": "Maya", "to": "Nobody", "relationType": "knows"},
)


def by_gist(user):
    return {m.gist: m for m in Memory.objects.filter(owner=user)}


def imported(user, data, **options):
    return import_store(owner=user, data=data, now=NOW, **options)


# The reference memory server ------------------------------------------------------------


def test_reference_memory_is_recognised_and_imported_one_memory_per_entity(user):
    reply = imported(user, REFERENCE)

    memories = by_gist(user)
    maya = memories["Maya (person)"]
    book = memories["Garden_Book (project)"]
    assert reply.source == "reference-memory"
    assert reply.memories == 3
    assert "- Writes the garden book" in maya.content
    assert "- Drinks her coffee black ☕" in maya.content
    assert "Maya co-writes Garden_Book" in maya.content
    assert "Maya co-writes Garden_Book" in book.content
    assert maya.linked_memories == [str(book.pk)]
    assert book.linked_memories == [str(maya.pk)]
    assert maya.tags == ["person"]
    assert memories["東京 (place)"].content.startswith("東京 (place)")
    assert json.loads(maya.provenance)["imported_from"] == "reference-memory"


def test_a_relation_to_a_missing_entity_stays_as_text(user):
    reply = imported(user, REFERENCE)

    maya = by_gist(user)["Maya (person)"]
    assert "Maya knows Nobody" in maya.content
    assert reply.left_out == {"relations to an entity not in the file (kept as text)": 1}


def test_an_entity_without_observations_is_still_a_memory(user):
    imported(user, REFERENCE)

    assert by_gist(user)["Garden_Book (project)"].content.startswith("Garden_Book (project)")


def test_reference_memory_twice_changes_nothing(user):
    imported(user, REFERENCE)
    with unchanged():
        reply = imported(user, REFERENCE)

    assert (reply.memories, reply.memories_skipped) == (0, 3)


def test_an_updated_reference_file_adds_only_what_is_new(user):
    imported(user, REFERENCE)
    more = REFERENCE + b"\n" + jsonl({"type": "entity", "name": "Ada", "entityType": "person"})

    reply = imported(user, more)

    assert (reply.memories, reply.memories_skipped) == (1, 3)


def test_a_duplicated_entity_is_imported_once(user):
    entity = {"type": "entity", "name": "Maya", "entityType": "person", "observations": []}

    reply = imported(user, jsonl(entity, entity))

    assert (reply.memories, reply.repeated) == (1, 1)


def test_the_category_option_sets_the_category_of_entities(user):
    imported(user, REFERENCE, category=Category.IDENTITY)

    assert set(Memory.objects.values_list("category", flat=True)) == {"identity"}


def test_imported_entities_are_found_by_recall(user):
    imported(user, REFERENCE)

    found = handlers.recall(owner=user, query="coffee", now=NOW)

    assert [r["gist"] for r in found["results"]] == ["Maya (person)"]


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (REFERENCE + b'\n{"type": "entity", "name": ', "line 6 is not JSON"),
        (jsonl({"type": "entity", "entityType": "x"}), "line 1 has no name"),
        (jsonl({"type": "relation", "from": "a", "to": "b"}), "line 1 has no relationType"),
        (
            jsonl({"type": "entity", "name": "A", "observations": "x"}),
            "observations that are not a list",
        ),
    ],
)
def test_a_bad_reference_file_is_refused_naming_the_line(user, make_memory, data, says):
    make_memory()
    with unchanged(), pytest.raises(InvalidInput) as refused:
        imported(user, data, source="reference-memory")

    assert says in refused.value.message
    assert "Nothing was changed" in refused.value.message


# mcp-memory-service -----------------------------------------------------------------------

# Its table as mcp_memory_service/storage/sqlite_vec.py creates it (12.4.0).
MMS_SCHEMA = """
CREATE TABLE memories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    content_hash TEXT UNIQUE NOT NULL,
    content TEXT NOT NULL,
    tags TEXT,
    memory_type TEXT,
    metadata TEXT,
    created_at REAL,
    updated_at REAL,
    created_at_iso TEXT,
    updated_at_iso TEXT,
    deleted_at REAL DEFAULT NULL
)
"""


def mms_file(tmp_path, rows, schema=MMS_SCHEMA):
    import hashlib

    path = tmp_path / "sqlite_vec.db"
    connection = sqlite3.connect(path)
    connection.execute(schema)
    for row in rows:
        content = row["content"]
        connection.execute(
            "INSERT INTO memories (content_hash, content, tags, memory_type, metadata, "
            "created_at, updated_at, created_at_iso, updated_at_iso, deleted_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                hashlib.sha256(content.strip().lower().encode()).hexdigest(),
                content,
                row.get("tags"),
                row.get("memory_type"),
                json.dumps(row.get("metadata", {})),
                row.get("created_at", 1_767_225_600.5),
                row.get("updated_at", 1_767_312_000.0),
                "2026-01-01T00:00:00.500Z",
                "2026-01-02T00:00:00Z",
                row.get("deleted_at"),
            ),
        )
    connection.commit()
    connection.close()
    return path


MMS_ROWS = [
    {
        "content": "The deploy broke because of a stale cache",
        "memory_type": "bug",
        "tags": "deploy, cache",
    },
    {
        "content": "Maya prefers morning meetings ☀",
        "memory_type": "preference_signal",
        "tags": "maya",
    },
    {
        "content": "Chose SQLite for the first version",
        "memory_type": "decision",
        "metadata": {"why": "simple"},
    },
    {"content": "A plain note", "memory_type": None, "tags": ""},
    {"content": "Deleted long ago", "memory_type": "note", "deleted_at": 1_767_400_000.0},
]


def test_mcp_memory_service_is_recognised_and_mapped(user, tmp_path):
    reply = imported(user, mms_file(tmp_path, MMS_ROWS))

    memories = {m.content: m for m in Memory.objects.filter(owner=user)}
    bug = memories["The deploy broke because of a stale cache"]
    assert reply.source == "mcp-memory-service"
    assert reply.memories == 4
    assert reply.left_out == {"soft-deleted rows": 1}
    assert "Deleted long ago" not in memories
    assert (bug.category, bug.tags) == ("error", ["deploy", "cache", "bug"])
    assert memories["Maya prefers morning meetings ☀"].category == "relationship"
    assert memories["Chose SQLite for the first version"].category == "active_thread"
    assert memories["A plain note"].category == "episodic"
    assert bug.created_at.isoformat() == "2026-01-01T00:00:00.500000+00:00"
    assert bug.updated_at.isoformat() == "2026-01-02T00:00:00+00:00"
    provenance = json.loads(memories["Chose SQLite for the first version"].provenance)
    assert provenance["imported_from"] == "mcp-memory-service"
    assert provenance["metadata"] == {"why": "simple"}
    assert bug.gist == "The deploy broke because of a stale cache"


def test_mcp_memory_service_twice_changes_nothing(user, tmp_path):
    path = mms_file(tmp_path, MMS_ROWS)
    imported(user, path)

    with unchanged():
        reply = imported(user, path)

    assert (reply.memories, reply.memories_skipped) == (0, 4)


def test_an_unreadable_sqlite_file_is_refused(user, tmp_path, make_memory):
    make_memory()
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)

    with unchanged(), pytest.raises(InvalidInput, match="SQLite"):
        imported(user, broken)


def test_a_database_without_the_memories_table_is_refused(user, tmp_path):
    path = mms_file(tmp_path, [], schema="CREATE TABLE other (x)")

    with unchanged(), pytest.raises(InvalidInput, match="no 'memories' table"):
        imported(user, path)


# Basic Memory ------------------------------------------------------------------------------

SOIL = """---
title: Soil chapter
type: note
permalink: garden/soil-chapter
tags: [garden, writing]
created: 2026-03-01T10:00:00Z
---

# Soil chapter

Half drafted; compost comes next.

## Observations
- [status] Half drafted #writing
- [idea] Use the café photos

## Relations
- part_of [[Garden Book]]
- inspired_by [[Some Outside Note]]
"""
BOOK = """---
title: Garden Book
tags: book, garden
---
The book Maya and I write.
"""
BARE = "# Tomatoes\n\nNo front matter here: 東京 tomatoes.\n"


def notes_folder(tmp_path):
    root = tmp_path / "notes"
    (root / "garden").mkdir(parents=True)
    (root / ".basic-memory").mkdir()
    (root / "garden" / "soil.md").write_text(SOIL)
    (root / "book.md").write_text(BOOK)
    (root / "tomatoes.md").write_text(BARE)
    (root / ".basic-memory" / "config.md").write_text("hidden")
    (root / "image.png").write_bytes(b"\x89PNG")
    return root


def zipped(files):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def test_a_basic_memory_folder_imports_one_memory_per_note(user, tmp_path):
    reply = imported(user, notes_folder(tmp_path))

    memories = by_gist(user)
    soil, book, bare = memories["Soil chapter"], memories["Garden Book"], memories["Tomatoes"]
    assert reply.source == "basic-memory"
    assert reply.memories == 3
    assert soil.tags == ["garden", "writing"]
    assert book.tags == ["book", "garden"]
    assert "- [idea] Use the café photos" in soil.content
    assert soil.linked_memories == [str(book.pk)]
    assert "inspired_by [[Some Outside Note]]" in soil.content
    assert soil.created_at.isoformat() == "2026-03-01T10:00:00+00:00"
    assert "東京 tomatoes" in bare.content
    assert json.loads(soil.provenance)["permalink"] == "garden/soil-chapter"
    assert reply.left_out == {"relations to a note not in the import (kept as text)": 1}


def test_a_zip_of_the_folder_imports_the_same(user):
    data = zipped({"notes/garden/soil.md": SOIL, "notes/book.md": BOOK, "notes/x.txt": "no"})

    reply = imported(user, data)

    assert reply.memories == 2
    assert by_gist(user)["Soil chapter"].linked_memories == [str(by_gist(user)["Garden Book"].pk)]


def test_basic_memory_twice_changes_nothing(user, tmp_path):
    folder = notes_folder(tmp_path)
    imported(user, folder)

    with unchanged():
        reply = imported(user, folder)

    assert (reply.memories, reply.memories_skipped) == (0, 3)


@pytest.mark.parametrize(
    ("files", "says"),
    [
        (
            {"a.md": "---\ntitle: [unclosed\n---\nbody"},
            "note 'a.md' has front matter that is not YAML",
        ),
        ({"a.md": "---\ntitle: x\nbody without an end"}, "never ends"),
        ({"a.md": "---\n- a list\n---\nbody"}, "not a list of 'key: value' lines"),
        ({"a.md": "---\na: &x [1]\nb: *x\n---\nbody"}, "aliases"),
        ({"../escape.md": "x"}, "leads outside its folder"),
        ({"/etc/passwd.md": "x"}, "leads outside its folder"),
        ({"a.md": b"caf\xe9"}, "note 'a.md' is not UTF-8"),
        ({"picture.png": "x"}, "no Markdown notes"),
    ],
)
def test_a_bad_note_or_zip_is_refused_naming_it(user, make_memory, files, says):
    make_memory()
    with unchanged(), pytest.raises(InvalidInput) as refused:
        imported(user, zipped(files))

    assert says in refused.value.message


def test_a_zip_that_unpacks_beyond_the_limit_is_refused_before_reading(user, settings):
    settings.TAPROOT_IMPORT_MAX_MB = 1
    bomb = zipped({"big.md": "a" * (2 * 1024 * 1024)})  # a few kilobytes packed

    with (
        unchanged(),
        pytest.raises(InvalidInput, match=r"unpack to 2\.0 MB, over the import limit"),
    ):
        imported(user, bomb)


def test_a_zip_entry_larger_than_it_claims_is_refused(user):
    data = bytearray(zipped({"a.md": "x" * 1000}))
    # The central directory's uncompressed size (offset 24 of its header) made to lie.
    header = data.rfind(b"PK\x01\x02")
    data[header + 24 : header + 28] = (10).to_bytes(4, "little")

    with unchanged(), pytest.raises(InvalidInput, match=r"larger than the zip says|cannot be read"):
        imported(user, bytes(data))


# Front matter that made the YAML loader build numbers, dates and zones (or recurse for
# ever): each is refused as a sentence naming the note, on every interface.
HOSTILE_FRONT_MATTER = {
    "deep": ("tags: " + "[" * 30_000 + "]" * 30_000, "nests lists and maps deeper than 20"),
    "digits": ("created: " + "9" * 60_000, "has a created_at that is not an ISO-8601"),
    "sexagesimal": ("created: " + ":".join(["59"] * 2_000), "is not an ISO-8601"),
    "month": ("created: 2024-13-45", "has a created_at that is not an ISO-8601 date-time"),
    "offset": ("created: 2024-01-01T00:00:00+99:99", "has a created_at that is not an ISO-8601"),
}


def hostile_note(kind: str) -> bytes:
    front, _ = HOSTILE_FRONT_MATTER[kind]
    return zipped({"notes/odd.md": f"---\ntitle: Odd\n{front}\n---\nA body.\n"})


@pytest.mark.parametrize("kind", list(HOSTILE_FRONT_MATTER))
def test_hostile_front_matter_is_refused_naming_the_note(user, make_memory, kind):
    make_memory()
    with unchanged(), pytest.raises(InvalidInput) as refused:
        imported(user, hostile_note(kind))

    assert "note 'notes/odd.md'" in refused.value.message
    assert HOSTILE_FRONT_MATTER[kind][1] in refused.value.message


@pytest.mark.parametrize("kind", list(HOSTILE_FRONT_MATTER))
def test_the_command_refuses_hostile_front_matter_in_a_sentence(user, tmp_path, kind):
    path = tmp_path / "notes.zip"
    path.write_bytes(hostile_note(kind))

    with unchanged(), pytest.raises(CommandError) as refused:
        run(str(path), "--user", "alice")

    assert "note 'notes/odd.md'" in str(refused.value)
    assert "Traceback" not in str(refused.value)


def test_front_matter_values_are_read_as_text_and_dates_by_taproot(user):
    note = (
        "---\ntitle: 1234\ntags: [2024, true, null]\ncreated: 2024-05-01\n"
        "modified: 2024-05-02 10:30:00+02:00\n---\nA body.\n"
    )
    imported(user, zipped({"notes/n.md": note}))

    memory = by_gist(user)["1234"]
    assert memory.tags == ["2024", "true", "null"]
    assert memory.created_at.isoformat() == "2024-05-01T00:00:00+00:00"
    assert memory.updated_at.isoformat() == "2024-05-02T08:30:00+00:00"


def test_a_fifo_or_other_non_regular_file_in_a_folder_is_left_out(user, tmp_path):
    folder = notes_folder(tmp_path)
    os.mkfifo(folder / "pipe.md")  # a read of it would wait for a writer for ever

    reply = imported(user, folder)

    assert reply.memories == 3


def test_a_note_longer_than_a_memory_is_refused_before_it_is_unpacked(user, monkeypatch):
    from memories.portability.importers import basic_memory

    read: list[int] = []
    real_open = zipfile.ZipFile.open

    def noting(self, name, *args, **kwargs):
        member = real_open(self, name, *args, **kwargs)
        real_read = member.read
        member.read = lambda n=-1: read.append(n) or real_read(n)
        return member

    monkeypatch.setattr(zipfile.ZipFile, "open", noting)
    # 63 MB of one letter: a few kilobytes packed, far within the import limit of 64 MB.
    bomb = zipped({"notes/huge.md": "a" * (63 * 1024 * 1024)})
    assert len(bomb) < 128 * 1024

    tracemalloc.start()
    try:
        with (
            unchanged(),
            pytest.raises(InvalidInput, match=r"note 'notes/huge\.md' is longer than"),
        ):
            imported(user, bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert read == []  # refused from its size in the directory, nothing unpacked
    # The bound is 300 MB + 4 x the upload; what the import took is a few megabytes.
    assert peak < 16 * 1024 * 1024, f"{peak:,} bytes at the peak"
    assert basic_memory.MAX_NOTE_BYTES < 1024 * 1024


def test_a_folder_note_is_read_no_further_than_a_memory_could_hold(user, tmp_path):
    from memories.portability.importers import basic_memory

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "huge.md").write_bytes(b"a" * (basic_memory.MAX_NOTE_BYTES + 1))

    with unchanged(), pytest.raises(InvalidInput, match=r"note 'huge\.md' is longer than"):
        imported(user, folder)


# A plain list --------------------------------------------------------------------------------

CLAUDE_LIST = """# Saved memories

- Prefers short answers. Gets annoyed by long preambles and filler that says nothing new.
- Lives in Lisbon
  with two cats
* Is learning the cello ♪
- Prefers short answers. Gets annoyed by long preambles and filler that says nothing new.
"""


def test_a_plain_list_imports_one_memory_per_bullet_with_auto_gists(user):
    reply = imported(user, CLAUDE_LIST.encode())

    memories = {m.content: m for m in Memory.objects.filter(owner=user)}
    assert reply.source == "text"
    assert (reply.memories, reply.repeated) == (3, 1)
    assert "Lives in Lisbon with two cats" in memories
    assert "Is learning the cello ♪" in memories
    first = memories[
        "Prefers short answers. Gets annoyed by long preambles and filler that says nothing new."
    ]
    assert (first.gist, first.gist_autogenerated) == ("Prefers short answers.", True)
    assert first.category == "relationship"


def test_paragraphs_are_items_when_there_are_no_bullets(user):
    reply = imported(user, b"First paragraph\nstill first.\n\nSecond one.\n", source="text")

    assert reply.memories == 2
    assert Memory.objects.filter(content="First paragraph still first.").exists()


def test_a_plain_list_twice_changes_nothing(user):
    imported(user, CLAUDE_LIST.encode())
    with unchanged():
        reply = imported(user, CLAUDE_LIST.encode())

    assert reply.memories == 0


# The command ---------------------------------------------------------------------------------


def run(*args):
    out = StringIO()
    call_command("import_taproot", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_the_command_dry_run_says_what_would_happen_per_category_and_changes_nothing(
    user, tmp_path
):
    path = mms_file(tmp_path, MMS_ROWS)

    with unchanged():
        out = run(str(path), "--user", "alice", "--dry-run")

    assert "Dry run: 4 memories and 0 closings would be imported" in out
    assert "read as: mcp-memory-service" in out
    assert "  error: 1 would be imported, 0 already present" in out
    assert "soft-deleted rows: 1" in out


def test_the_command_forces_a_source_and_a_category(user, tmp_path):
    path = tmp_path / "list.md"
    path.write_text("- one thing\n- another thing\n")

    out = run(str(path), "--user", "alice", "--from", "text", "--category", "identity")

    assert "Imported 2 memories" in out
    assert set(Memory.objects.values_list("category", flat=True)) == {"identity"}


def test_the_command_reads_a_basic_memory_folder(user, tmp_path):
    out = run(str(notes_folder(tmp_path)), "--user", "alice")

    assert "read as: basic-memory" in out
    assert Memory.objects.count() == 3


def test_the_command_refuses_forcing_a_wrong_source(user, tmp_path):
    with unchanged(), pytest.raises(CommandError, match="not UTF-8 text"):
        run(
            str(Path(mms_file(tmp_path, MMS_ROWS))), "--user", "alice", "--from", "reference-memory"
        )


# Indexing, progress ----------------------------------------------------------------------


def test_a_large_import_builds_the_index_and_vectors_as_it_writes(user, monkeypatch):
    from memories.services import importing
    from tests.memories.test_indexing import assert_derived_columns_are_fresh

    # Past this many memories the vectors are made batch by batch, inside the transaction.
    monkeypatch.setattr(importing, "EMBED_AHEAD_MAX", 0)
    monkeypatch.setattr(importing, "WRITE_BATCH", 2)

    reply = imported(user, REFERENCE)

    assert reply.memories == 3
    assert_derived_columns_are_fresh(user, after="a large import")
    assert [r["gist"] for r in handlers.recall(owner=user, query="coffee", now=NOW)["results"]] == [
        "Maya (person)"
    ]


def test_progress_hears_of_each_batch_checked_and_written(user, monkeypatch):
    from memories.services import importing

    monkeypatch.setattr(importing, "WRITE_BATCH", 2)
    heard = []

    imported(user, REFERENCE, progress=lambda stage, count: heard.append((stage, count)))

    assert heard == [("checking", 2), ("checking", 1), ("importing", 2), ("importing", 1)]


def test_the_command_shows_no_progress_bar_without_a_terminal(user, tmp_path):
    path = tmp_path / "memory.jsonl"
    path.write_bytes(REFERENCE)
    err = StringIO()

    call_command("import_taproot", str(path), "--user", "alice", stdout=StringIO(), stderr=err)

    assert err.getvalue() == ""


def test_a_reference_file_of_one_entity_is_recognised(user):
    reply = imported(user, jsonl({"type": "entity", "name": "Maya", "entityType": "person"}))

    assert (reply.source, reply.memories) == ("reference-memory", 1)


def test_a_zip_claiming_more_entries_than_allowed_is_refused_before_it_is_opened(user, monkeypatch):
    from memories.portability.importers import basic_memory

    monkeypatch.setattr(basic_memory, "MAX_NOTES", 2)
    data = zipped({f"n{i}.md": "x" for i in range(3)})

    with unchanged(), pytest.raises(InvalidInput, match="more than 2 files"):
        imported(user, data)


def test_a_zip_with_a_compression_python_cannot_read_is_refused(user):
    data = bytearray(zipped({"a.md": "x" * 100}))
    for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        at = data.find(signature)
        data[at + offset : at + offset + 2] = (99).to_bytes(2, "little")  # no such method

    with unchanged(), pytest.raises(InvalidInput, match="cannot be read"):
        imported(user, bytes(data))


@pytest.mark.parametrize(
    ("store", "word", "gist"),
    [
        ("mcp-memory-service", "stale", "The deploy broke because of a stale cache"),
        ("basic-memory", "compost", "Soil chapter"),
        ("text", "cello", "Is learning the cello ♪"),
    ],
)
def test_each_store_is_found_by_recall_after_its_import(user, tmp_path, store, word, gist):
    data = {
        "mcp-memory-service": lambda: mms_file(tmp_path, MMS_ROWS),
        "basic-memory": lambda: notes_folder(tmp_path),
        "text": lambda: CLAUDE_LIST.encode(),
    }[store]()
    imported(user, data)

    found = handlers.recall(owner=user, query=word, now=NOW)

    assert [r["gist"] for r in found["results"]] == [gist]


# Another account's store is no oracle ---------------------------------------------------

SECRET = "Bob is secretly interviewing at another company in March"
WRONG = "Bob is secretly interviewing at another company in April"


def guessed_id(owner, text: str) -> str:
    """The id a peer store's record of `text` had in `owner`'s store, as anyone could
    compute it before ids came from the server's secret (and still can for the file)."""
    from memories.portability.importers.base import derived_id
    from memories.recall.indexing import normalised_hash

    return derived_id(owner.pk, "text", normalised_hash(text) or text)


def guesses_file(ids_and_texts) -> str:
    entries = [
        {
            "key": f"mem:{record_id}",
            "value": {"id": record_id, "category": "episodic", "content": text},
        }
        for record_id, text in ids_and_texts
    ]
    return json.dumps({"version": 1, "entries": entries})


def readback(owner, ids):
    """For each guessed id: was it stored as it was, and under which id otherwise."""
    stored = set(Memory.objects.filter(owner=owner).values_list("pk", flat=True))
    return [uuid.UUID(i) in stored for i in ids]


def test_a_peer_stores_ids_cannot_be_computed_by_another_account(user, other_user):
    imported(user, f"- {SECRET}\n".encode(), source="text")
    (theirs,) = Memory.objects.filter(owner=user)

    assert str(theirs.pk) != guessed_id(user, SECRET)


@pytest.mark.parametrize("legacy", [False, True])
def test_importing_guesses_of_another_accounts_ids_tells_nothing(
    user, other_user, make_memory, legacy
):
    """Mallory (other_user) computes the ids Alice's memory would have for a right and a
    wrong guess, imports both as an export file, and reads back what became of each: the
    two come back alike. `legacy`: Alice's memory has the id an import gave before ids
    came from the server's secret (the publicly computable one)."""
    if legacy:
        make_memory(id=guessed_id(user, SECRET), owner=user, content=SECRET)
    else:
        imported(user, f"- {SECRET}\n".encode(), source="text")
    right, wrong = guessed_id(user, SECRET), guessed_id(user, WRONG)

    reply = imported(other_user, guesses_file([(right, SECRET), (wrong, WRONG)]).encode())

    assert reply.memories == 2
    assert readback(other_user, [right, wrong]) == [False, False]
    mallorys = Memory.objects.filter(owner=other_user)
    assert not {str(m.pk) for m in mallorys} & {right, wrong}
    # Imported again: the same ids, nothing new.
    again = imported(other_user, guesses_file([(right, SECRET), (wrong, WRONG)]).encode())
    assert (again.memories, again.memories_skipped) == (0, 2)
