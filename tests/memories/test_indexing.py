import uuid
from datetime import timedelta

import pytest

from mcp_bridge.handlers import archive, compress, promote, recall, remember, unarchive
from memories.conf import embedder, ranking_profile
from memories.models import (
    ChangeSource,
    Memory,
    MemoryTag,
    MemoryToken,
    MemoryVector,
    RecallEntry,
    RecallIndex,
    Revision,
    Snapshot,
)
from memories.recall.indexing import normalised_hash, query_keys, string_items, tag_key
from memories.recall.ranking import index_key
from memories.recall.semantic import memory_text, stored
from memories.services import (
    delete,
    edit_gist,
    import_store,
    migrate,
    restore_revision,
    restore_snapshot,
    set_curation,
)
from memories.timeutil import micros
from tests.conftest import NOW

# Written for the seed relevance profile (SPEC §3); the taproot profile has its own.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("seed_profile")]

LATER = NOW + timedelta(hours=1)


def found(user, query: str) -> set[str]:
    return {r["id"] for r in recall(owner=user, query=query, limit=50, now=LATER)["results"]}


def created(user, **fields) -> str:
    values = {"category": "episodic", "content": "Plain content", "gist": "Plain gist"}
    values.update(fields)
    return remember(owner=user, now=NOW, **values)["memory_id"]


def token_rows(memory_id) -> dict[str, bool]:
    return dict(
        MemoryToken.objects.filter(entry__memory_id=memory_id).values_list("key", "in_keywords")
    )


def test_create_indexes_keyword_tokens_apart_from_content_only_tokens(user):
    memory_id = created(
        user,
        gist="Walking the dog",
        content="The dog chased squirrels in the park",
        tags=["Pets"],
        search_keywords=["morning routine"],
    )
    rows = token_rows(memory_id)
    assert rows == {
        "walk": True,
        "the": True,
        "dog": True,
        "pets": True,  # four letters: too short for the s rule
        "morn": True,
        "routine": True,
        "chas": False,
        "squirrel": False,
        "in": False,
        "park": False,
    }
    assert set(MemoryTag.objects.filter(memory_id=memory_id).values_list("key", flat=True)) == {
        "pets"
    }
    assert MemoryToken.objects.filter(entry__memory_id=memory_id).first().owner_id == user.pk


def test_very_long_tokens_are_indexed_and_found(user):
    word = "a" * 150
    memory_id = created(user, content=f"Remember {word} exactly")
    assert index_key(word) in token_rows(memory_id)
    assert found(user, word) == {memory_id}
    assert found(user, "a" * 149 + "b") == set()


def test_query_keys_are_distinct_stemmed_tokens():
    assert query_keys("Dogs, dogs and DOG's walking!") == ["and", "dog'", "dogs", "walk"]
    assert query_keys("?!") == []
    assert query_keys(None) == []


def test_tag_keys_are_trimmed_and_case_folded():
    assert tag_key("  Straße ") == "strasse"
    assert tag_key("GARDEN") == "garden"


def test_normalised_hash_ignores_case_whitespace_and_punctuation():
    assert normalised_hash("Hello,   World!") == normalised_hash("hello world")
    assert normalised_hash("Hello\n\tworld...") == normalised_hash("HELLO WORLD")
    assert normalised_hash("Hello world") != normalised_hash("Hello word")
    assert normalised_hash("  ?!  ") == ""
    assert normalised_hash(None) == ""


@pytest.mark.parametrize(
    ("field", "old", "new"),
    [
        ("content", "Bought a kayak", "Bought a canoe"),
        ("gist", "Kayak purchase", "Canoe purchase"),
        ("tags", ["kayak"], ["canoe"]),
        ("search_keywords", ["kayak"], ["canoe"]),
    ],
)
def test_remember_update_reindexes_every_searchable_field(user, field, old, new):
    memory_id = created(user, **{field: old})
    assert found(user, "kayak") == {memory_id}
    remember(
        owner=user,
        update_id=memory_id,
        category="episodic",
        content=new if field == "content" else "Plain content",
        now=LATER,
        **({field: new} if field != "content" else {}),
    )
    assert found(user, "kayak") == set()
    assert found(user, "canoe") == {memory_id}


def test_remember_update_reindexes_tag_rows(user):
    memory_id = created(user, tags=["Kayak"])
    assert recall(owner=user, tags=["kayak"], now=LATER)["count"] == 1
    remember(owner=user, update_id=memory_id, category="episodic", content="x", tags=["Canoe"])
    assert recall(owner=user, tags=["kayak"], now=LATER)["count"] == 0
    assert recall(owner=user, tags=["canoe"], now=LATER)["count"] == 1


