"""Candidate text is inert wherever a person reads it: the terminal (every CLI console and the log lines) and the
dashboard's pages. Expected strings are written out by hand, byte for byte."""

from __future__ import annotations

import io
import logging

import pytest
from rich.table import Table

from warpforge.inert import InertConsole, inert

# What a candidate who wants the verdict line rewritten writes: erase the line, return the cursor, a green "ok",
# an 8-bit CSI (C1), a bell, a NUL, and a right-to-left override that reorders what follows on screen.
ATTACK = "boom\x1b[2K\r\x1b[32mok\x1b[0m \x9b1A\x07\x00 \u202eexe.txt"
SHOWN = "boom\\x1b[2K\\x0d\\x1b[32mok\\x1b[0m \\x9b1A\\x07\\x00 \\u202eexe.txt"
ACTIVE = ("\x1b", "\r", "\x9b", "\x07", "\x00", "\u202e")


def test_inert_writes_every_active_character_as_its_escape_and_keeps_newlines_and_tabs() -> None:
    assert inert(ATTACK) == SHOWN
    assert inert("a\nb\tc \u00e9\u4e2d") == "a\nb\tc \u00e9\u4e2d"  # text, not controls
    assert inert("\x7f\x85\u2066\u2069") == "\\x7f\\x85\\u2066\\u2069"


def test_the_cli_console_prints_candidate_text_inert_in_text_tables_and_rules() -> None:
    buf = io.StringIO()
    console = InertConsole(file=buf, width=200, force_terminal=False)
    table = Table("message")
    table.add_row(ATTACK)
    console.print(ATTACK, markup=False, highlight=False)
    console.print(table)
    console.rule(ATTACK)
    out = buf.getvalue()
    assert out.count(SHOWN) == 3 and not any(c in out for c in ACTIVE)


@pytest.mark.parametrize("verbose", [0, 1])
def test_log_lines_are_inert(verbose: int) -> None:
    from warpforge.logs import configure

    buf = io.StringIO()
    handler = configure(verbose=verbose, stream=buf)
    try:
        logging.getLogger("warpforge.test").warning("candidate said %s", ATTACK)
    finally:
        logging.getLogger("warpforge").removeHandler(handler)
    out = buf.getvalue()  # Rich folds the line at 80 columns: the escapes are checked up to the fold
    assert "candidate said boom\\x1b[2K\\x0d\\x1b[32mok" in out and not any(c in out for c in ACTIVE)


def test_the_dashboards_pages_print_candidate_text_inert() -> None:
    from markupsafe import Markup

    from warpforge.dashboard.app import templates

    env = templates().env
    page = env.from_string("<p>{{ message }}</p><p>{{ html }}</p>").render(
        message=ATTACK + "<script>", html=Markup("<b>" + ATTACK + "</b>")
    )
    assert page == f"<p>{SHOWN}&lt;script&gt;</p><p><b>{SHOWN}</b></p>"
