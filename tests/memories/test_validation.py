import re
import uuid
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from mcp_bridge import handlers
from mcp_bridge.coercion import (
    check_length,
    coerce_bool,
    coerce_category,
    coerce_epistemic_status,
    coerce_int,
    coerce_memory_id,
    coerce_salience,
    coerce_since,
    coerce_string_list,
    optional_text,
    require_text,
    shown,
)
from memories.errors import InvalidInput
from memories.services import import_store, restore_snapshot
from tests.store import unchanged


@pytest.mark.parametrize(
    "check",
    [
        lambda: require_text("a\x00b", field="content", limit=100),
        lambda: optional_text("a\x00b", field="provenance"),
        lambda: coerce_string_list(["fine", "bad\x00"], field="tags"),
    ],
)
def test_text_holding_a_nul_character_is_refused_by_name(check):
    # PostgreSQL text cannot hold NUL: refuse it clearly instead of failing in the database.
    with pytest.raises(InvalidInput, match="NUL"):
        check()


def test_text_without_nul_passes_unchanged():
    assert require_text("  keep me ", field="content", limit=100) == "  keep me "
    assert optional_text(" ref ", field="provenance") == "ref"
    assert coerce_string_list('["a", "b", "a"]', field="tags") == ["a", "b"]


@pytest.mark.parametrize(
    "check",
    [
        lambda: require_text("half \ud800 a pair", field="content", limit=100),
        lambda: optional_text("\udfff", field="provenance"),
        lambda: coerce_string_list(["fine", "bad\udc00"], field="tags"),
        lambda: check_length("query \ud83d", field="query", limit=100),
    ],
)
def test_text_holding_a_lone_surrogate_is_refused_by_name(check):
    # JSON can carry "\ud800" on its own; no database stores it (UTF-8 cannot encode it).
    with pytest.raises(InvalidInput, match="surrogate"):
        check()


def test_text_with_characters_beyond_the_basic_plane_passes():
    assert require_text("tea 🍵 über", field="content", limit=100) == "tea 🍵 über"


def test_a_list_nested_too_deep_to_parse_is_a_bare_string_refused_by_its_length():
    with pytest.raises(InvalidInput, match="at most 100 characters"):
        coerce_string_list("[" * 100_000 + "]" * 100_000, field="tags")


def test_a_long_list_of_distinct_entries_is_refused_with_its_count():
    with pytest.raises(InvalidInput, match=r"at most 50 entries \(got 20000\)"):
        coerce_string_list([f"tag {i}" for i in range(20_000)], field="tags")


# --- what a message quotes of a sent value ----------------------------------------------

HUGE = "x" * 3_900_000


def test_shown_quotes_a_short_value_whole():
    assert shown("diary") == "'diary'"
    assert shown(42) == "42"
    assert shown(["a", 1]) == "['a', 1]"


def test_shown_cuts_a_long_text_to_about_80_characters_and_gives_its_length():
    text = shown(HUGE)
    assert text == "'" + "x" * 79 + "… (3,900,000 characters)"


def test_shown_cuts_a_long_list_and_gives_its_number_of_entries():
    text = shown(["tag"] * 100_000)
    assert len(text) < 120
    assert text.endswith("(100,000 entries)")


def test_shown_says_nothing_true_and_false_as_json_does():
    assert (shown(None), shown(True), shown(False)) == ("nothing", "true", "false")


def test_shown_copes_with_values_python_cannot_repr():
    # More than 4,300 digits: repr raises ValueError. Nested 100,000 deep: RecursionError.
    assert shown(10**5000) == "a number of about 5,001 digits"
    nested: list[Any] = []
    for _ in range(100_000):
        nested = [nested]
    assert shown(nested) == "[[[[...]]]]"


def _user() -> Any:
    return get_user_model().objects.get_or_create(username="echo")[0]


