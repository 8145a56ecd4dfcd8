"""One registry type for every extension point (backends, proposers): name -> class, complete in any process.

A registry is created where its contract is defined, with a table of its built-in members as import paths
(``"package.module:Class"``). Looking a name up imports its module on first use, so the registry holds every
built-in whatever was imported before (a fresh ``make_pool("interpret", ...)`` or ``get_proposer("llm")``
works without importing the implementation first), and the contract module never imports its
implementations at load time: the dependency still points from implementation to contract. A plug-in
registers itself with :meth:`Registry.register`.

Example::

    >>> reg = Registry("codec", {"json": "json:JSONDecoder"})
    >>> "json" in reg, reg["json"].__name__
    (True, 'JSONDecoder')
    >>> reg["yaml"]
    Traceback (most recent call last):
    ...
    warpforge.errors.UsageError: unknown codec 'yaml': available: json
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

from warpforge.errors import UsageError

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> class for one extension point; built-ins given as ``"module:attr"`` and imported on first use."""

    def __init__(self, kind: str, builtins: Mapping[str, str], *, name_of: Callable[[T], str] | None = None) -> None:
        self.kind = kind
        self._paths = dict(builtins)
        self._members: dict[str, T] = {}
        self._name_of = name_of or (lambda cls: str(getattr(cls, "name", "")))

    def register(self, cls: T) -> T:
        """Class decorator: make ``cls`` available under its ``name``."""
        name = self._name_of(cls)
        if not name:
            raise ValueError(f"{getattr(cls, '__qualname__', cls)!r} has no name: set the class attribute `name`")
        self._members[name] = cls
        return cls

    def names(self) -> list[str]:
        return sorted(set(self._paths) | set(self._members))

    def builtins(self) -> list[str]:
        """The names given at construction (the product's own), whatever else was registered since."""
        return sorted(self._paths)

    def __contains__(self, name: object) -> bool:
        return name in self._members or name in self._paths

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __getitem__(self, name: str) -> T:
        if name not in self._members and name in self._paths:
            module, _, attr = self._paths[name].partition(":")
            member = getattr(importlib.import_module(module), attr)  # its module's decorator registers it too
            self._members.setdefault(name, member)
        if name not in self._members:
            raise UsageError(f"unknown {self.kind} {name!r}: available: {', '.join(self.names())}")
        return self._members[name]

    def get(self, name: str, default: T | None = None) -> T | None:
        return self[name] if name in self else default

    def items(self) -> list[tuple[str, T]]:
        return [(name, self[name]) for name in self.names()]
