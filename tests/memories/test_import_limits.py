"""Import applies the tools' limits (issue 22, item 5): the sizes of memories.limits,
numbers finite and of a size a database stores, UTF-8 only, ids in their usual form, a
file size limit checked before parsing, and a refusal naming up to 20 records."""

import json
import uuid
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memories import limits
from memories.errors import InvalidInput
from memories.models import Closing, Memory
from memories.portability import export_store
from memories.portability.importers.jsontext import parse_problem
from memories.services import import_store
from tests.conftest import NOW
from tests.store import unchanged

pytestmark = pytest.mark.django_db


def record(**fields):
    return {"id": str(uuid.uuid4()), "category": "episodic", "content": "Fine.", **fields}


def refused(user, data, **options):
    with unchanged(), pytest.raises(InvalidInput) as refusal:
        import_store(owner=user, data=data, now=NOW, **options)
    assert "Nothing was changed" in refusal.value.message
    return refusal.value.message


OVER = {
    "content": (
        {"content": "x" * (limits.MAX_CONTENT + 1)},
        "content of 20,001 characters, over the limit of 20,000",
    ),
    "gist": ({"gist": "g" * (limits.MAX_GIST + 1)}, "gist of 301 characters"),
    "tags": ({"tags": [f"t{i}" for i in range(51)]}, "51 tags, over the limit of 50"),
    "a long tag": ({"tags": ["t" * 101]}, "tags with an entry of 101 characters, over the limit"),
    "keywords": ({"search_keywords": [f"k{i}" for i in range(51)]}, "51 search_keywords"),
    "tags as JSON text": ({"tags": json.dumps([f"t{i}" for i in range(60)])}, "60 tags"),
    "links": (
        {"linked_memories": [str(uuid.uuid4()) for _ in range(51)]},
        "51 linked_memories, over the limit of 50",
    ),
    "provenance": ({"provenance": "p" * 2001}, "provenance of 2,001 characters"),
}


@pytest.mark.parametrize("case", list(OVER))
def test_a_record_beyond_the_tools_limits_is_refused_naming_record_and_field(
    user, make_memory, case
):
    make_memory()
    fields, says = OVER[case]

    message = refused(user, json.dumps([record(), record(**fields)]))

    assert "record 2" in message
    assert says in message


def test_a_closing_beyond_the_limits_is_refused(user):
    key = f"close:{uuid.uuid4()}"
    data = {"entries": [{"key": key, "value": {"reflection": "r" * 10_001}}]}

    message = refused(user, json.dumps(data))

    assert "entry 1" in message
    assert "reflection of 10,001 characters, over the limit of 10,000" in message


def test_a_record_at_the_limits_is_imported(user):
    fields = {
        "content": "c" * limits.MAX_CONTENT,
        "gist": "g" * limits.MAX_GIST,
        "tags": [f"{i:0>100}" for i in range(50)],
        "linked_memories": [str(uuid.uuid4()) for _ in range(50)],
    }

    reply = import_store(owner=user, data=json.dumps([record(**fields)]), now=NOW)

    assert reply.memories == 1


def test_a_refusal_names_twenty_records_and_counts_the_rest(user):
    records = [record(content="x" * 20_001) for _ in range(25)]

    message = refused(user, json.dumps(records))

    assert "25 records break the limits" in message
    assert "record 20 (" in message and "record 21 (" not in message
    assert "and 5 more" in message


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[" + "9" * 100_000 + "]", "whole number too large"),
        ('[{"id": "%s", "content": "x", "retrieval_count": 1e999}]', "too large"),
        ('[{"id": "%s", "content": "x", "retrieval_count": 123456789012345678901}]', "too large"),
        ('[{"id": "%s", "content": "x", "extra": -1e400}]', "too large"),
        ('[{"id": "%s", "content": "x", "extra": NaN}]', "not JSON"),
    ],
)
def test_numbers_not_finite_or_too_large_are_refused_at_once(user, text, says):
    data = text.replace("%s", str(uuid.uuid4())) if "%s" in text else text

    message = refused(user, data)

    assert says in message


def test_a_100000_digit_number_is_refused_in_well_under_a_second(user):
    import time

    started = time.perf_counter()
    refused(user, f'[{{"id": "{uuid.uuid4()}", "content": "x", "n": {"9" * 100_000}}}]')

    assert time.perf_counter() - started < 1


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ("[]".encode("utf-16"), "UTF-16"),
        ('[{"content": "café"}]'.encode("latin-1"), "not UTF-8 text (byte 18 is not UTF-8)"),
        (b'[{"content": "fine"}]\xff', "not UTF-8"),
        (b'[{"content": "\xed\xa0\x80"}]', "not UTF-8"),  # a surrogate written as UTF-8
    ],
)
def test_a_file_that_is_not_utf8_is_refused_saying_so(user, data, says):
    message = refused(user, data)

    assert says in message


