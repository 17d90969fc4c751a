"""The text a person reads on a page: what the browser shows, without scripts, styles, and
the payload text the preview quotes verbatim (the raw JSON and the catalog lines)."""

from html.parser import HTMLParser

# Elements whose text is not read as prose, or is the tools' JSON shown as sent.
_UNREAD_TAGS = {"script", "style", "template"}
_VERBATIM_CLASSES = {"raw-json", "preview-line"}
_VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "wbr"}


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[bool] = []  # per open element: is its text left out?
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID_TAGS:
            return
        classes = set((dict(attrs).get("class") or "").split())
        skipped = tag in _UNREAD_TAGS or bool(classes & _VERBATIM_CLASSES)
        self.stack.append(skipped or (bool(self.stack) and self.stack[-1]))

    def handle_endtag(self, tag: str) -> None:
        if tag not in _VOID_TAGS and self.stack:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        if not (self.stack and self.stack[-1]):
            self.parts.append(data)


def page_text(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    parser.close()
    return " ".join(" ".join(parser.parts).split())
