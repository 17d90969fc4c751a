import uuid
from datetime import timedelta

import pytest

from mcp_bridge.handlers import close
from memories.errors import InvalidInput
from memories.models import Closing
from memories.services import reflect
from tests.conftest import NOW
from tests.store import unchanged

pytestmark = pytest.mark.django_db


def test_close_stores_the_reflection_and_replies_exactly_as_the_spec_says(user):
    reply = close(
        owner=user,
        reflection="Good talk about the garden.",
        conversation_title="Garden planning",
        conversation_url="https://claude.ai/chat/abc",
        now=NOW,
    )
    assert list(reply) == ["status", "action", "reflection_id", "message"]
    assert reply["status"] == "ok"
    assert reply["action"] == "closed"
    assert reply["message"] == "Reflection stored. Safe travels."
    closing = Closing.objects.get(pk=uuid.UUID(reply["reflection_id"]))
    assert closing.owner == user
    assert closing.reflection == "Good talk about the garden."
    assert closing.conversation_title == "Garden planning"
    assert closing.conversation_url == "https://claude.ai/chat/abc"
    assert closing.created_at == NOW


def test_close_without_title_or_url_stores_none(user):
    reply = close(owner=user, reflection="Short one.", conversation_title="  ")
    closing = Closing.objects.get(pk=reply["reflection_id"])
    assert closing.conversation_title is None
    assert closing.conversation_url is None


def test_every_close_is_a_new_closing(user):
    first = close(owner=user, reflection="Same words.")
    second = close(owner=user, reflection="Other words.")
    assert first["reflection_id"] != second["reflection_id"]
    assert Closing.objects.count() == 2


def test_a_reflection_of_exactly_10000_characters_is_kept(user):
    reply = close(owner=user, reflection="r" * 10_000)
    assert Closing.objects.get(pk=reply["reflection_id"]).reflection == "r" * 10_000


def test_a_reflection_is_stored_trimmed_and_reflect_shows_it_unpadded(user):
    close(owner=user, reflection="\n\n  Good talk about the garden.  \n\t ", now=NOW)
    assert Closing.objects.get().reflection == "Good talk about the garden."
    (shown,) = reflect(owner=user, now=NOW).payload["recent_closings"]
    assert shown["reflection"] == "Good talk about the garden."


def test_the_reflection_limit_counts_the_trimmed_text(user):
    reply = close(owner=user, reflection="  " + "r" * 10_000 + "\n")
    assert Closing.objects.get(pk=reply["reflection_id"]).reflection == "r" * 10_000


@pytest.mark.parametrize("reflection", [None, "", "   \n\t", 7, "r" * 10_001])
def test_blank_or_oversized_reflections_are_refused(user, reflection):
    with unchanged(), pytest.raises(InvalidInput) as refused:
        close(owner=user, reflection=reflection)
    assert "reflection" in refused.value.message


def test_titles_over_200_characters_are_refused(user):
    assert close(owner=user, reflection="ok", conversation_title="t" * 200)["status"] == "ok"
    with unchanged(), pytest.raises(InvalidInput) as refused:
        close(owner=user, reflection="ok", conversation_title="t" * 201)
    assert "200" in refused.value.message


def test_closings_belong_to_their_owner(user, other_user):
    close(owner=user, reflection="Mine.", now=NOW)
    close(owner=other_user, reflection="Theirs.", now=NOW + timedelta(seconds=1))
    assert list(Closing.objects.for_owner(user).values_list("reflection", flat=True)) == ["Mine."]
