"""The calls the HTTP bench times: named as the in-process operations they compare with,
and asking what their names say."""

from bench.http_bench import SERVED, Workload
from bench.queries import BANDS
from bench.timing import RunPlan


def test_each_worded_recall_asks_a_query_of_its_size_and_band():
    workload = Workload(size=1000, seed=7)
    calls = workload.tool_calls()
    worded = {name: make for name, make in calls.items() if "-word query" in name}
    assert sorted(worded) == [
        "recall, 1-word query, common words",
        "recall, 3-word query, common words",
        "recall, 3-word query, common words, each served before",
        "recall, 3-word query, middle words",
        "recall, 3-word query, rare words",
        "recall, 6-word query, common words",
        "recall, 6-word query, common words, each served before",
    ]
    for name, make in worded.items():
        size = int(name.split(", ")[1].split("-")[0])
        band = name.split(", ")[2].removesuffix(" words")
        assert band in BANDS
        for i in range(5):
            tool, arguments = make(i)
            assert tool == "taproot_recall"
            words = arguments["query"].split()
            assert len(words) == size
            assert all(word in workload.pools.band_words[band] for word in words)


def test_a_recall_timed_once_served_has_served_every_query_of_its_pool_first():
    """Its warm-up calls every query of the pool, so each timed call is one served before;
    the others warm up as the plan says."""
    workload = Workload(size=1000, seed=7)
    calls = workload.tool_calls()
    plan = RunPlan(warmup=5)
    for size in (3, 6):
        name = SERVED.format(size=size)
        pool = workload.pools.queries["common"][size]
        warmup = workload.warmup(name, plan)
        assert warmup == len(pool) + 5
        warmed = {calls[name](i)[1]["query"] for i in range(warmup)}
        assert warmed == set(pool)
        assert all(calls[name](warmup + i)[1]["query"] in warmed for i in range(100))
    assert workload.warmup("recall, 3-word query, common words", plan) == 5
