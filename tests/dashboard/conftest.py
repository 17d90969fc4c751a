"""Fixtures for the dashboard's view tests."""

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.http.response import HttpResponseBase
from django.test import Client
from django.utils import timezone

from memories.models import Memory

HTMX = {"HTTP_HX_REQUEST": "true"}
XSS = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def htmx(target: str | None = None) -> dict[str, str]:
    """Headers htmx sends (as test-client keyword arguments)."""
    headers = dict(HTMX)
    if target:
        headers["HTTP_HX_TARGET"] = target
    return headers


@pytest.fixture
def make_memory(make_memory: Callable[..., Memory]) -> Callable[..., Memory]:
    """The project's make_memory, dated now by default: the views read the real clock."""

    def make(**overrides: Any) -> Memory:
        now = timezone.now()
        overrides.setdefault("created_at", now)
        overrides.setdefault("updated_at", now)
        return make_memory(**overrides)

    return make


@pytest.fixture
def logged_in(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


@pytest.fixture
def foreign_memory(other_user: Any, make_memory: Callable[..., Memory]) -> Memory:
    return make_memory(owner=other_user, gist="Bob's memory", content="Only Bob may see this.")


def downloaded(response: HttpResponseBase) -> bytes:
    """The whole body of a streamed download, read as an ASGI server reads it."""
    assert response.streaming and response.is_async  # type: ignore[attr-defined]

    async def read() -> bytes:
        return b"".join([part async for part in response.streaming_content])  # type: ignore[attr-defined]

    return async_to_sync(read)()
