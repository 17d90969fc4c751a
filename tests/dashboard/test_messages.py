"""The services' refusals as a person reads them in the dashboard: sentences about the
memory on the screen, never a tool's name nor a whole id."""

import re
import uuid

import pytest

from dashboard.messages import say
from memories import errors
from memories.refs import IdPrefix
from tests.store import domain_error_kinds

A = uuid.UUID("4b7f972c-ec82-4a3e-9d1f-a6e62842eb81")
UUID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-")

EVERY_KIND = [
    errors.UnknownMemory(A),
    errors.UnknownMemory(IdPrefix("4b7f972c")),
    errors.AmbiguousPrefix(IdPrefix("4b7f972c"), [A, uuid.uuid4()]),
    errors.MemoryArchived(A, "promote"),
    errors.MemoryArchived(A, "update"),
    errors.BlankText("gist"),
    errors.LimitExceeded("gist", 300, 301),
    errors.Unstorable("gist", "the NUL character (\\u0000),"),
    errors.TooManyItems("tags", 50, 51),
    errors.NothingToChange(),
    errors.TooFewToCompress(1),
    errors.NotAllYours([A]),
    errors.SomeArchived([A]),
    errors.MixedCategories(["identity", "episodic"]),
    errors.TooManyTags(55, 50),
    errors.UnknownRevision(7),
    errors.SuggestionStale(A, "promote", dismissed=False),
    errors.SuggestionStale(A, "archive", dismissed=True),
    errors.RestoreOutdated(7, A),
]


def test_every_kind_of_refusal_is_listed_here():
    kinds = domain_error_kinds()
    assert kinds == {type(error) for error in EVERY_KIND}


@pytest.mark.parametrize("error", EVERY_KIND, ids=lambda e: type(e).__name__)
def test_a_refusal_names_no_tool_and_no_whole_id(error):
    words = say(error)
    assert words.endswith(".")
    assert "taproot_" not in words
    assert not UUID_TEXT.search(words), words


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (
            errors.MemoryArchived(A, "promote"),
            "This memory is archived, so it cannot be promoted. Unarchive it first.",
        ),
        (errors.BlankText("gist"), "The gist cannot be empty."),
        (
            errors.LimitExceeded("gist", 300, 1_301),
            "The gist is 1,301 characters long; it can be at most 300.",
        ),
        (
            errors.UnknownMemory(A),
            "This memory no longer exists: it was deleted, perhaps in another window.",
        ),
    ],
)
def test_the_refusals_a_person_can_meet_read_as_sentences(error, words):
    assert say(error) == words
