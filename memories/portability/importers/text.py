"""Text shared by the readers: a gist that fits its limit, and a plain list split into
its items."""

import re
from collections.abc import Iterable, Iterator

from memories.limits import MAX_GIST

ELLIPSIS = "…"  # as the auto-gist ends a shortened gist

# A bullet: -, *, +, • or a number with . or ) before the text.
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(.*)$")
_BULLET_BYTES = re.compile(rb"(?m)^[ \t]*(?:[-*+]|\xe2\x80\xa2|\d{1,3}[.)])[ \t]+\S")
_HEADING = re.compile(r"^\s*#{1,6}\s")


def fitted_gist(text: str) -> str:
    """One line of text, shortened with … to fit the gist limit."""
    line = " ".join(text.split())
    if len(line) <= MAX_GIST:
        return line
    return line[: MAX_GIST - 1].rstrip() + ELLIPSIS


def has_bullets(text: bytes) -> bool:
    return _BULLET_BYTES.search(text) is not None


def list_items(lines: Iterable[str], *, bullets: bool) -> Iterator[str]:
    """The items of a plain list, read line by line: its bullets (a line that follows a
    bullet, indented or not blank, continues it; text before the first bullet is an
    item too) when it has any, else its paragraphs. Headings are left out."""
    item: list[str] = []
    for line in lines:
        if _HEADING.match(line):
            continue
        bullet = _BULLET.match(line) if bullets else None
        if bullet or not line.strip():
            if item:
                yield " ".join(item)
            item = [bullet.group(1).strip()] if bullet else []
        else:
            item.append(line.strip())
    if item:
        yield " ".join(item)
