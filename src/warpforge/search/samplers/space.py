"""Explicit, restricted search spaces: ordered candidate lists plus the list of feasible configurations.

GPU tuning spaces are small enough to enumerate (the recorded ones hold 4,092 to 17,956 feasible
configurations out of 4,092 to 82,944 in the cartesian product), and restrictions cut most of the
product away (gemm keeps 22%). Enumerating once lets every sampler propose only feasible,
never-measured configurations, instead of spending evaluations discovering the restrictions.

Example:
    >>> s = SearchSpace.enumerate({"bm": [16, 32, 64], "w": [4, 8]}, lambda c: c["bm"] * c["w"] <= 256)
    >>> len(s), s.as_dict(s.feasible[0]), s.key({"bm": 64, "w": 4}) in s
    (5, {'bm': 16, 'w': 4}, True)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from warpforge.errors import UsageError

if TYPE_CHECKING:
    from warpforge.evaluator.run.recorded_spaces import RecordedSpace

# Refuse to enumerate products beyond this: 2M tuples of ~10 values take ~1 GiB of Python objects.
MAX_ENUMERATE = 2_000_000


@dataclass(frozen=True)
class SearchSpace:
    """``params``: name -> candidate values in ordinal order; ``feasible``: the allowed value tuples."""

    params: dict[str, list[Any]]
    feasible: list[tuple[Any, ...]]

    def __post_init__(self) -> None:
        if not self.params:
            raise UsageError("a search space needs at least one parameter")
        for name, values in self.params.items():
            if not values:
                raise UsageError(f"parameter {name!r} has no candidate values")

    # --- conversions -----------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return list(self.params)

    def as_dict(self, config: tuple[Any, ...]) -> dict[str, Any]:
        return dict(zip(self.params, config))

    def key(self, config: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(config[name] for name in self.params)

    def to_index(self, config: Mapping[str, Any] | tuple[Any, ...]) -> tuple[int, ...]:
        """Ordinal position of each value (raises KeyError for a value that is not a candidate)."""
        values = self.key(config) if isinstance(config, Mapping) else config
        return tuple(lookup[v] for lookup, v in zip(self._value_index, values))

    def from_index(self, index: Iterable[int]) -> tuple[Any, ...]:
        return tuple(values[int(i)] for values, i in zip(self.params.values(), index))

    # --- set behaviour ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.feasible)

    def __contains__(self, config: object) -> bool:
        if isinstance(config, Mapping):
            try:
                config = self.key(config)
            except KeyError:
                return False
        return config in self._row_of

    def row(self, config: Mapping[str, Any] | tuple[Any, ...]) -> int | None:
        """Position of a configuration in ``feasible`` (None when infeasible)."""
        if isinstance(config, Mapping):
            try:
                config = self.key(config)
            except KeyError:
                return None
        return self._row_of.get(config)

    @cached_property
    def _row_of(self) -> dict[tuple[Any, ...], int]:
        return {cfg: i for i, cfg in enumerate(self.feasible)}

    @cached_property
    def _value_index(self) -> list[dict[Any, int]]:
        return [{v: i for i, v in enumerate(values)} for values in self.params.values()]

    @cached_property
    def index_matrix(self) -> np.ndarray:
        """``feasible`` as ordinal positions, shape (n_feasible, n_params), for vectorised distances."""
        if not self.feasible:
            return np.zeros((0, len(self.params)), dtype=np.int32)
        return np.array([self.to_index(c) for c in self.feasible], dtype=np.int32)

    @cached_property
    def scale(self) -> np.ndarray:
        """Per-parameter 1/(n_values - 1): a step across a parameter's whole range counts 1."""
        return np.array([1.0 / max(len(v) - 1, 1) for v in self.params.values()])

    @property
    def cartesian_size(self) -> int:
        return math.prod(len(v) for v in self.params.values())

    # --- constructors ----------------------------------------------------------------------------
    @classmethod
    def enumerate(
        cls, params: Mapping[str, Iterable[Any]], constraint: Callable[[dict[str, Any]], bool] | None = None
    ) -> SearchSpace:
        """Cartesian product of ``params`` filtered by ``constraint`` (a variant's ``constraints``)."""
        plist = {k: list(v) for k, v in params.items()}
        size = math.prod(len(v) for v in plist.values())
        if size > MAX_ENUMERATE:
            raise UsageError(f"search space has {size} configurations, more than {MAX_ENUMERATE} to enumerate")
        names = list(plist)
        feasible = [
            combo
            for combo in itertools.product(*plist.values())
            if constraint is None or constraint(dict(zip(names, combo)))
        ]
        return cls(plist, feasible)

    @classmethod
    def from_recorded(cls, recorded: RecordedSpace) -> SearchSpace:
        """The space of a recorded table: every recorded configuration, failed ones included."""
        return cls(dict(recorded.params), list(recorded.records))
