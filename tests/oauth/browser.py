"""Just enough of a browser for OAuth tests: read a page's form and the code in a redirect."""

from html.parser import HTMLParser
from urllib.parse import parse_qs, urlsplit


class _FormParser(HTMLParser):
    def __init__(self, form_id: str | None) -> None:
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.found = False
        self.action: str | None = None
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "form" and not self.found and (self.form_id in (None, values.get("id"))):
            self.inside = self.found = True
            self.action = values.get("action")
        elif (
            tag == "input"
            and self.inside
            and values.get("name")
            and values.get("type") in {"hidden", "text", "password", None}
        ):
            self.fields[values["name"]] = values.get("value") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False


def read_form(html: str, form_id: str | None = None) -> tuple[str | None, dict[str, str]]:
    """The action and the named input values of the first form (or the one with `form_id`)."""
    parser = _FormParser(form_id)
    parser.feed(html)
    assert parser.found, "no such form on the page"
    return parser.action, parser.fields


def query_of(url: str) -> dict[str, str]:
    """The query parameters of a redirect URL (each must appear once)."""
    params = parse_qs(urlsplit(url).query, keep_blank_values=True)
    assert all(len(values) == 1 for values in params.values()), params
    return {key: values[0] for key, values in params.items()}
