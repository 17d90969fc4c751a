import pytest

from memories.errors import InvalidInput
from memories.validation import check_length, coerce_string_list, optional_text, require_text


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
