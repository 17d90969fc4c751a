import json

import numpy as np

from bench.chosen_scan import held_vectors, main, measure


def test_the_halves_given_are_those_of_the_ids_held() -> None:
    held, halves = held_vectors(300, 16, seed=3)
    assert len(held.ids) == 300 and halves.shape == (300, 2)
    picked = np.array([5, 17, 299])
    assert sorted(held.rows_of(halves[picked]).tolist()) == picked.tolist()


def test_each_count_is_timed_alone_and_beside_every_vector(tmp_path, capsys) -> None:
    rows = measure(500, [10, 200], rounds=3)
    assert [row["chosen"] for row in rows] == [10, 200]
    assert all(row["alone_ms"] > 0 and row["every_vector_ms"] > 0 for row in rows)
    out = tmp_path / "chosen.json"
    main(["--size", "400", "--chosen", "50", "--rounds", "2", "--out", str(out)])
    assert "scanned alone" in capsys.readouterr().out
    assert [row["chosen"] for row in json.loads(out.read_text())] == [50]