def test_a_utf8_byte_order_mark_is_read_past(user):
    data = b"\xef\xbb\xbf" + json.dumps([record(content="Ünïcode ☕")], ensure_ascii=False).encode()

    import_store(owner=user, data=data, now=NOW)

    assert Memory.objects.get(owner=user).content == "Ünïcode ☕"


@pytest.mark.parametrize(
    "spelling",
    [
        "{%s}",
        "urn:uuid:%s",
        "hex",
    ],
)
def test_ids_in_another_spelling_are_refused(user, spelling):
    pk = uuid.uuid4()
    text = pk.hex if spelling == "hex" else spelling % pk

    message = refused(user, json.dumps([record(id=text)]))

    assert "not a UUID" in message
    assert "8-4-4-4-12" in message


def test_an_upper_case_id_is_stored_in_lower_case_and_links_follow(user):
    first, second = uuid.uuid4(), uuid.uuid4()
    records = [
        record(id=str(first).upper()),
        record(id=str(second), linked_memories=[str(first).upper()]),
    ]

    import_store(owner=user, data=json.dumps(records), now=NOW)

    assert Memory.objects.get(pk=first).owner == user
    assert Memory.objects.get(pk=second).linked_memories == [str(first)]


def test_a_file_larger_than_the_limit_is_refused_before_it_is_read(user, settings, tmp_path):
    settings.TAPROOT_IMPORT_MAX_MB = 1
    big = tmp_path / "big.json"
    big.write_bytes(b"not even json " * 80_000)  # about 1.1 MB

    with unchanged(), pytest.raises(CommandError, match=r"1\.1 MB and imports are limited to 1 MB"):
        call_command("import_taproot", str(big), "--user", user.username, stdout=StringIO())


def test_the_size_limit_applies_to_bytes_handed_to_the_service(user, settings):
    settings.TAPROOT_IMPORT_MAX_MB = 1

    message = refused(user, b"[" + b" " * (1024 * 1024) + b"]")

    assert "TAPROOT_IMPORT_MAX_MB" in message


def test_a_record_of_more_than_200000_values_is_refused(user):
    message = refused(user, json.dumps([record(extra=[[]] * 200_001)]))

    assert "record 1" in message
    assert "more than 200,000 values" in message


# Memories an older import stored beyond the limits ---------------------------------------


@pytest.fixture
def oversized(user, make_memory):
    """A memory as an older import stored it: 25,000 characters, 500 tags, 100 links."""
    return make_memory(
        content="Over the limit. " + "x" * 25_000,
        tags=[f"t{i}" for i in range(500)],
        linked_memories=[str(uuid.uuid4()) for _ in range(100)],
    )


def test_an_oversized_memory_still_loads_recalls_and_exports(user, oversized):
    from mcp_bridge import handlers

    recalled = handlers.recall(owner=user, ids=[str(oversized.pk)], now=NOW)
    export = export_store(owner=user, now=NOW)

    assert recalled["results"][0]["content"] == oversized.content
    [entry] = export["entries"]
    assert entry["value"]["content"] == oversized.content
    assert len(entry["value"]["tags"]) == 500


def test_an_oversized_store_reimports_into_its_account_changing_nothing(user, oversized):
    export = json.dumps(export_store(owner=user, now=NOW))

    with unchanged():
        reply = import_store(owner=user, data=export, now=NOW)

    assert (reply.memories, reply.memories_skipped) == (0, 1)


def test_an_oversized_store_moves_to_another_account_only_when_allowed(user, other_user, oversized):
    export = json.dumps(export_store(owner=user, now=NOW))

    message = refused(other_user, export)
    reply = import_store(owner=other_user, data=export, now=NOW, allow_over_limits=True)

    assert "content of 25,016 characters" in message
    assert reply.memories == 1
    assert Memory.objects.get(owner=other_user).content == oversized.content


def test_the_command_takes_over_limits_records_with_the_flag(user, other_user, oversized, tmp_path):
    target = tmp_path / "export.json"
    call_command("export_taproot", "--user", user.username, "--output", str(target))

    with pytest.raises(CommandError, match="breaks the limits every memory keeps"):
        call_command("import_taproot", str(target), "--user", "bob", stdout=StringIO())
    out = StringIO()
    call_command("import_taproot", str(target), "--user", "bob", "--allow-over-limits", stdout=out)

    assert "Imported 1 memory" in out.getvalue()
    assert Closing.objects.count() == 0


def test_a_parsers_complaint_is_told_in_words_never_as_its_class():
    assert parse_problem(ValueError("parse error: trailing garbage\n  {}x\n")) == (
        "text that is not JSON (trailing garbage)"
    )
    assert parse_problem(ValueError("integer overflow")) == (
        "a whole number too large to store (more than 19 digits)"
    )
    assert parse_problem(ValueError("")) == "text that is not JSON"
