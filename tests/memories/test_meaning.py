"""Recall by meaning (SPEC §3.2): cosines blended into a lexical match's relevance, places
left over filled by memories that share no word but mean the same, marked and not
strengthened; TAPROOT_EMBEDDER=none gives the lexical ranking exactly."""

import importlib
import io
import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection

from mcp_bridge.handlers import compress, recall, remember
from memories.conf import activation_config, embedder
from memories.models import ChangeSource, Memory, Revision, Snapshot
from memories.recall.owner_index import statistics
from memories.recall.ranking import MEANING_FLOOR, activation, relevance_value
from memories.recall.vector_cache import VectorCache
from memories.services import edit_gist, import_store, migrate, restore_revision, restore_snapshot
from tests.conftest import NOW
from tests.memories.conftest import embedded_cosine

pytestmark = pytest.mark.django_db

LATER = NOW + timedelta(hours=1)
recall_module = importlib.import_module("memories.services.recall")


def cosine(query: str, memory: Memory) -> int:
    found = embedded_cosine(query, memory)
    assert found is not None
    return found


@pytest.fixture
def store(make_memory):
    return {
        "vegetarian": make_memory(gist="Vegetarian", content="Maya does not eat meat or fish."),
        "car": make_memory(gist="Car trouble", content="The car broke down; towed to a garage."),
        "dentist": make_memory(gist="Dentist", content="A filling on Tuesday at three."),
    }


def test_a_paraphrase_sharing_no_word_is_found_marked_and_not_strengthened(user, store):
    reply = recall(owner=user, query="vegan food preferences", now=LATER)
    [found] = reply["results"]
    memory = store["vegetarian"]
    assert found["id"] == str(memory.pk)
    assert found["matched_by"] == "meaning"
    assert cosine("vegan food preferences", memory) >= MEANING_FLOOR
    # A guess is not a retrieval: nothing counted, and the record says so.
    assert found["retrieval_count"] == 0
    assert found["last_retrieved"] is None
    stored_memory = Memory.objects.get(pk=memory.pk)
    assert (stored_memory.retrieval_count, stored_memory.last_retrieved) == (0, None)
    # Relevance 0.3 × cosine, in the usual activation.
    expected = activation(
        retrieval_count=0,
        last_retrieved=None,
        created_at=NOW,
        salience="medium",
        now=LATER,
        relevance_value=relevance_value(0, 1, cosine("vegan food preferences", memory)),
    )
    assert found["activation_score"] == round(expected, 3)


def test_a_memory_below_the_floor_is_not_returned(user, store):
    # The dentist means little to "automobile repair": far below the floor.
    assert cosine("automobile repair", store["dentist"]) < MEANING_FLOOR
    reply = recall(owner=user, query="automobile repair", now=LATER)
    assert [r["id"] for r in reply["results"]] == [str(store["car"].pk)]


def test_a_lexical_match_blends_its_cosine_into_its_relevance(user, store, make_memory):
    salad = make_memory(gist="Lunch", content="A salad with chickpeas for lunch.")
    reply = recall(owner=user, query="chickpeas", now=LATER)
    [found] = reply["results"][:1]
    assert found["id"] == str(salad.pk)
    assert "matched_by" not in found
    assert found["retrieval_count"] == 1  # a lexical match is a retrieval
    blended = relevance_value(1, 1, cosine("chickpeas", salad), activation_config())
    # One word, found only in the content: lexical relevance 7/10.
    expected = activation(
        retrieval_count=0,
        last_retrieved=None,
        created_at=NOW,
        salience="medium",
        now=LATER,
        relevance_value=relevance_value(7, 10, cosine("chickpeas", salad), activation_config()),
    )
    assert blended != expected  # the share matters
    assert found["activation_score"] == round(expected, 3)


def test_meaning_fills_only_places_lexical_matches_leave(user, store, make_memory):
    for i in range(3):
        make_memory(gist=f"Vegan cookbook {i}", content="Recipes.")
    # Three lexical matches and a limit of three: no place left for meaning alone.
    reply = recall(owner=user, query="vegan food preferences", limit=3, now=LATER)
    assert reply["count"] == 3
    assert all("matched_by" not in r for r in reply["results"])
    # A limit of four leaves one.
    reply = recall(owner=user, query="vegan food preferences", limit=4, now=LATER)
    assert [r.get("matched_by") for r in reply["results"]].count("meaning") == 1


def test_meaning_respects_the_filters(user, store):
    found = recall(owner=user, query="vegan food preferences", category="error", now=LATER)
    assert found["count"] == 0
    since = recall(
        owner=user, query="vegan food preferences", since="2100-01-01T00:00:00Z", now=LATER
    )
    assert since["count"] == 0
    others = recall(
        owner=user, query="vegan food preferences", ids=[str(store["car"].pk)], now=LATER
    )
    assert others["count"] == 0


