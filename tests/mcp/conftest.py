from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal

from tests.mcp.client import MODERN_VERSION, McpCaller, mcp_client
from tests.mcp.tokens import make_access_token

MODES = ["legacy", "auto"]


@pytest.fixture
def server(live_server_process: Any) -> Any:
    return live_server_process


@pytest.fixture
def mcp_url(server: Any) -> str:
    return f"{server.url}/mcp"


# These tests never log in, so their users are made without a password.
@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(username="alice")


@pytest.fixture
def other_user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(username="bob")


@pytest.fixture
def token_for(mcp_url: str) -> Callable[..., str]:
    """A valid /mcp token for a user on the test server."""

    def make(user: Any, **overrides: Any) -> str:
        return make_access_token(user, resource=overrides.pop("resource", mcp_url), **overrides)

    return make


@pytest.fixture
def connect(portal: BlockingPortal, mcp_url: str) -> Iterator[Callable[..., McpCaller]]:
    """Open a real MCP client session on the test server with a bearer token."""
    with ExitStack() as stack:

        def open_session(token: str, *, mode: str = "legacy") -> McpCaller:
            client = stack.enter_context(
                portal.wrap_async_context_manager(mcp_client(mcp_url, token, mode=mode))
            )
            # mode="auto" quietly falls back to the 2025 handshake when 2026-07-28 fails:
            # every session checks it got the era it asked for.
            if mode == "auto":
                assert client.protocol_version == MODERN_VERSION, client.protocol_version
            else:
                assert client.protocol_version.startswith("2025-"), client.protocol_version
            return McpCaller(portal=portal, client=client, mode=mode)

        yield open_session


@pytest.fixture
def eras(
    connect: Callable[..., McpCaller], token_for: Callable[..., str], user: Any
) -> list[McpCaller]:
    """Alice's sessions in both protocol eras: the 2025 handshake and 2026-07-28.

    Tests loop over them instead of being parametrized: each test on a real server
    must empty the database afterwards, and that is the slow part on PostgreSQL.
    """
    token = token_for(user)
    return [connect(token, mode=mode) for mode in MODES]