def test_edit_gist_reindexes(user):
    memory_id = created(user, gist="Kayak trip")
    edit_gist(
        owner=user, memory_id=uuid.UUID(memory_id), gist="Canoe trip", source=ChangeSource.DASHBOARD
    )
    assert found(user, "kayak") == set()
    assert found(user, "canoe") == {memory_id}


def test_compress_indexes_the_new_memory_and_hides_the_originals(user):
    first = created(user, content="Kayak on Monday", gist="Monday kayak")
    second = created(user, content="Kayak on Friday", gist="Friday kayak", tags=["water"])
    reply = compress(
        owner=user, ids=[first, second], content="Paddled twice", gist="Week of paddling"
    )
    assert found(user, "kayak") == set()
    assert found(user, "paddl") == {reply["memory_id"]}
    assert recall(owner=user, tags=["WATER"], now=LATER)["count"] == 1


def test_restore_revision_reindexes(user):
    memory_id = created(user, content="Bought a kayak", tags=["kayak"])
    remember(
        owner=user,
        update_id=memory_id,
        category="episodic",
        content="Bought a canoe",
        tags=["canoe"],
        now=LATER,
    )
    revision = Revision.objects.get(memory_id=memory_id)
    restore_revision(owner=user, revision_id=revision.pk, source=ChangeSource.DASHBOARD)
    assert found(user, "kayak") == {memory_id}
    assert found(user, "canoe") == set()
    assert recall(owner=user, tags=["kayak"], now=LATER)["count"] == 1
    assert recall(owner=user, tags=["canoe"], now=LATER)["count"] == 0


def test_delete_removes_index_and_tag_rows(user):
    memory_id = created(user, tags=["kayak"], content="Kayak")
    delete(owner=user, memory_id=uuid.UUID(memory_id))
    assert not Memory.objects.filter(pk=memory_id).exists()
    assert not MemoryToken.objects.filter(entry__memory_id=memory_id).exists()
    assert not MemoryTag.objects.filter(memory_id=memory_id).exists()


def test_the_index_never_mixes_owners(user, other_user):
    remember(owner=other_user, category="episodic", content="Kayak", gist="Kayak")
    assert found(user, "kayak") == set()


# --- every write path leaves the derived columns right --------------------------------


def expected_rows(memory: Memory) -> tuple[dict[str, bool], set[str]]:
    """The index rows SPEC §3 asks for, worked out here from the stored record: tokens of
    the active profile for a live memory, none for an archived one; tags for both."""

    def strings(value) -> list[str]:
        if isinstance(value, str):
            return [value]  # drift that migrate has not repaired yet
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

    tokenize = ranking_profile().tokenize
    keyword_tokens = {
        index_key(t)
        for text in [memory.gist, *strings(memory.tags), *strings(memory.search_keywords)]
        for t in tokenize(text)
    }
    content_tokens = {index_key(t) for t in tokenize(memory.content)} - keyword_tokens
    tokens = dict.fromkeys(keyword_tokens, True) | dict.fromkeys(content_tokens, False)
    tags = {index_key(t.strip().casefold()) for t in strings(memory.tags) if t.strip()}
    return (tokens if memory.archived_at is None else {}), tags


def entry_values(memory: Memory) -> tuple | None:
    """What the ranking entry of a memory must hold: None for an archived memory."""
    if memory.archived_at is not None:
        return None

    def us(moment):
        return micros(moment) if moment else None

    return (
        memory.owner_id,
        memory.category,
        memory.salience,
        memory.retrieval_count,
        us(memory.last_retrieved),
        us(memory.created_at),
        us(memory.updated_at),
    )


