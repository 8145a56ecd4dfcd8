"""Races between the programs of one launch, found in Triton's interpreter (runs in the child).

The interpreter runs a launch's programs one at a time, so a non-atomic read-add-store shared by programs is
exact in every order (the shuffled grid of child/grid.py cannot expose it), where a GPU runs them at once and
loses updates. Here every program's plain loads and stores are recorded as element addresses (masked-off lanes
left out; atomics, which the hardware orders, never recorded), and at the end of each launch two programs that
touch one address where at least one of them stores to it plainly is a race: ``incorrect: data_race``, with the
address (the argument and element it falls in) and the two programs. An honest split-K kernel adds its partial
tiles with ``tl.atomic_add`` and is not one.

Every load and store of the interpreter goes through ``create_masked_load``/``create_masked_store`` (Triton
3.4-3.9; plain, block-pointer and descriptor accesses alike); if they are missing, :func:`install` raises
``InterpreterLayout`` (no verdict, never an ``ok``). What the launch records is a claim, as the grid log is: no
name reaches it from a candidate under the grammar.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# At most this many races are described per launch (the first is the verdict's message).
MAX_REPORTED = 3


class Races:
    """The running launch's accesses, by program; ``found`` collects the races of every launch (read per case)."""

    recording = False
    program = 0
    stores: list[tuple[int, np.ndarray]] = []
    loads: list[tuple[int, np.ndarray]] = []
    found: list[dict[str, Any]] = []

    @classmethod
    def begin(cls) -> None:
        cls.recording, cls.program, cls.stores, cls.loads = True, 0, [], []

    @classmethod
    def record(cls, into: list[tuple[int, np.ndarray]], ptrs: Any, mask: Any) -> None:
        if not cls.recording:
            return
        addresses = np.asarray(ptrs, dtype=np.uint64)
        if mask is not None:
            addresses = addresses[np.broadcast_to(np.asarray(mask, dtype=bool), addresses.shape)]
        if addresses.size:
            into.append((cls.program, addresses.ravel()))

    @classmethod
    def end(cls, grid_order: list[tuple[int, int, int]], arguments: dict[str, Any]) -> None:
        """Close the launch: the races among its programs join ``found``."""
        cls.recording = False
        stores, loads, cls.stores, cls.loads = cls.stores, cls.loads, [], []
        for race in conflicts(stores, loads)[:MAX_REPORTED]:
            address, writer, other, kind = race
            cls.found.append(
                {
                    "address": int(address),
                    "where": locate(int(address), arguments),
                    "programs": [list(grid_order[writer]), list(grid_order[other])],
                    "kind": kind,
                }
            )


def _flat(accesses: list[tuple[int, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    if not accesses:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    addresses = np.concatenate([a for _, a in accesses])
    programs = np.concatenate([np.full(a.size, p, np.int64) for p, a in accesses])
    return addresses, programs


def conflicts(
    stores: list[tuple[int, np.ndarray]], loads: list[tuple[int, np.ndarray]]
) -> list[tuple[int, int, int, str]]:
    """(address, storing program, other program, "store/store" or "store/load") for addresses two programs touch
    where one stores plainly; programs are indices into the launch's order."""
    s_addr, s_prog = _flat(stores)
    if not s_addr.size:
        return []
    order = np.lexsort((s_prog, s_addr))
    s_addr, s_prog = s_addr[order], s_prog[order]
    first = np.ones(s_addr.size, bool)
    first[1:] = s_addr[1:] != s_addr[:-1]
    starts = np.flatnonzero(first)
    ends = np.append(starts[1:], s_addr.size) - 1
    uniq, low, high = s_addr[starts], s_prog[starts], s_prog[ends]  # each address's lowest and highest storer
    out: list[tuple[int, int, int, str]] = []
    for i in np.flatnonzero(low != high)[:MAX_REPORTED]:
        out.append((int(uniq[i]), int(low[i]), int(high[i]), "store/store"))
    l_addr, l_prog = _flat(loads)
    if l_addr.size:
        at = np.clip(np.searchsorted(uniq, l_addr), 0, uniq.size - 1)
        hit = (uniq[at] == l_addr) & ((low[at] != l_prog) | (high[at] != l_prog))
        for j in np.flatnonzero(hit)[:MAX_REPORTED]:
            storer = int(low[at[j]]) if low[at[j]] != l_prog[j] else int(high[at[j]])
            out.append((int(l_addr[j]), storer, int(l_prog[j]), "store/load"))
    return out


def locate(address: int, arguments: dict[str, Any]) -> str:
    """``out[12]``: the launch argument whose memory holds ``address`` and the element, as far as it is known."""
    for name, value in arguments.items():
        data_ptr = getattr(value, "data_ptr", None)
        if not callable(data_ptr):
            continue
        start, size = int(data_ptr()), int(value.element_size())
        if start <= address < start + value.untyped_storage().nbytes():
            return f"{name}[{(address - start) // size}]"
    return hex(address)


def install() -> None:
    """Record every plain load and store of the interpreter builder (idempotent)."""
    from triton.runtime import interpreter as interp

    from warpforge.evaluator.sandbox.child.faithful import InterpreterLayout

    builder = getattr(interp, "InterpreterBuilder", None)
    needed = ("create_masked_load", "create_masked_store")
    if builder is None or not all(callable(getattr(builder, m, None)) for m in needed):
        raise InterpreterLayout("InterpreterBuilder.create_masked_load/create_masked_store are missing")
    if getattr(builder, "_warpforge_races", False):
        return
    load, store = builder.create_masked_load, builder.create_masked_store

    def masked_load(self: Any, ptrs: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
        Races.record(Races.loads, ptrs.data, getattr(mask, "data", None))
        return load(self, ptrs, mask, *rest, **kw)

    def masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
        Races.record(Races.stores, ptrs.data, getattr(mask, "data", None))
        return store(self, ptrs, value, mask, *rest, **kw)

    builder.create_masked_load = masked_load
    builder.create_masked_store = masked_store
    # Triton's atomic loads and stores (and polls) are built on the masked ones: not plain accesses.
    for name in ("create_atomic_load", "create_atomic_store", "create_atomic_poll"):
        if callable(getattr(builder, name, None)):
            setattr(builder, name, _unrecorded(getattr(builder, name)))
    builder._warpforge_races = True


def _unrecorded(method: Any) -> Any:
    def call(*args: Any, **kw: Any) -> Any:
        was, Races.recording = Races.recording, False
        try:
            return method(*args, **kw)
        finally:
            Races.recording = was

    return call
