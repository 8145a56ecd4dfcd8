"""Jinja2 filters: numbers, intervals, hashes and times as the pages show them (never HTML, only text).

Example::

    >>> speedup(1.234, 1.1, 1.3)
    '1.23x [1.10-1.30]'
    >>> ms(0.012345)
    '0.01235 ms'
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any


def num(x: float | None, digits: int = 4) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g} ms"


def speedup(x: float | None, low: float | None = None, high: float | None = None) -> str:
    if x is None:
        return "-"
    if low is not None and high is not None:
        return f"{x:.3g}x [{low:.3g}-{high:.3g}]"
    return f"{x:.3g}x"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}%"


def short(h: str | None, n: int = 12) -> str:
    return "" if not h else h[:n]


def when(t: datetime | str | None) -> str:
    if t is None:
        return "-"
    if isinstance(t, str):
        return t[:19].replace("T", " ")
    return t.strftime("%Y-%m-%d %H:%M:%S")


def params(p: Any) -> str:
    if not p:
        return "{}"
    return json.dumps(dict(p), sort_keys=True, default=str)


def verdicts(v: Any) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(dict(v or {}).items()))


def facts(worst: Any) -> str:
    """Compile facts as ``best --static`` names them: ``regs 24 · spill 0 B · smem 128 B · occ 100%``."""
    if not worst:
        return "no compile facts stored"
    from warpforge.compile_facts import facts_cells

    regs, spill, smem, occ = facts_cells(worst)
    return f"regs {regs} · spill {spill} B · smem {smem} B · occ {occ}"


def plan(p: Any) -> str:
    from warpforge.dashboard.views import plan_label

    return plan_label(p)


FILTERS = {
    "facts": facts,
    "plan": plan,
    "num": num,
    "ms": ms,
    "speedup": speedup,
    "pct": pct,
    "short": short,
    "when": when,
    "params": params,
    "verdicts": verdicts,
}
