import os
import re
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.queries import BANDS, QUERY_SIZES, band_of, document_frequencies, query_pools
from bench.synthetic import OWNER, generate_store
from memories.recall.tokens import taproot_tokenize, tokenize

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]


def test_same_seed_size_and_now_give_the_same_store() -> None:
    first = generate_store(size=300, now=NOW, seed=3)
    second = generate_store(size=300, now=NOW, seed=3)
    assert first.fingerprint() == second.fingerprint()
    assert first.memories == second.memories


def test_another_seed_gives_another_store() -> None:
    assert (
        generate_store(size=100, now=NOW, seed=3).fingerprint()
        != generate_store(size=100, now=NOW, seed=4).fingerprint()
    )


def test_store_does_not_depend_on_the_hash_seed() -> None:
    script = (
        "from datetime import UTC, datetime\n"
        "from bench.synthetic import generate_store\n"
        "print(generate_store(size=120, now=datetime(2026, 11, 29, 12, tzinfo=UTC), seed=3)"
        ".fingerprint())\n"
    )
    digests = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        digests.add(done.stdout.strip())
    assert digests == {generate_store(size=120, now=NOW, seed=3).fingerprint()}


def test_store_has_the_promised_mix() -> None:
    store = generate_store(size=2000, now=NOW, seed=7)
    mine = store.of(OWNER)
    assert len(mine) == 2000
    assert len(store.others) == 3
    assert all(len(store.of(name)) == 100 for name in store.others)
    categories = Counter(m.category for m in mine)
    assert set(categories) == {"identity", "relationship", "active_thread", "error", "episodic"}
    assert set(Counter(m.salience for m in mine)) == {"high", "medium", "low"}
    core_share = sum(m.core for m in mine) / len(mine)
    assert 0.01 <= core_share <= 0.03
    words = [len(m.content.split()) for m in mine]
    assert min(words) >= 50 and max(words) <= 400
    gist_words = [len(m.gist.split()) for m in mine]
    assert 14 <= sum(gist_words) / len(gist_words) <= 16
    oldest = min(m.created_at for m in mine)
    assert NOW - timedelta(days=731) <= oldest < NOW - timedelta(days=600)
    recalled = [m for m in mine if m.recalls]
    assert 0.3 < len(recalled) / len(mine) < 0.8
    assert all(m.created_at <= t <= NOW for m in recalled for t in m.recalls)
    assert all(m.created_at <= m.updated_at <= NOW for m in mine)
    assert sum(bool(m.tags) for m in mine) > len(mine) / 2


def test_links_point_to_earlier_memories_of_the_same_owner() -> None:
    store = generate_store(size=500, now=NOW, seed=7)
    by_id = {m.id: m for m in store.memories}
    links = [(m, by_id[i]) for m in store.memories for i in m.linked_memories]
    assert links
    assert all(t.owner == m.owner and t.created_at <= m.created_at for m, t in links)


def test_query_words_fall_in_their_frequency_band() -> None:
    mine = generate_store(size=1000, now=NOW, seed=7).of(OWNER)
    pools = query_pools(mine, seed=7)
    frequencies = document_frequencies(mine)
    for band, (low, high) in BANDS.items():
        words = pools.band_words[band]
        assert words, band
        assert all(max(1, low * 1000) <= frequencies[w] <= high * 1000 for w in words)
        for size in QUERY_SIZES:
            queries = pools.queries[band][size]
            assert queries
            for query in queries:
                tokens = tokenize(query)
                assert len(set(tokens)) == size
                assert all(band_of(frequencies[t], 1000) == band for t in tokens)


def test_every_word_is_one_whole_token_under_both_profiles() -> None:
    """So the query bands (and the store) are the same whichever profile is measured."""
    for memory in generate_store(size=300, now=NOW, seed=7).of(OWNER):
        for word in re.findall(r"[a-z]+", memory.content.lower()):
            assert tokenize(word) == [word]
            assert taproot_tokenize(word) == [word]
