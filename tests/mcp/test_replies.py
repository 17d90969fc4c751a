"""How a service's outcome becomes a tool result (no server needed)."""

import json
import logging

import anyio
import pytest

from mcp_bridge import replies
from mcp_bridge.auth import NotAuthenticated
from memories.errors import InvalidInput


class NoRequest:
    """Stands in for the SDK's Context outside a request."""

    @property
    def request_context(self):
        raise ValueError("Context is not available outside of a request")


@pytest.fixture(autouse=True)
def signed_in(monkeypatch):
    monkeypatch.setattr(replies, "token_user", lambda: "alice")


def run(service, **arguments):
    async def call():
        return await replies.run_tool(NoRequest(), "taproot_test", service, **arguments)

    result = anyio.run(call)
    return result, json.loads(result.content[0].text)


def test_a_reply_is_sent_as_compact_json_for_the_token_user():
    result, body = run(
        lambda *, owner, value: {"status": "ok", "owner": owner, "value": value}, value="é"
    )
    assert not result.is_error
    assert body == {"status": "ok", "owner": "alice", "value": "é"}
    assert result.content[0].text == '{"status":"ok","owner":"alice","value":"é"}'


def test_text_replies_are_sent_exactly_as_they_are():
    result = anyio.run(
        lambda: replies.run_tool(NoRequest(), "t", lambda *, owner: '{"status": "ok"}')
    )
    assert result.content[0].text == '{"status": "ok"}'


def test_a_refusal_becomes_an_error_result_with_its_message():
    def refuse(*, owner):
        raise InvalidInput("limit must be a whole number from 1 to 50 (got 0).")

    result, body = run(refuse)
    assert result.is_error
    assert body == {
        "status": "error",
        "message": "limit must be a whole number from 1 to 50 (got 0).",
    }


def test_an_unexpected_failure_is_logged_and_answered_without_details(caplog):
    def crash(*, owner):
        raise RuntimeError("secret internal detail")

    with caplog.at_level(logging.ERROR, logger="taproot.mcp"):
        result, body = run(crash)
    assert result.is_error
    assert body["status"] == "error"
    assert "taproot_test" in body["message"]
    assert "secret internal detail" not in body["message"]
    assert "Traceback" not in body["message"]
    assert "secret internal detail" in caplog.text


def test_a_call_without_a_signed_in_user_is_refused(monkeypatch):
    def nobody():
        raise NotAuthenticated("no token")

    monkeypatch.setattr(replies, "token_user", nobody)
    result, body = run(lambda *, owner: {"status": "ok"})
    assert result.is_error
    assert "not signed in" in body["message"]
