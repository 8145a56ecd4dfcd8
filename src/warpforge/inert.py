r"""Text a candidate controls, made inert wherever a person reads it.

A kernel's exception text, a SPACE's string values, a variant's file name and an LLM's reply reach the terminal,
the logs, reports and the dashboard. A terminal obeys the escape sequences in them: ``\x1b[2K\r`` erases the
verdict line and ``\x1b[32mok`` prints a green ok in its place. Rich passes ESC through (it drops only ``\r``, BEL
and a few others), and so does ``print``. :func:`inert` writes every C0 and C1 control character (newline and tab
kept), DEL and the Unicode bidirectional overrides (which reorder what a reader sees, as in "Trojan Source") as
visible ``\xNN`` / ``\uNNNN`` escapes: the text still says what was sent, and nothing acts on it.
:class:`InertConsole` is the Rich console every CLI command and the log handler print through: every string it
renders (``print``, table cells, rules, log lines) is made inert first. JSON output needs nothing more:
``json.dumps`` escapes control characters itself.

    >>> inert("bad\x1b[2K\rok \u202egnp.exe")
    'bad\\x1b[2K\\x0dok \\u202egnp.exe'
    >>> inert("line one\nline two\tend")
    'line one\nline two\tend'
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console

# C0 but \t and \n, DEL, C1; the bidi embeddings/overrides U+202A-U+202E and isolates U+2066-U+2069.
_ACTIVE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: str) -> str:
    """``text`` with every character a terminal or a bidi renderer would act on written as its escape."""
    return _ACTIVE.sub(_escape, text)


class InertConsole(Console):
    """A Rich console that renders every string inert (:func:`inert`); Rich's own styling is unaffected."""

    def render_str(self, text: str, **kwargs: Any) -> Any:
        return super().render_str(inert(text), **kwargs)
