"""Which reader a store needs, from what it holds (not its name), or as the caller says."""

import json
from pathlib import Path
from typing import Any

from memories.portability.importers.base import BadFile, Source, check_size, without_bom
from memories.portability.importers.basic_memory import BasicMemory
from memories.portability.importers.mcp_memory_service import McpMemoryService
from memories.portability.importers.plain import PlainList
from memories.portability.importers.reference import ReferenceMemory
from memories.portability.importers.taproot import TaprootFile

SQLITE_MAGIC = b"SQLite format 3\x00"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
# How much of a file is looked at to tell what it is.
_HEAD = 64 * 1024
SOURCES = ("taproot", "reference-memory", "mcp-memory-service", "basic-memory", "text")


def open_source(data: Any, *, source: str | None, owner_id: int) -> Source:
    """The reader for `data`: a file's bytes (or text), a path to a file or a Basic
    Memory folder, or parsed JSON (a list or a dict: Taproot's shapes)."""
    if source is not None and source not in SOURCES:
        raise BadFile(
            f"{source!r} is not a source Taproot reads; choose one of {', '.join(SOURCES)}"
        )
    if isinstance(data, list | dict):
        return TaprootFile(data)
    if isinstance(data, Path) and data.is_dir():
        if source not in (None, "basic-memory"):
            raise BadFile(f"{data} is a folder; only a Basic Memory store is read from a folder")
        return BasicMemory.folder(data, owner_id=owner_id)
    if isinstance(data, Path):
        check_size(data.stat().st_size)
        data = data.read_bytes()
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if not isinstance(data, bytes):
        raise BadFile("it is neither a file nor a folder")
    check_size(len(data))
    kind = source or detect(data)
    if kind == "mcp-memory-service":
        return McpMemoryService(data, owner_id=owner_id)
    if kind == "basic-memory":
        if data.startswith(ZIP_MAGICS):
            return BasicMemory.zip(data, owner_id=owner_id)
        return BasicMemory.single(data, owner_id=owner_id)
    if kind == "reference-memory":
        return ReferenceMemory(data, owner_id=owner_id)
    if kind == "text":
        return PlainList(data, owner_id=owner_id)
    return TaprootFile(data)


def detect(data: bytes) -> str:
    """The source a file's first bytes show it to be."""
    if data.startswith(SQLITE_MAGIC):
        return "mcp-memory-service"
    if data.startswith(ZIP_MAGICS):
        return "basic-memory"
    head = without_bom(data[:_HEAD]).decode("utf-8", "ignore").lstrip()
    if head.startswith("{") and _is_graph_item(head.split("\n", 1)[0]):
        return "reference-memory"
    if len(data) <= _HEAD and _is_json(head):
        return "taproot"  # which refuses a JSON value of another shape, saying so
    if head.startswith(("[", "{")):
        return "taproot"
    if head.startswith("---"):
        return "basic-memory"
    return "text"


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _is_graph_item(line: str) -> bool:
    """Whether a line is one of the reference memory server's: an entity or a relation."""
    try:
        item = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(item, dict) and item.get("type") in ("entity", "relation")
