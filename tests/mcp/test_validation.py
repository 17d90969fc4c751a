"""Every validation rule, through the real server: an `isError` result carrying
`{"status": "error", "message": …}` that says what is wrong, and no change at all."""

import uuid
from typing import Any

import pytest
from django.utils import timezone

from tests.store import unchanged

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.server]

ALL_CATEGORIES = "identity, relationship, active_thread, episodic, error"
VALID = {"category": "episodic", "content": "A fine memory.", "gist": "Fine memory"}


@pytest.fixture
def ids(make_memory: Any, other_user: Any) -> dict[str, str]:
    """A live memory, an archived one, a second live one in another category, and one of
    Bob's."""
    now = timezone.now()
    return {
        "live": str(make_memory(created_at=now, updated_at=now).pk),
        "live_error": str(make_memory(category="error", created_at=now, updated_at=now).pk),
        "archived": str(make_memory(archived_at=now).pk),
        "foreign": str(make_memory(owner=other_user).pk),
        "unknown": str(uuid.uuid4()),
    }


def assert_refused(eras: list[Any], tool: str, cases: list[tuple[dict[str, Any], str]]) -> None:
    for mcp in eras:
        for arguments, expected in cases:
            with unchanged((mcp.mode, arguments)):
                message = mcp.refusal(tool, arguments)
            assert expected in message, (mcp.mode, arguments, message)


def test_remember_refusals(eras, ids):
    assert_refused(
        eras,
        "taproot_remember",
        [
            ({**VALID, "category": "feelings"}, ALL_CATEGORIES),
            ({"content": "No category.", "gist": "None"}, ALL_CATEGORIES),
            ({**VALID, "content": "   "}, "content is required"),
            ({"category": "episodic", "gist": "No content"}, "content is required"),
            ({**VALID, "content": 42}, "content is required"),
            ({**VALID, "content": "x" * 20_001}, "20,000"),
            ({**VALID, "gist": "g" * 301}, "300"),
            ({"category": "episodic", "content": "No gist."}, "catalog"),
            ({**VALID, "gist": "  "}, "gist is required"),
            ({**VALID, "salience": "urgent"}, "high, medium, low"),
            ({**VALID, "salience": "4"}, "high, medium, low"),
            ({**VALID, "epistemic_status": "sure"}, "observed, inferred"),
            ({**VALID, "core": "maybe"}, "true or false"),
            ({**VALID, "tags": [f"t{i}" for i in range(51)]}, "at most 50"),
            ({**VALID, "tags": ["t" * 101]}, "100 characters"),
            ({**VALID, "tags": [1, 2]}, "only strings"),
            ({**VALID, "tags": {"a": 1}}, "list of strings"),
            ({**VALID, "search_keywords": 7}, "list of strings"),
            ({**VALID, "provenance": 5}, "must be text"),
            ({**VALID, "update_id": ids["unknown"]}, "No memory with id"),
            ({**VALID, "update_id": ids["foreign"]}, "No memory with id"),
            ({**VALID, "update_id": ids["archived"]}, "unarchive"),
            ({**VALID, "update_id": "not-a-uuid"}, "the id of one of your memories"),
            ({**VALID, "content": "nul \x00 inside"}, "NUL"),
            ({**VALID, "search_keywords": ["k" * 101]}, "100 characters"),
            ({**VALID, "linked_memories": [ids["live"], 7.5]}, "only strings"),
            ({**VALID, "linked_memories": 7.5}, "linked_memories must be a list of memory ids"),
            ({**VALID, "update_id": 1234567}, "update_id must be a string: the id of one"),
            ({**VALID, "update_id": True}, "update_id must be a string: the id of one"),
            ({**VALID, "linked_memories": [str(uuid.uuid4()) for _ in range(51)]}, "at most 50"),
            ({**VALID, "provenance": "p" * 2_001}, "2,000"),
            ({**VALID, "conversation_url": ["https://claude.ai/chat/1"]}, "must be text"),
        ],
    )


def test_recall_refusals(eras, ids):
    assert_refused(
        eras,
        "taproot_recall",
        [
            ({"limit": 0}, "from 1 to 50"),
            ({"limit": 51}, "from 1 to 50"),
            ({"limit": "ten"}, "from 1 to 50"),
            ({"limit": 2.5}, "from 1 to 50"),
            ({"limit": True}, "from 1 to 50"),
            ({"ids": [str(uuid.uuid4()) for _ in range(51)]}, "at most 50"),
            ({"ids": 5.5}, "ids must be a list of memory ids, each a string"),
            ({"ids": {"id": ids["live"]}}, "ids must be a list of memory ids"),
            ({"since": "yesterday"}, "ISO-8601"),
            ({"since": 20260101}, "ISO-8601"),
            ({"category": "nonsense"}, ALL_CATEGORIES),
            ({"query": 5}, "query must be text"),
            ({"query": ["a", "b"]}, "query must be text"),
            ({"tags": 5}, "list of strings"),
            ({"query": "x", "tags": ["\x00"]}, "NUL"),
            ({"query": "word " * 2_001}, "10,000"),
            ({"tags": [f"t{i}" for i in range(51)]}, "at most 50"),
        ],
    )


