"""A plain list: a text or Markdown file of bullets or paragraphs, as a person copies the
saved memories of Claude.ai (or any assistant) out of its settings page. One memory per
bullet or paragraph; the gist is made by SPEC §7's auto-gist rule."""

import io
from collections.abc import Iterator

from memories.portability.importers.base import (
    BadFile,
    Entry,
    Source,
    check_utf8,
    derived_id,
    provenance,
    without_bom,
)
from memories.portability.importers.text import has_bullets, list_items
from memories.quoting import shown
from memories.recall.indexing import normalised_hash

NAME = "text"


class PlainList(Source):
    name = NAME
    repeats_refused = False  # the same line twice is one memory
    default_category = "relationship"

    def __init__(self, data: bytes, *, owner_id: int) -> None:
        super().__init__()
        check_utf8(data)
        self.data = without_bom(data)
        self.owner_id = owner_id

    def entries(self) -> Iterator[Entry]:
        lines = io.TextIOWrapper(io.BytesIO(self.data), encoding="utf-8", newline=None)
        number = 0
        for number, item in enumerate(list_items(lines, bullets=has_bullets(self.data)), start=1):
            # The item's words identify it, so a list pasted again (or with new lines
            # added) imports only what is new.
            identity = normalised_hash(item) or item
            yield Entry(
                "memory",
                f"item {number} ({shown(item)})",
                {
                    "id": derived_id(self.owner_id, NAME, identity),
                    "content": item,
                    "provenance": provenance(NAME),
                },
            )
        if not number:
            raise BadFile("it holds no text to import")
