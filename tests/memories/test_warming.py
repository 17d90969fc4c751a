"""Reading recent owners' common words ahead at a worker's start (memories.recall.warming,
issue 32): the words chosen are those common among the owner's newest memories,
commonest first, within the room given; the owners read are those holding an access
token still valid, with stores large enough; the postings read ahead are the index
exactly (recall ranks as the reference from them, after a write too); a few words are
read a statement; a failure is logged and the worker starts all the same.

The stores here are small, so the fixture `small` scales the thresholds down. Start-up
reads the database from a thread of its own, so these tests commit what they write."""

from datetime import timedelta

import pytest
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_bridge import handlers
from memories.recall import postings, warming
from memories.recall.postings import POSTINGS, Postings
from memories.recall.warming import common_words, recent_owners, warm_recent_owners
from taproot_site.asgi import build_application
from tests.conftest import NOW
from tests.memories.test_recall_cut import assert_ranked_as_the_reference
from tests.memories.test_reindex import start_up

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def small(monkeypatch, settings):
    """Thresholds for a store of a few dozen memories: read ahead from 10 memories, the
    newest 20 sampled, a word worth it from 5 memories; every query of several words
    served from held postings."""
    monkeypatch.setattr(warming, "WARM_FROM", 10)
    monkeypatch.setattr(warming, "SAMPLE", 20)
    monkeypatch.setattr(warming, "WORTH", 5)
    monkeypatch.setattr(postings, "HOLD_FROM", 0)
    settings.TAPROOT_WARM_OWNERS = True
    POSTINGS.clear()
    yield
    POSTINGS.clear()


def _remember(user, n: int, content: str) -> None:
    handlers.remember(
        owner=user,
        category="episodic",
        gist=f"Lantern {n}",
        content=content,
        salience=("high", "medium", "low")[n % 3],
        now=NOW - timedelta(days=30 - n),
    )


@pytest.fixture
def village(user):
    """Thirty memories, oldest first: "lantern" in every one, "harbor" (with "dusk", "gull"
    and "tide") in seventeen of the newest twenty, "meadow" in the other three, "quill" in
    the oldest ten only."""
    for n in range(30):
        if n < 10:
            content = "A quill by the window."
        elif n in (12, 17, 25):
            content = "A meadow at dawn."
        else:
            content = "The harbor at dusk, a gull over the tide."
        _remember(user, n, content)
    return user


def test_the_words_common_among_the_newest_memories_are_chosen_commonest_first(village, small):
    chosen = common_words(village.pk, 30, room=10**6)

    assert chosen.index("lantern") < chosen.index("harbor")
    assert "quill" not in chosen  # common only among older memories
    assert "meadow" not in chosen  # held by too few to be worth it


def test_the_words_chosen_fit_in_the_room_given(village, small):
    one_word = 9 * 30 + Postings.OVERHEAD

    assert common_words(village.pk, 30, room=one_word) == ["lantern"]
    assert common_words(village.pk, 30, room=one_word - 1) == []


def test_a_store_too_small_is_not_read_ahead(village, small, monkeypatch):
    monkeypatch.setattr(warming, "WARM_FROM", 31)

    assert common_words(village.pk, 30, room=10**6) == []


def test_only_the_owner_s_memories_are_counted(village, small, other_user):
    for n in range(30):
        _remember(other_user, n, "An otter in the reeds.")

    assert "otter" not in common_words(village.pk, 30, room=10**6)
    assert "otter" in common_words(other_user.pk, 30, room=10**6)


def _token(user, *, expires_in=timedelta(hours=1), issued=None):
    application = get_application_model().objects.create(
        name=f"client of {user.username}",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="https://claude.ai/api/mcp/auth_callback",
        user=user,
    )
    token = get_access_token_model().objects.create(
        user=user,
        application=application,
        token=f"token-{application.pk}",
        expires=timezone.now() + expires_in,
        scope="memories",
    )
    if issued is not None:
        get_access_token_model().objects.filter(pk=token.pk).update(created=issued)
    return token


def test_the_owners_read_ahead_hold_a_valid_token_and_a_large_store(
    village, small, other_user, django_user_model
):
    third = django_user_model.objects.create_user(username="carol", password="pw-carol-123")
    for n in range(30):
        _remember(other_user, n, "An otter in the reeds.")
        _remember(third, n, "A heron by the weir.")
    dan = django_user_model.objects.create_user(username="dan", password="pw-dan-1234")
    _remember(dan, 1, "A store too small.")
    now = timezone.now()
    _token(third, expires_in=timedelta(hours=-1), issued=now)  # expired
    _token(dan, issued=now)
    _token(other_user, issued=now - timedelta(minutes=2))
    _token(village, issued=now - timedelta(minutes=1))

    assert recent_owners() == [(village.pk, 30), (other_user.pk, 30)]  # the latest token first
    _token(other_user, issued=now)
    assert recent_owners() == [(other_user.pk, 30), (village.pk, 30)]


def test_the_words_read_ahead_are_held_and_recall_ranks_as_the_reference_from_them(
    village, small, other_user
):
    _remember(other_user, 1, "A lantern in the harbor.")
    _token(village)
    _token(other_user)  # a store too small
    warm_recent_owners()

    assert POSTINGS.holds(village.pk, "lantern") and POSTINGS.holds(village.pk, "harbor")
    assert not POSTINGS.holds(other_user.pk, "lantern")
    later = NOW + timedelta(days=1)
    assert_ranked_as_the_reference(village, "lantern harbor", limit=3, now=later)
    _remember(village, 40, "A harbor lantern, newly lit.")  # the held words follow it
    assert_ranked_as_the_reference(village, "lantern harbor", limit=3, now=later)


def test_a_few_words_are_read_a_statement(village, small, monkeypatch):
    monkeypatch.setattr(warming, "BATCH", 2)
    read = []
    original = POSTINGS.statistics

    def statistics(owner_id, keys):
        read.append(list(keys))
        return original(owner_id, keys)

    monkeypatch.setattr(POSTINGS, "statistics", statistics)
    _token(village)
    warm_recent_owners()

    chosen = common_words(village.pk, 30, room=POSTINGS.budget // 2)
    assert len(chosen) == 5
    assert read == [chosen[:2], chosen[2:4], chosen[4:]]  # the fifth word alone is held too
    assert all(POSTINGS.holds(village.pk, word) for word in chosen)


def test_nothing_is_read_ahead_when_turned_off(village, small, settings):
    settings.TAPROOT_WARM_OWNERS = False
    _token(village)
    warm_recent_owners()

    assert POSTINGS.held_bytes() == 0


def test_a_worker_reads_ahead_as_it_starts_and_starts_when_the_read_fails(
    village, small, monkeypatch, capfd
):
    _token(village)
    assert start_up(build_application())["type"] == "lifespan.startup.complete"
    assert POSTINGS.holds(village.pk, "lantern")

    POSTINGS.clear()

    def fail(*args, **named):
        raise ValueError("a list the statement gave could not be read")

    monkeypatch.setattr(warming, "keys_of_newest", fail)
    assert start_up(build_application())["type"] == "lifespan.startup.complete"
    assert POSTINGS.held_bytes() == 0
    # Start-up sets logging up again, so the warning is read where its handler writes it.
    assert "Could not read recent accounts' common words ahead." in capfd.readouterr().err
