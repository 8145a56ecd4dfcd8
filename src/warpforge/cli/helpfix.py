"""Typer's help at 80 columns: a switch shows no value, and no word is cut.

Typer 0.29 prints a type for every option, switches included (``--compile <bool>``, even ``--help <bool>``
and the count ``-v <int>``), which reads as if they took a value: ``--compile true`` is then a usage error.
:func:`install` makes a flag or counter show no type, drops Typer's generic types (``<str>``) below 100
columns, and folds a help word wider than its column instead of cutting it. Importing :mod:`warpforge.cli`
installs it.

Example::

    install()
    # warpforge plan predict --help:   --compile     torch.compile per block (torchtitan).
"""

from __future__ import annotations

import shutil
from typing import Any

from rich.text import Text
from typer import rich_utils
from typer.core import TyperOption

_ORIGINAL = TyperOption.display_type_rich
_ORIGINAL_HELP = rich_utils._get_parameter_help


def _display_type_rich(self: TyperOption, ctx: Any) -> str | None:
    if self.is_flag or self.count:
        return None
    shown = _ORIGINAL(self, ctx)
    # Below 100 columns Typer's generic types (``<str>``, ``<list[Path]>``: 12 characters) take the width the
    # option names need, and Rich cuts the longest name (``--unsafe-run-unsand…``). A short word still says
    # that the option takes a value (a blank would read as a switch); a metavar of its own (``CAMPAIGN``) is
    # kept, and a choice longer than ``search|llm`` is named CHOICE (the help text lists it).
    if shown and shown.startswith("<") and shutil.get_terminal_size().columns < 100:
        return _short_type(shown[1:-1])
    return shown


_SHORT = {
    "str": "TEXT",
    "int": "INT",
    "int range": "INT",
    "float": "NUM",
    "path": "PATH",
    "list[Path]": "PATH",
    "list[str]": "TEXT",
}


def _short_type(inner: str) -> str:
    if inner in _SHORT:
        return _SHORT[inner]
    return inner if "|" in inner and len(inner) <= len("search|llm") else "CHOICE" if "|" in inner else "VALUE"


def _parameter_help_folded(*args: Any, **kwargs: Any) -> Any:
    # A word wider than the help column (an environment variable: WARPFORGE_UNSAFE_RUN_UNSANDBOXED is 32
    # characters, the column 26 at 80) is folded onto the next line instead of cut with an ellipsis.
    columns = _ORIGINAL_HELP(*args, **kwargs)
    for item in getattr(columns, "renderables", []):
        if isinstance(item, Text):
            item.overflow = "fold"
    return columns


def install() -> None:
    TyperOption.display_type_rich = _display_type_rich  # type: ignore[method-assign]
    rich_utils._get_parameter_help = _parameter_help_folded
