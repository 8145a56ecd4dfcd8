"""Typer's help at 80 columns: a switch takes no value, so its help shows none.

Typer 0.29 prints a type for every option, switches included (``--compile <bool>``, even ``--help <bool>``
and the count ``-v <int>``), which reads as if they took a value: ``--compile true`` is then a usage error.
:func:`install` makes a flag or counter show no type; every other option keeps Typer's own. Importing
:mod:`warpforge.cli` installs it.

Example::

    install()
    # warpforge plan predict --help:   --compile     torch.compile per block (torchtitan).
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperOption

_ORIGINAL = TyperOption.display_type_rich


def _display_type_rich(self: TyperOption, ctx: Any) -> str | None:
    if self.is_flag or self.count:
        return None
    return _ORIGINAL(self, ctx)


def install() -> None:
    TyperOption.display_type_rich = _display_type_rich  # type: ignore[method-assign]
