"""The calls the HTTP bench times: named as the in-process operations they compare with,
and asking what their names say."""

from bench.http_bench import Workload
from bench.queries import BANDS


def test_each_worded_recall_asks_a_query_of_its_size_and_band():
    workload = Workload(size=1000, seed=7)
    calls = workload.tool_calls()
    worded = {name: make for name, make in calls.items() if "-word query" in name}
    assert sorted(worded) == [
        "recall, 1-word query, common words",
        "recall, 3-word query, common words",
        "recall, 3-word query, middle words",
        "recall, 3-word query, rare words",
        "recall, 6-word query, common words",
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
