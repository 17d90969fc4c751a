"""Readers of the stores Taproot imports (SPEC §7 and the switching issue): Taproot's own
export and the original's backup, the MCP reference memory server's JSONL, an
mcp-memory-service SQLite file, a Basic Memory folder (or a zip of one) and a plain list.

Each reader turns its store into Taproot records (`Entry`: a memory or a closing in the
shape of an export's values) and nothing else; memories.services.importing checks them
against the tools' limits and writes them. A reader can be read more than once (the
import reads its file twice: once to check everything, once to write), holds one record
at a time where its format allows, and refuses a file it cannot read with `BadFile`,
naming the line, entry or note and what to do.
"""

from memories.portability.importers.base import BadFile, Entry, Source, file_too_large
from memories.portability.importers.detect import SOURCES, open_source

__all__ = ["SOURCES", "BadFile", "Entry", "Source", "file_too_large", "open_source"]