def test_recall_skips_ids_it_cannot_use_and_names_them(eras, ids):
    for mcp in eras:
        sent = [ids["live"], "not-an-id", 5, ids["foreign"], ids["archived"]]
        reply = mcp.reply("taproot_recall", {"ids": sent})
        assert [record["id"] for record in reply["results"]] == [ids["live"]]
        skipped, missing = reply["warnings"]
        assert skipped.startswith("Skipped entries of ids that are not memory ids (send each ")
        assert skipped.endswith(": 'not-an-id', 5.")
        assert missing.endswith(f": {ids['foreign']}, {ids['archived']}.")
        none_found = mcp.reply("taproot_recall", {"ids": [ids["unknown"], '["not json']})
        assert none_found["count"] == 0
        assert ids["unknown"] in none_found["warnings"][1]
        assert "'[\"not json'" in none_found["warnings"][0]


def test_promote_refusals(eras, ids):
    assert_refused(
        eras,
        "taproot_promote",
        [
            ({"core": True}, "memory_id"),
            ({"memory_id": ids["unknown"], "core": True}, "No memory with id"),
            ({"memory_id": ids["foreign"], "core": True}, "No memory with id"),
            ({"memory_id": ids["archived"], "core": True}, "unarchive"),
            ({"memory_id": ids["live"]}, "Give core"),
            ({"memory_id": ids["live"], "salience": "top"}, "high, medium, low"),
            ({"memory_id": ids["live"], "core": "sure"}, "true or false"),
            # A number is read as its digits: these are too few for an id (or none at all).
            ({"memory_id": 12345, "core": True}, "memory_id must be a string: the id of one"),
            ({"memory_id": -12345678, "core": True}, "memory_id must be a string: the id of"),
            ({"memory_id": 12345678.5, "core": True}, "memory_id must be a string: the id of"),
            ({"memory_id": ["12345678"], "core": True}, "memory_id must be a string: the id of"),
            ({"memory_id": "1234567", "core": True}, "memory_id must be the id of one"),
        ],
    )


def test_forget_refusals(eras, ids):
    compress = {"action": "compress", "content": "Both.", "gist": "Both"}
    assert_refused(
        eras,
        "taproot_forget",
        [
            ({"memory_id": ids["live"]}, "archive, unarchive, delete, compress"),
            ({"action": "destroy", "memory_id": ids["live"]}, "archive, unarchive, delete"),
            ({"action": "archive"}, "needs memory_id"),
            ({"action": "delete", "memory_id": ids["foreign"]}, "No memory with id"),
            ({"action": "unarchive", "memory_id": ids["unknown"]}, "No memory with id"),
            ({"action": "archive", "memory_id": ids["live"], "reason": "r" * 1001}, "1,000"),
            (compress, "needs ids"),
            ({**compress, "ids": [ids["live"]]}, "at least two"),
            ({**compress, "ids": [ids["live"], ids["foreign"]]}, "unknown ids"),
            ({**compress, "ids": [ids["live"], ids["archived"]]}, "archived"),
            ({**compress, "ids": [ids["live"], ids["live_error"]]}, "different categories"),
            ({**compress, "ids": [ids["live"], ids["live_error"]], "gist": None}, "gist"),
            ({**compress, "ids": [ids["live"], ids["live_error"]], "category": "x"}, "one of"),
            ({**compress, "ids": [str(uuid.uuid4()) for _ in range(51)]}, "at most 50"),
            ({**compress, "ids": [ids["live"], ids["live_error"]], "content": None}, "content"),
            ({**compress, "ids": [ids["live"], ids["live"]]}, "at least two distinct"),
            ({**compress, "ids": 5.5}, "ids must be a list of memory ids, each a string"),
            ({**compress, "ids": [ids["live"], 5]}, "each entry of ids must be a string: the"),
            ({"action": "delete", "memory_id": 1.5}, "memory_id must be a string: the id of"),
            ({"action": 5, "memory_id": ids["live"]}, "archive, unarchive, delete"),
            ({"action": "archive", "memory_id": ids["live"], "reason": 5}, "must be text"),
        ],
    )


def test_close_refusals(eras):
    assert_refused(
        eras,
        "taproot_close",
        [
            ({}, "reflection is required"),
            ({"reflection": "  "}, "reflection is required"),
            ({"reflection": "r" * 10_001}, "10,000"),
            ({"reflection": "Bye.", "conversation_title": "t" * 201}, "200"),
            ({"reflection": "Bye.", "conversation_url": 5}, "must be text"),
            ({"reflection": 42}, "reflection is required"),
            ({"reflection": "Bye.", "conversation_title": ["t"]}, "must be text"),
        ],
    )


def test_a_refusal_quotes_only_the_start_of_a_huge_value(eras):
    huge = "x" * 3_900_000
    assert_refused(
        eras,
        "taproot_remember",
        [({**VALID, "category": huge}, "'" + "x" * 79 + "… (3,900,000 characters)")],
    )
    for mcp in eras:
        assert len(mcp.refusal("taproot_remember", {**VALID, "category": huge})) < 300


def test_unknown_arguments_are_named_briefly_however_many_and_long(eras):
    unknown = {f"extra{i:04}": 1 for i in range(1_000)}
    unknown["y" * 1_000_000] = 1
    for mcp in eras:
        fresh = {**VALID, "content": f"Sent in the {mcp.mode} era.", "gist": mcp.mode}
        (warning,) = mcp.reply("taproot_remember", {**fresh, **unknown})["warnings"]
        assert warning.startswith("Ignored unknown argument(s): 'extra0000', 'extra0001', ")
        assert warning.endswith(" and 991 more.")
        assert len(warning) < 300
