"""The call timeline's medians: each step between consecutive notes, a repeated step told
apart by its count (the second trip to a database thread)."""

from bench.timeline_app import step_medians


def request(*steps: tuple[str, float]) -> list[tuple[str, float]]:
    return [(name, at / 1000) for name, at in steps]


def test_each_step_is_the_median_time_between_its_two_notes():
    requests = [
        request(("arrived", 0), ("trip", 1), ("resumed", 3), ("trip", 4), ("resumed", 10)),
        request(("arrived", 0), ("trip", 2), ("resumed", 3), ("trip", 5), ("resumed", 9)),
        request(("arrived", 0), ("trip", 1), ("resumed", 5), ("trip", 6), ("resumed", 8)),
    ]
    medians = step_medians(requests)
    assert medians == {
        "arrived -> trip": 1.0,
        "trip -> resumed": 2.0,
        "resumed -> trip#2": 1.0,
        "trip#2 -> resumed#2": 4.0,
        "request, in all": 9.0,
    }