def test_without_an_embedder_recall_ranks_by_words_alone(user, store, settings):
    settings.TAPROOT_EMBEDDER = "none"
    assert recall(owner=user, query="vegan food preferences", now=LATER)["count"] == 0
    reply = recall(owner=user, query="car", now=LATER)
    [found] = reply["results"]
    # Never recalled, so no history: medium salience 0.6 and the whole query, 2.5.
    assert found["activation_score"] == round(0.6 + 2.5 * 1.0, 3)


def test_the_cache_gives_exact_cosines_and_reads_what_was_written_since_from_the_database(
    user, store, make_memory, settings
):
    """A lexical match's cosine comes from the worker's cache as of the index version recall
    read; a memory written after that read is not held yet, and is read from the store."""
    query = "vegan food preferences"
    semantic = embedder()
    assert semantic is not None
    index = statistics(user.pk, [])
    query_vector = semantic.embed([query])[0]
    worker = VectorCache()
    # The worker holds the store as of the index it read.
    worker.cosines(user.pk, query_vector, [], embedder=semantic, index=index)
    later = make_memory(gist="Tofu", content="Maya cooks tofu on Mondays.")
    expected = [cosine(query, memory) for memory in (store["vegetarian"], store["car"], later)]
    settings.TAPROOT_EMBEDDER = "none"
    unvectored = make_memory(gist="Written with the embedder off", content="No vector.")
    keys = [m.pk.int for m in (store["vegetarian"], store["car"], later, unvectored)]
    got = worker.cosines(user.pk, query_vector, keys, embedder=semantic, index=index)
    assert got == [*expected, None]


def test_an_edit_is_reflected_in_the_next_recall_in_this_worker_and_another(
    user, store, monkeypatch
):
    """Each worker keeps its own cache of the owner's vectors; a write moves the owner's
    version, and every cache takes in the new vectors at its next recall."""
    this_worker, other_worker = VectorCache(), VectorCache()
    query = "vegan food preferences"

    def recall_in(worker: VectorCache) -> int:
        monkeypatch.setattr(recall_module, "CACHE", worker)
        return recall(owner=user, query=query, now=LATER)["count"]

    assert recall_in(this_worker) == recall_in(other_worker) == 1  # both warmed
    remember(
        owner=user,
        update_id=str(store["vegetarian"].pk),
        gist="Steak night",
        content="Maya grills ribeye every Friday.",
        now=LATER,
    )
    assert recall_in(this_worker) == recall_in(other_worker) == 0


def test_a_fixed_dataset_ranks_the_same_on_every_backend(user, store, make_memory):
    make_memory(gist="Garage invoice", content="Paid the mechanic for the new clutch.")
    reply = recall(owner=user, query="automobile repair", limit=5, now=LATER)
    ranked = [(r["id"], r.get("matched_by"), r["activation_score"]) for r in reply["results"]]
    by_gist = {str(m.pk): m.gist for m in Memory.objects.filter(owner=user)}
    # Written down once; the CI run on SQLite and the one on PostgreSQL both meet it.
    assert [(by_gist[i], how) for i, how, _ in ranked] == [
        ("Car trouble", "meaning"),
    ]


@pytest.fixture
def embeddings_in_transactions(monkeypatch):
    """Every call of the embedder, noting whether a write transaction was open."""
    semantic = embedder()
    assert semantic is not None
    calls: list[bool] = []
    real_embed = type(semantic).embed

    def noting(self, texts):
        calls.append(connection.in_atomic_block)
        return real_embed(self, texts)

    monkeypatch.setattr(type(semantic), "embed", noting)
    return calls


@pytest.mark.django_db(transaction=True)
def test_every_write_path_embeds_before_its_write_transaction(user, embeddings_in_transactions):
    """SQLite's write transaction holds the database's one write lock: embedding waits
    for no one inside it."""
    created = remember(owner=user, category="episodic", content="Kayak trip", gist="Kayak")
    other = remember(owner=user, category="episodic", content="Canoe trip", gist="Canoe")
    remember(owner=user, update_id=created["memory_id"], content="Kayak trip to the fjords")
    edit_gist(
        owner=user,
        memory_id=uuid.UUID(created["memory_id"]),
        gist="Fjords",
        source=ChangeSource.DASHBOARD,
    )
    compress(
        owner=user,
        ids=[created["memory_id"], other["memory_id"]],
        content="Paddling trips",
        gist="Paddling",
    )
    revision = Revision.objects.filter(memory_id=created["memory_id"]).order_by("pk").first()
    restore_revision(owner=user, revision_id=revision.pk, source=ChangeSource.DASHBOARD)
    import_store(
        owner=user,
        data=[{"id": str(uuid.uuid4()), "category": "event", "content": "Imported sail"}],
    )
    snapshot = Snapshot.objects.filter(owner=user).order_by("-pk").first()
    restore_snapshot(snapshot_id=snapshot.pk, owner=user)
    drifted = Memory.objects.get(pk=created["memory_id"])
    Memory.objects.filter(pk=drifted.pk).update(gist="", tags='["Sea"]')
    migrate(owner=user)
    call_command("reindex_taproot", stdout=io.StringIO())
    assert embeddings_in_transactions  # the paths above embedded
    assert not any(embeddings_in_transactions)


