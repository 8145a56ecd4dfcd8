"""Logging for warpforge: every module logs to ``warpforge.<area>``; the CLI installs one handler here.

Nothing is silent: fallbacks (a sampler arm that breaks and falls back, a reference that could not be
timed, a stored result reused, a replay miss) log a WARNING or INFO line, and where the fallback
changes what a number means it is also recorded in the result or the campaign summary. Default
level WARNING; ``-v`` INFO, ``-vv`` DEBUG; ``--log-json`` writes one JSON object per line to stderr
(for machines: ``{"ts", "level", "logger", "msg"}``).

Example:
    >>> import logging
    >>> handler = configure(verbose=1, json_lines=True, stream=__import__("io").StringIO())
    >>> logging.getLogger("warpforge.demo").info("hello")
    >>> '"msg": "hello"' in handler.stream.getvalue()
    True
"""

from __future__ import annotations

import json
import logging
import sys
from typing import IO, Any

ROOT = "warpforge"


class InertFormatter(logging.Formatter):
    """The message with every control character written as its escape (warpforge/inert.py): a log line may quote
    a candidate's text, and a terminal would act on its escape sequences."""

    def format(self, record: logging.LogRecord) -> str:
        from warpforge.inert import inert

        return inert(super().format(record))


class JsonLines(logging.Formatter):
    """One JSON object per record: ts (epoch s), level, logger, msg (and exc when there is one)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out)


def level_for(verbose: int) -> int:
    return logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG


def configure(verbose: int = 0, json_lines: bool = False, stream: IO[str] | None = None) -> logging.Handler:
    """Install the single handler of the ``warpforge`` logger (replacing one installed before)."""
    logger = logging.getLogger(ROOT)
    for old in [h for h in logger.handlers if getattr(h, "_warpforge", False)]:
        logger.removeHandler(old)
    handler: logging.Handler
    if json_lines:
        handler = logging.StreamHandler(stream or sys.stderr)
        handler.setFormatter(JsonLines())
    elif verbose <= 0:  # warnings only: one "note:" line each, folded by the terminal alone (80 columns)
        handler = logging.StreamHandler(stream or sys.stderr)
        handler.setFormatter(InertFormatter("note: %(message)s"))
    else:
        from rich.console import Console
        from rich.logging import RichHandler

        handler = RichHandler(
            console=Console(file=stream or sys.stderr), show_path=verbose > 1, rich_tracebacks=False, markup=False
        )
        handler.setFormatter(InertFormatter("%(message)s"))  # RichHandler renders the message as Text, as is
    setattr(handler, "_warpforge", True)  # noqa: B010 - marks the handler this module installed
    logger.addHandler(handler)
    logger.setLevel(level_for(verbose))
    logger.propagate = False  # one handler, no duplicates through the root logger
    return handler
