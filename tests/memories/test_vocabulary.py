import pytest

from memories.vocabulary import home_category


@pytest.mark.parametrize(
    ("stored", "home"),
    [
        ("identity", "identity"),
        ("  Active_Thread ", "active_thread"),
        ("event", "episodic"),
        ("project", "active_thread"),
        ("identity_observations", "identity"),
        ("something else", "error"),
        ("", "error"),
        # What an imported or hand-edited record may hold instead of text.
        (None, "error"),
        (5, "error"),
        (["identity"], "error"),
    ],
)
def test_a_stored_category_has_one_home(stored, home):
    assert home_category(stored) == home
