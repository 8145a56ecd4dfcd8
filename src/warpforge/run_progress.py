"""``warpforge run``'s progress where stderr is not a terminal (``make run | tee``, CI logs).

Rich's progress bar draws only on a terminal: piped, it printed nothing until the campaign ended, minutes
later. Off a terminal each finished evaluation is one plain line instead.

Example:
    >>> progress_line("softmax", 3, 20, "ok", None, None)
    'softmax 3/20: ok | best: not measured'
"""

from __future__ import annotations


def progress_line(task: str, done: int, total: int, summary: str, best_ms: float | None, best_label: str | None) -> str:
    best = f"best {best_ms:.4g} ms ({best_label})" if best_ms is not None else "best: not measured"
    return f"{task} {done}/{total}: {summary} | {best}"
