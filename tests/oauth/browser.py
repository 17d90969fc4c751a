"""Just enough of a browser for OAuth tests: read a page's form and the code in a redirect."""

from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2


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


class Browser:
    """A person at a browser: follows the authorization URL, logs in, answers the consent.

    Real form posts with the CSRF token and cookies; redirects are followed only within
    the server, so the final redirect to the client's callback is returned, not visited.
    """

    def __init__(self, origin: str, username: str, password: str) -> None:
        self.origin = origin
        self.username = username
        self.password = password
        self.http = httpx2.AsyncClient(follow_redirects=False, timeout=30)
        self.consent_pages = 0

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _post_form(self, page: httpx2.Response, form_id: str, extra: dict[str, str]) -> Any:
        action, fields = read_form(page.text, form_id)
        fields.update(extra)
        url = urljoin(str(page.url), action) if action else str(page.url)
        headers = {"Origin": self.origin, "Referer": str(page.url)}
        return await self.http.post(url, data=fields, headers=headers)

    async def authorize(self, authorization_url: str, *, allow: bool = True) -> str:
        """Where the server finally sends the browser: the client's callback URL."""
        response = await self.http.get(authorization_url)
        if response.status_code == 302 and "/accounts/login/" in response.headers["location"]:
            login_page = await self.http.get(
                urljoin(authorization_url, response.headers["location"])
            )
            assert login_page.status_code == 200, login_page.text
            credentials = {"username": self.username, "password": self.password}
            response = await self._post_form(login_page, "login-form", credentials)
            assert response.status_code == 302, response.text
            response = await self.http.get(
                urljoin(str(login_page.url), response.headers["location"])
            )
        assert response.status_code == 200, response.text
        self.consent_pages += 1
        decision = await self._post_form(
            response, "authorizationForm", {"allow": "Authorize"} if allow else {}
        )
        assert decision.status_code == 302, decision.text
        return decision.headers["location"]
