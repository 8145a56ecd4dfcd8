"""Races between one launch's programs (child/races.py): which accesses are one, decided by hand."""

from __future__ import annotations

import numpy as np
import torch

from warpforge.evaluator.sandbox.child.races import conflicts, locate


def _a(*addresses: int) -> np.ndarray:
    return np.array(addresses, dtype=np.uint64)


def test_programs_on_their_own_elements_do_not_race() -> None:
    stores = [(0, _a(0, 4, 8)), (1, _a(12, 16)), (0, _a(0))]  # program 0 writes element 0 twice: its own
    loads = [(0, _a(0, 4)), (1, _a(0, 100)), (2, _a(100))]  # loads of what nobody else stored, or of inputs
    assert conflicts(stores, loads[:1]) == []
    assert conflicts([], loads) == []


def test_two_programs_storing_one_element_race() -> None:
    assert conflicts([(0, _a(0, 4)), (3, _a(8, 4))], []) == [(4, 0, 3, "store/store")]


def test_a_load_of_another_programs_store_races() -> None:
    # program 2 reads element 8, which program 1 wrote: a GPU may run 2 before 1
    assert conflicts([(1, _a(8)), (2, _a(12))], [(2, _a(8, 12))]) == [(8, 1, 2, "store/load")]


def test_the_address_is_named_by_argument_and_element() -> None:
    x, out = torch.zeros(10), torch.zeros(6, dtype=torch.float16)
    assert locate(out.data_ptr() + 2 * 5, {"x_ptr": x, "out_ptr": out, "n": 6}) == "out_ptr[5]"
    assert locate(1, {"x_ptr": x}) == "0x1"
