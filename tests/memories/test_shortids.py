"""Short ids: the shortest prefix no other memory of the owner's shares (at least 8 hex
characters), and the prefixes every tool takes in place of a whole id."""

import uuid

import pytest

from mcp_bridge.coercion import parse_memory_ref
from mcp_bridge.handlers import resolve_memory_id
from memories.errors import InvalidInput
from memories.shortids import resolve_prefixes, short_ids, shown_prefix
from tests.conftest import NOW

pytestmark = pytest.mark.django_db

A = uuid.UUID("a002ab76-58b6-4e9c-ba6d-7ec35cb2e2be")
A_TWIN = uuid.UUID("a002ab76-58c0-4e9c-ba6d-7ec35cb2e2be")  # shares "a002ab76-58"
B = uuid.UUID("b1b2b3b4-0000-4000-8000-000000000000")


def test_shown_prefix_keeps_the_hyphens_of_the_whole_id():
    assert shown_prefix(A, 8) == "a002ab76"
    assert shown_prefix(A, 9) == "a002ab76-5"
    assert shown_prefix(A, 13) == "a002ab76-58b6-4"
    assert shown_prefix(A, 32) == str(A)


def test_an_id_no_other_memory_shares_is_shown_by_eight_characters(user, make_memory):
    make_memory(id=A)
    make_memory(id=B)
    assert short_ids(user, [A, B]) == {A: "a002ab76", B: "b1b2b3b4"}


def test_ids_sharing_a_prefix_are_shown_one_character_past_it(user, make_memory):
    make_memory(id=A)
    make_memory(id=A_TWIN)
    assert short_ids(user, [A, A_TWIN]) == {A: "a002ab76-58b", A_TWIN: "a002ab76-58c"}


def test_archived_memories_count_as_the_owners_but_another_users_do_not(
    user, other_user, make_memory
):
    make_memory(id=A)
    make_memory(id=A_TWIN, archived_at=NOW, archive_reason="old")
    make_memory(owner=other_user, id=uuid.UUID("b1b2b3b4-0000-4000-8000-0000000000ff"))
    make_memory(id=B)
    assert short_ids(user, [A, B]) == {A: "a002ab76-58b", B: "b1b2b3b4"}


def test_finding_short_ids_is_one_query(user, make_memory, django_assert_num_queries):
    made = [make_memory().pk for _ in range(30)]
    with django_assert_num_queries(1):
        short_ids(user, made)


# --- prefixes as tools send them ----------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "parsed"),
    [
        (str(A), A),
        (A.hex, A),
        ("a002ab76", "a002ab76"),
        ("A002AB76-58", "a002ab7658"),
        ("[a002ab76]", "a002ab76"),  # as a catalog line shows it
        ("  a002ab76  ", "a002ab76"),
        ("a002ab7", None),  # too short
        ("a002ab7g", None),  # not hex
        ("", None),
        (12345678, "12345678"),  # an all-digit JSON number, as the MCP Inspector sends it
        (1234567, None),  # too short
        (-12345678, None),  # not all digits
        (12345678.0, None),
        (True, None),
        (None, None),
    ],
)
def test_a_memory_id_is_a_whole_uuid_or_at_least_eight_hex_characters(sent, parsed):
    assert parse_memory_ref(sent) == parsed


def test_a_unique_prefix_names_its_memory(user, make_memory):
    make_memory(id=A)
    make_memory(id=A_TWIN)
    make_memory(id=B)
    resolved = resolve_prefixes(user, ["b1b2b3b4", "a002ab7658b"])
    assert resolved.ids == {"b1b2b3b4": B, "a002ab7658b": A}
    assert not resolved.ambiguous and not resolved.unknown


def test_an_ambiguous_prefix_names_its_candidates_and_an_unknown_one_none(user, make_memory):
    make_memory(id=A)
    make_memory(id=A_TWIN)
    resolved = resolve_prefixes(user, ["a002ab76", "deadbeef"])
    assert resolved.ambiguous == {"a002ab76": [A, A_TWIN]}
    assert resolved.unknown == ["deadbeef"]
    assert resolved.ids == {}


def test_another_users_prefix_is_simply_not_found(user, other_user, make_memory):
    make_memory(owner=other_user, id=B)
    assert resolve_prefixes(user, ["b1b2b3b4"]).unknown == ["b1b2b3b4"]
    with pytest.raises(InvalidInput) as refused:
        resolve_memory_id(user, "b1b2b3b4")
    assert refused.value.message.startswith("No memory of yours has an id starting with")


def test_a_single_id_argument_refuses_an_ambiguous_prefix_naming_the_candidates(user, make_memory):
    make_memory(id=A)
    make_memory(id=A_TWIN)
    with pytest.raises(InvalidInput) as refused:
        resolve_memory_id(user, "a002ab76", field="update_id")
    message = refused.value.message
    assert message.startswith("update_id 'a002ab76' is the start of 2 of your memories' ids")
    assert str(A) in message and str(A_TWIN) in message
    assert resolve_memory_id(user, "a002ab76-58c") == A_TWIN


def test_a_single_id_argument_refuses_a_prefix_too_short(user, make_memory):
    make_memory(id=A)
    with pytest.raises(InvalidInput) as refused:
        resolve_memory_id(user, "a002ab7")
    assert "its first 8 or more characters" in refused.value.message
