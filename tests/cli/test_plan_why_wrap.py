"""`plan search`'s reasons at 80 columns: a line never ends between a number and its unit or its comparison."""

from __future__ import annotations

import re

import pytest

from warpforge.cli.plan_render import hanging

# A reason as the planner writes it (cli/plan_render.py prints "  #rank " before it).
WHY = (
    "  #4 0.8% slower than #1 with dp 8 (vs 4), cp 2 (vs 4), interleave 4 (vs 1), zero 3 (vs 2): exposed DP comm "
    "2.32 s vs 0.218 s; pipeline p2p 0.372 s vs 0.0955 s; largest share activations 47.1 GiB (pipeline rank 0)"
)


@pytest.mark.parametrize("width", range(40, 121, 3))
def test_reasons_wrap_whole_with_a_hanging_indent(width: int) -> None:
    lines = hanging(WHY, width).splitlines()
    assert " ".join(line.strip() for line in lines).split() == WHY.split()  # nothing lost or reordered
    assert all(len(line) <= width for line in lines)
    assert all(line.startswith("      ") for line in lines[1:])
    for line, after in zip(lines, lines[1:]):
        # Old, folded by the console: "... pipeline p2p 0.372 s vs 0.0955" / "s".
        assert not (re.search(r"\d$", line) and re.match(r"\s*(s|GiB)\b", after)), (line, after)
        assert not re.match(r"\s*\(vs", after) and not re.search(r"\(vs$", line), (line, after)
        assert not (re.search(r"\b(rank|dp|cp|tp|pp|zero)$", line) and re.match(r"\s*\d", after)), (line, after)
