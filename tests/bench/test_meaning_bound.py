import numpy as np

from bench.meaning_bound import best_by_groups, make_groups


def _unit_rows(rng: np.random.Generator, count: int, dimension: int) -> np.ndarray:
    rows = rng.normal(size=(count, dimension)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_a_groups_bound_is_never_below_a_dot_product_of_its_rows() -> None:
    rng = np.random.default_rng(3)
    topics = _unit_rows(rng, 8, 32)
    matrix = (topics[rng.integers(8, size=400)] + 0.3 * _unit_rows(rng, 400, 32)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    # Ties (the same row twice) and rows without a vector (zeros), as a store holds them.
    matrix[10] = matrix[11]
    matrix[20:25] = 0
    groups = make_groups(matrix)
    for query in [*_unit_rows(rng, 30, 32), matrix[11], -matrix[3], np.zeros(32, np.float32)]:
        dots = matrix @ query
        bounds = groups.bounds(query)
        assert np.all(bounds[groups.group_of] >= dots)
        found = best_by_groups(matrix, groups, query)
        # The same products, summed in another order by the BLAS.
        assert abs(found.best - float(dots.max())) < 1e-5
        assert 1 <= found.groups_read <= len(groups.centres)


def test_groups_of_well_separated_rows_spare_most_of_the_reading() -> None:
    rng = np.random.default_rng(5)
    topics = _unit_rows(rng, 20, 64)
    matrix = (topics[np.arange(2000) % 20] + 0.05 * _unit_rows(rng, 2000, 64)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    groups = make_groups(matrix)
    found = best_by_groups(matrix, groups, matrix[7])
    assert found.best >= 0.999
    assert found.rows_read < len(matrix) / 4
