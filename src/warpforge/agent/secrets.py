"""Keeping API keys out of logs, the database, transcripts and error messages (docs/design.md §3.5).

Keys are read from the environment at the moment a client is made and never stored; everything the
agent writes or raises passes through :func:`redact`, and a logging filter on the ``openai``/``httpx``
loggers (which may log request options at DEBUG) redacts their records too.

Example::

    >>> register_secret("sk-abc123456789")
    >>> redact("auth failed for sk-abc123456789")
    'auth failed for [redacted]'
"""

from __future__ import annotations

import logging
import threading

_SECRETS: set[str] = set()
_LOCK = threading.Lock()
# Short strings (a placeholder key like "EMPTY") would redact ordinary words; real keys are long.
MIN_SECRET_LEN = 8
REDACTED = "[redacted]"
LOGGERS = ("openai", "httpx", "httpx2", "httpcore", "warpforge")


def register_secret(value: str | None) -> None:
    if value and len(value) >= MIN_SECRET_LEN:
        with _LOCK:
            _SECRETS.add(value)
        _install_filter()


def redact(text: str) -> str:
    if not text:
        return text
    with _LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for s in secrets:
        text = text.replace(s, REDACTED)
    return text


class RedactingFilter(logging.Filter):
    """Rewrites a record's message with every registered secret replaced."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logged as it is
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, ()
        return True


_FILTER = RedactingFilter()


def _install_filter() -> None:
    # A logger's filters see only records made on that logger, not its children's ("openai._base_client"):
    # attach to every existing logger under the prefixes (called again after each client is made).
    names = [n for n in list(logging.root.manager.loggerDict) if n.split(".")[0] in LOGGERS] + list(LOGGERS)
    for name in names:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


def install_log_filter() -> None:
    """Re-attach the filter (after importing a library that creates new loggers)."""
    _install_filter()