def assert_derived_columns_are_fresh(owner, *, after: str) -> None:
    for memory in Memory.objects.filter(owner=owner):
        tokens, tags = expected_rows(memory)
        tag_rows = set(MemoryTag.objects.filter(memory=memory).values_list("key", flat=True))
        row_owners = set(
            MemoryToken.objects.filter(entry__memory=memory).values_list("owner", flat=True)
        )
        entry = RecallEntry.objects.filter(memory=memory).values_list(
            "owner",
            "category",
            "salience",
            "retrieval_count",
            "last_retrieved_us",
            "created_us",
            "updated_us",
        )
        assert token_rows(memory.pk) == tokens, f"stale token rows after {after}"
        assert tag_rows == tags, f"stale tag rows after {after}"
        assert row_owners <= {owner.pk}, f"index rows of another owner after {after}"
        assert entry.first() == entry_values(memory), f"stale ranking entry after {after}"
        assert memory.gist_hash == normalised_hash(memory.gist), f"stale hash after {after}"
        assert memory.content_hash == normalised_hash(memory.content), f"stale hash after {after}"
        assert memory.last_touched_at == max(
            memory.updated_at, memory.last_retrieved or memory.updated_at
        ), f"stale last touch after {after}"
    semantic = embedder()
    for memory in Memory.objects.filter(owner=owner):
        vectors = MemoryVector.objects.filter(memory=memory)
        if semantic is None:
            continue
        text = memory_text(
            gist=memory.gist,
            content=memory.content,
            tags=string_items(memory.tags),
            keywords=string_items(memory.search_keywords),
        )
        vector = semantic.embed([text])[0]
        assert list(vectors.values_list("embedder", "dimension", "vector")) == [
            (semantic.name, semantic.dimension, stored(vector))
        ], f"stale vector after {after}"
    index = RecallIndex.objects.get(owner=owner)
    live = Memory.objects.for_owner(owner).live().count()
    assert (index.profile, index.live_memories) == (ranking_profile().name, live), (
        f"stale live count after {after}"
    )


@pytest.fixture(params=["seed", "taproot", "taproot without meaning"])
def profile(request, settings):
    settings.TAPROOT_RANKING = request.param.split()[0]
    settings.TAPROOT_EMBEDDER = "none" if "without" in request.param else "wordllama"
    return request.param


def test_every_write_path_keeps_the_index_hashes_and_last_touch_fresh(user, make_memory, profile):
    def step(name, action):
        action()
        assert_derived_columns_are_fresh(user, after=name)

    a = created(user, content="Bought a kayak", gist="Kayak", tags=["Water"])
    b = created(user, content="Sold the bicycle", gist="Bicycle", search_keywords=["cycling"])
    assert_derived_columns_are_fresh(user, after="create")
    step(
        "remember update",
        lambda: remember(
            owner=user,
            update_id=a,
            category="episodic",
            content="Bought a canoe instead",
            tags=["River", "boats"],
            search_keywords=["paddling"],
            now=LATER,
        ),
    )
    step("recall", lambda: recall(owner=user, query="canoe bicycle", now=LATER))
    step("promote", lambda: promote(owner=user, memory_id=b, salience="high", now=LATER))
    step(
        "set_curation",
        lambda: set_curation(
            owner=user, memory_id=uuid.UUID(b), core=True, source=ChangeSource.DASHBOARD
        ),
    )
    step(
        "edit_gist",
        lambda: edit_gist(
            owner=user, memory_id=uuid.UUID(b), gist="Bicycle sold", source=ChangeSource.DASHBOARD
        ),
    )
    step("archive", lambda: archive(owner=user, memory_id=b, reason="done"))
    step("unarchive", lambda: unarchive(owner=user, memory_id=b))
    compressed: dict = {}
    step(
        "compress",
        lambda: compressed.update(
            compress(owner=user, ids=[a, b], content="Boats, not bikes", gist="Transport")
        ),
    )
    revision = Revision.objects.filter(memory_id=a, action="update").get()
    step(
        "restore_revision",
        lambda: restore_revision(
            owner=user, revision_id=revision.pk, source=ChangeSource.DASHBOARD
        ),
    )
    drifted = make_memory(gist="Drifted", tags='["Anchor", 3]', search_keywords="Harbour")
    step("migrate", lambda: migrate(owner=user, now=LATER))
    assert Memory.objects.get(pk=drifted.pk).tags == ["Anchor"]
    step(
        "import",
        lambda: import_store(
            owner=user,
            data=[
                {
                    "id": "5d1a7e0c-0000-4000-8000-000000000001",
                    "category": "event",
                    "content": "Imported lighthouse visit",
                    "tags": '["Coast"]',
                    "updated_at": "2026-01-01T00:00:00Z",
                }
            ],
            now=LATER,
        ),
    )
    snapshot = Snapshot.objects.filter(owner=user, reason="before-migrate").get()
    step("restore_snapshot", lambda: restore_snapshot(snapshot_id=snapshot.pk, now=LATER))
    assert Memory.objects.get(pk=drifted.pk).tags == '["Anchor", 3]'
    step("delete", lambda: delete(owner=user, memory_id=uuid.UUID(b)))
    step(
        "delete a live one",
        lambda: delete(owner=user, memory_id=uuid.UUID(compressed["memory_id"])),
    )
