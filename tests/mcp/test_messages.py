"""The services' refusals in the tools' words (mcp_bridge.messages): each names the tool
call that fixes it, as the tools' replies always have."""

import uuid

import pytest

from mcp_bridge.messages import say
from memories import errors
from memories.refs import IdPrefix
from tests.store import domain_error_kinds

A = uuid.UUID("a002ab76-58b6-4e9c-ba6d-7ec35cb2e2be")
B = uuid.UUID("a002ab76-58c0-4e9c-ba6d-7ec35cb2e2be")
FIND_IT = "Check the id in the catalog, or find it with taproot_recall(query=...)."

WORDED = [
    (errors.UnknownMemory(A), f"No memory with id {A} exists for you. {FIND_IT}"),
    (
        errors.UnknownMemory(IdPrefix("a002ab76", "[a002ab76]")),
        f"No memory of yours has an id starting with '[a002ab76]'. {FIND_IT}",
    ),
    (
        errors.AmbiguousPrefix(IdPrefix("a002ab76", "a002ab76"), [A, B]),
        f"memory_id 'a002ab76' is the start of 2 of your memories' ids: {A}, {B}. Send more "
        "characters of the one you mean, or its whole id.",
    ),
    (
        errors.MemoryArchived(A, "promote"),
        f"Memory {A} is archived and cannot be promoted; unarchive it first with "
        "taproot_forget(action='unarchive').",
    ),
    (
        errors.MemoryArchived(A, "update"),
        f"Memory {A} is archived and cannot be updated; unarchive it first with "
        "taproot_forget(action='unarchive').",
    ),
    (errors.BlankText("gist"), "gist is required and must be non-blank text."),
    (
        errors.LimitExceeded("content", 20_000, 25_000),
        "content is 25,000 characters; the limit is 20,000. Shorten it (nothing is "
        "truncated for you).",
    ),
    (
        errors.Unstorable("gist", "the NUL character (\\u0000),"),
        "gist contains the NUL character (\\u0000), which cannot be stored. Remove it and "
        "send the text again.",
    ),
    (errors.TooManyItems("tags", 50, 51), "tags may hold at most 50 entries (got 51)."),
    (errors.TooFewToCompress(1), "compress needs at least two distinct memory ids in ids."),
    (
        errors.NotAllYours([A]),
        f"compress can only combine your own memories; unknown ids: {A}",
    ),
    (errors.SomeArchived([A]), f"compress combines live memories; these are archived: {A}"),
    (
        errors.MixedCategories(["identity", "episodic"]),
        "These memories are in different categories (episodic, identity): give the category "
        "of the compressed memory.",
    ),
    (
        errors.TooManyTags(55, 50),
        "Together these memories carry 55 distinct tags; a memory may hold 50. Remove some "
        "tags first.",
    ),
    (errors.UnknownRevision(7), "No revision 7 exists for you."),
]


@pytest.mark.parametrize(("error", "words"), WORDED, ids=lambda v: type(v).__name__)
def test_each_refusal_reads_as_the_tools_have_always_said_it(error, words):
    assert say(error) == words


def test_an_ambiguous_prefix_names_the_argument_it_came_in():
    error = errors.AmbiguousPrefix(IdPrefix("a002ab76", "a002ab76"), [A, B])
    assert say(error, field="update_id").startswith("update_id 'a002ab76' is the start of 2")


def test_every_kind_of_refusal_has_its_words():
    worded = {type(error) for error, _ in WORDED}
    kinds = domain_error_kinds()
    # No tool edits without naming a change, applies a suggestion or restores a revision:
    # those refusals reach only the dashboard (and str() for the operator's tools).
    unreachable = {errors.NothingToChange, errors.SuggestionStale, errors.RestoreOutdated}
    assert kinds - unreachable <= worded