def test_meaning_looks_further_when_the_nearest_memories_are_filtered_out(user, make_memory):
    text = {"gist": "Vegetarian", "content": "Maya does not eat meat or fish."}
    for i in range(30):
        make_memory(id=uuid.UUID(int=i + 1), category="identity", **text)
    wanted = make_memory(id=uuid.UUID(int=2**128 - 1), category="episodic", **text)
    reply = recall(owner=user, query="vegan food preferences", category="episodic", limit=1)
    assert [r["id"] for r in reply["results"]] == [str(wanted.pk)]


def test_cosines_round_to_thousandths_half_to_even_from_exact_dots():
    import numpy as np

    from memories.recall.semantic import cosines_milli

    product = 2**48

    def cosine_milli(dot: int) -> int:
        """The rule one dot at a time, in Python's exact integers."""
        if dot <= 0:
            return 0
        whole, rest = divmod(1000 * dot, product)
        return whole + (2 * rest > product or (2 * rest == product and whole % 2 == 1))

    # Exact halves of a thousandth (ties to even both ways), just either side of them,
    # zero, negatives, a whole cosine and a little over it (float16 norms).
    # 1/16 = 62.5 and 3/16 = 187.5 thousandths, exactly.
    dots = [
        2**44,
        3 * 2**44,
        2**44 + 1,
        3 * 2**44 - 1,
        0,
        -5,
        -(product // 3),
        product,
        product + product // 500,
        123_456_789_012,
    ]
    assert cosines_milli(np.array(dots, dtype=np.int64)) == [cosine_milli(d) for d in dots]
    assert [cosine_milli(d) for d in dots[:4]] == [62, 188, 63, 187]


def test_the_cosine_ceiling_is_never_below_a_memorys_exact_cosine_and_close_to_the_best():
    import numpy as np

    from memories.recall.embedding import to_bytes
    from memories.recall.semantic import OwnerVectors, cosines

    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(500, 256)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    held = OwnerVectors("test", 256, None)
    held.apply((uuid.UUID(int=i + 1), to_bytes(v)) for i, v in enumerate(vectors))
    for _ in range(20):
        query = rng.normal(size=256).astype(np.float32)
        query /= np.linalg.norm(query)
        # A query near one memory, as a real one near its best match is.
        query = (query + 4 * vectors[rng.integers(500)]).astype(np.float32)
        query /= np.linalg.norm(query)
        exact = [c or 0 for c in cosines(query, [to_bytes(v) for v in vectors])]
        assert max(exact) <= held.ceiling(query) <= max(exact) + 3
    assert OwnerVectors("test", 256, None).ceiling(query) == 0


def test_rows_are_found_by_their_memory_ids_halves_whatever_the_ids(monkeypatch):
    """A recall's chosen memories are found by their ids' halves: random ids, ids sharing
    their high half (as imported ones may), ids taken in after the halves were sorted and
    ids not held (left out) alike; the ceiling over them is the best of their rows,
    scanned a few at a time."""
    import numpy as np

    from memories.recall import semantic
    from memories.recall.embedding import to_bytes
    from memories.recall.semantic import OwnerVectors, id_halves

    monkeypatch.setattr(semantic, "_GATHERED", 7)

    rng = np.random.default_rng(11)
    vectors = rng.normal(size=(400, 256)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [uuid.uuid4() for _ in range(200)] + [uuid.UUID(int=i + 1) for i in range(200)]
    never_held = [uuid.uuid4(), uuid.UUID(int=(7 << 64) | 9), uuid.UUID(int=1 << 64)]
    held = OwnerVectors("test", 256, None)

    def found_right(count: int) -> None:
        for _ in range(10):
            size = int(rng.integers(1, 60))
            chosen = sorted(rng.choice(count, size=size, replace=False).tolist())
            keys = id_halves([ids[i] for i in chosen] + never_held)
            assert sorted(held.rows_of(keys).tolist()) == chosen
            query = vectors[chosen[0]] + rng.normal(size=256).astype(np.float32)
            query /= np.linalg.norm(query)
            alone = OwnerVectors("test", 256, None)
            alone.apply((ids[i], to_bytes(vectors[i])) for i in chosen)
            assert held.ceiling(query, keys) == alone.ceiling(query)

    held.apply((ids[i], to_bytes(vectors[i])) for i in range(180))
    found_right(180)  # the halves sorted as of 180 rows
    held.apply((ids[i], to_bytes(vectors[i])) for i in range(180, 200))
    found_right(200)  # 20 rows after them: looked up by their whole ids
    held.apply((ids[i], to_bytes(vectors[i])) for i in range(200, 400))
    found_right(400)  # sorted again; half the ids share their high half
    assert held.rows_of(id_halves(never_held)).tolist() == []
    query = vectors[0]
    assert held.ceiling(query, id_halves([])) == 0
