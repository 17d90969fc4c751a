import pytest

from memories.errors import InvalidInput
from memories.validation import coerce_string_list, optional_text, require_text


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
