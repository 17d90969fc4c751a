"""A refusal's plain sentence (str), for the operator's tools (the admin, the commands):
it says what went wrong in no interface's terms, and quotes a value sent, never all of it."""

import uuid

import pytest

from memories import errors
from memories.refs import IdPrefix, Resolved
from tests.store import domain_error_kinds

A = uuid.UUID("a002ab76-58b6-4e9c-ba6d-7ec35cb2e2be")

EVERY_KIND = [
    errors.UnknownMemory(A),
    errors.AmbiguousPrefix(IdPrefix("a002ab76"), [A, uuid.uuid4()]),
    errors.MemoryArchived(A, "promote"),
    errors.BlankText("gist"),
    errors.LimitExceeded("gist", 300, 301),
    errors.Unstorable("gist", "the NUL character (\\u0000),"),
    errors.TooManyItems("tags", 50, 51),
    errors.NothingToChange(),
    errors.TooFewToCompress(1, Resolved(unknown=["a002ab76"])),
    errors.NotAllYours([A]),
    errors.SomeArchived([A]),
    errors.MixedCategories(["identity", "episodic"]),
    errors.TooManyTags(55, 50),
    errors.UnknownRevision("9" * 5000),
    errors.SuggestionStale(A, "demote", dismissed=True),
    errors.RestoreOutdated(7, A),
]
OPERATOR_KINDS = [
    errors.UnknownSnapshot(12),
    errors.UnreadableSnapshot(12, "'created_at'"),
    errors.SnapshotRecordTaken(12, "closing", A),
    errors.SnapshotInProgress(12),
]
EVERY_KIND += OPERATOR_KINDS


def test_every_kind_is_here():
    kinds = domain_error_kinds() | domain_error_kinds(operator=True)
    assert kinds == {type(error) for error in EVERY_KIND}


def test_the_operators_refusals_are_told_apart():
    assert domain_error_kinds(operator=True) == {type(error) for error in OPERATOR_KINDS}
    assert not domain_error_kinds() & domain_error_kinds(operator=True)


@pytest.mark.parametrize("error", EVERY_KIND, ids=lambda e: type(e).__name__)
def test_a_refusal_reads_as_a_plain_sentence(error):
    sentence = str(error)
    assert sentence.endswith(".")
    assert "taproot_" not in sentence and "None" not in sentence
    assert len(sentence) < 300  # a value sent is quoted, not repeated whole


def test_a_refusal_keeps_its_data():
    error = errors.LimitExceeded("content", 20_000, 25_000)
    assert (error.field, error.limit, error.got) == ("content", 20_000, 25_000)
    assert isinstance(error, errors.Refused) and not isinstance(error, errors.InvalidInput)
