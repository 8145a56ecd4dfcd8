"""SearchSpace: explicit feasible configurations over ordered candidate lists."""

from __future__ import annotations

import pytest

from warpforge.evaluator.run.recorded_spaces import RecordedSpace, RecordedTime
from warpforge.search.samplers.space import SearchSpace


def test_enumerate_with_constraint() -> None:
    s = SearchSpace.enumerate({"bm": [16, 32, 64], "w": [4, 8]}, lambda c: c["bm"] * c["w"] <= 256)
    assert len(s) == 5 and s.cartesian_size == 6
    assert (64, 8) not in s and {"bm": 64, "w": 4} in s
    assert {"bm": 64} not in s and {"bm": 48, "w": 4} not in s
    assert s.to_index({"bm": 32, "w": 8}) == (1, 1)
    assert s.from_index([2, 0]) == (64, 4)
    assert s.row((16, 4)) == 0 and s.row((64, 8)) is None
    assert s.index_matrix.shape == (5, 2)
    assert list(s.scale) == [0.5, 1.0]


def test_rejects_empty_parameters() -> None:
    with pytest.raises(ValueError):
        SearchSpace({}, [])
    with pytest.raises(ValueError, match="no candidate"):
        SearchSpace({"a": []}, [])


def test_enumerate_refuses_huge_products() -> None:
    with pytest.raises(ValueError, match="more than"):
        SearchSpace.enumerate({f"p{i}": list(range(10)) for i in range(7)})


def test_from_recorded_keeps_failures() -> None:
    rec = RecordedSpace("", "", None, {"x": [1, 2, 3]}, {(1,): RecordedTime("ok", 1.0), (3,): RecordedTime("runtime")})
    s = SearchSpace.from_recorded(rec)
    assert s.feasible == [(1,), (3,)] and (2,) not in s