@pytest.mark.parametrize(
    "check",
    [
        pytest.param(lambda: coerce_category(HUGE), id="category"),
        pytest.param(lambda: coerce_salience(HUGE), id="salience"),
        pytest.param(lambda: coerce_epistemic_status(HUGE), id="epistemic_status"),
        pytest.param(lambda: coerce_bool(HUGE, field="core"), id="core"),
        pytest.param(lambda: coerce_int(HUGE, field="limit", minimum=1, maximum=50), id="limit"),
        pytest.param(lambda: coerce_memory_id(HUGE), id="memory_id"),
        pytest.param(lambda: coerce_since(HUGE), id="since"),
        pytest.param(lambda: coerce_string_list([HUGE], field="tags"), id="tag entry"),
        pytest.param(lambda: coerce_string_list([[HUGE]], field="tags"), id="nested tag"),
        pytest.param(lambda: coerce_string_list({"a": HUGE}, field="tags"), id="tags object"),
        pytest.param(lambda: optional_text([HUGE], field="provenance"), id="provenance"),
        pytest.param(lambda: handlers.recall(owner=_user(), query=[HUGE]), id="recall query"),
        pytest.param(lambda: handlers.forget(owner=_user(), action=HUGE), id="forget action"),
        pytest.param(
            lambda: handlers.promote(owner=_user(), memory_id=HUGE, core=True),
            id="promote memory_id",
        ),
        pytest.param(lambda: restore_snapshot(owner=_user(), snapshot_id=HUGE), id="snapshot id"),
        pytest.param(
            lambda: import_store(owner=_user(), data=[{"id": HUGE, "content": "x"}]),
            id="import record id",
        ),
        pytest.param(
            lambda: import_store(owner=_user(), data={"format": HUGE, "entries": []}),
            id="import format",
        ),
        pytest.param(
            lambda: import_store(owner=_user(), data={"entries": [{"key": "mem:" + HUGE}]}),
            id="import key",
        ),
        pytest.param(
            lambda: import_store(
                owner=_user(), data=[{"id": str(uuid.uuid4()), "content": "x", "created_at": HUGE}]
            ),
            id="import created_at",
        ),
    ],
)
@pytest.mark.django_db
def test_a_refusal_quotes_at_most_about_80_characters_of_a_huge_value(check):
    with unchanged(), pytest.raises(InvalidInput) as refused:
        check()
    message = refused.value.message
    assert len(message) < 500, message[:600]
    assert "xxxxxxxxxx…" in message


@pytest.mark.parametrize(
    "check",
    [
        lambda: coerce_category(" " * 3_900_000 + "project"),
        lambda: coerce_salience("3" + " " * 3_900_000),
    ],
)
def test_a_warning_quotes_at_most_about_80_characters_of_a_huge_value(check):
    _, warning = check()
    assert warning is not None
    assert len(warning) < 200
    assert "(3,900,00" in warning


@pytest.mark.parametrize(
    "check",
    [
        lambda: coerce_int(10**5000, field="limit", minimum=1, maximum=50),
        lambda: coerce_bool(10**5000, field="core"),
        lambda: coerce_category(10**5000),
    ],
)
def test_a_number_too_long_for_python_to_print_is_refused_cleanly(check):
    with pytest.raises(InvalidInput, match="about 5,001 digits"):
        check()


# --- no message speaks Python -----------------------------------------------------------

PYTHON_WORDS = re.compile(r"\b(None|True|False|NoneType|int|str|dict|float|bool|tuple)\b")
ODD_VALUES = [None, True, False, 0, 2.5, "", " ", [], {}, [None], [True, 1.5], {"a": None}]


def _calls(memory_id: str, other_id: str) -> list[tuple[Any, dict[str, Any], list[str]]]:
    """Each tool's service, a call it accepts, and the arguments to vary."""
    remember_args = [
        "category",
        "content",
        "gist",
        "salience",
        "core",
        "epistemic_status",
        "provenance",
        "tags",
        "linked_memories",
        "conversation_id",
        "transcript_ref",
        "conversation_url",
        "search_keywords",
        "update_id",
    ]
    compress = {"action": "compress", "ids": [memory_id, other_id], "content": "c", "gist": "g"}
    return [
        (handlers.remember, {"category": "episodic", "content": "c", "gist": "g"}, remember_args),
        (handlers.remember, {"update_id": memory_id, "salience": "low"}, remember_args),
        (handlers.recall, {}, ["query", "category", "ids", "tags", "since", "limit"]),
        (handlers.promote, {"memory_id": memory_id, "core": True}, ["memory_id", "core"]),
        (handlers.promote, {"memory_id": memory_id, "salience": "low"}, ["salience"]),
        (handlers.forget, {"action": "archive", "memory_id": memory_id}, ["action", "reason"]),
        (handlers.forget, compress, ["ids", "content", "gist", "category"]),
        (
            handlers.close,
            {"reflection": "r"},
            ["reflection", "conversation_title", "conversation_url"],
        ),
    ]


@pytest.mark.django_db
def test_no_refusal_speaks_python_whatever_a_tool_is_sent(make_memory):
    user = make_memory().owner
    refused = 0
    for service, accepted, names in _calls(str(make_memory().pk), str(make_memory().pk)):
        for name in names:
            for value in ODD_VALUES:
                try:
                    service(owner=user, **{**accepted, name: value})
                except InvalidInput as refusal:
                    refused += 1
                    assert not PYTHON_WORDS.search(refusal.message), (name, value, refusal.message)
    assert refused > 200  # most of these values are wrong somewhere
