"""The project's own errors: what the CLI turns into one line and an exit code (anything else is a bug).

One tree, one rule (docs/design.md §3.4): every error warpforge raises on purpose is a :class:`WarpforgeError`
and carries its exit code.

- :class:`UsageError` (also a ``ValueError``): bad input, an unknown name, a malformed option -> exit 2;
- every other :class:`WarpforgeError` (``CampaignError``, ``DatabaseError``, ``PlannerError``,
  ``ExportRefused``, ...): asked correctly, but the run cannot go on or the answer is a failure -> exit 1.

The CLI's one boundary (``warpforge.cli.boundary``) reads ``exit_code`` and ``label``; it never lists classes.
Any other exception reaching it (``ValueError``, ``KeyError``, ...) is a bug in warpforge: exit 1, said so.

Example:
    >>> from warpforge.errors import UsageError, WarpforgeError
    >>> isinstance(UsageError("unknown sampler 'x'"), ValueError), UsageError("x").exit_code
    (True, 2)
    >>> WarpforgeError("the worker pool cannot start").exit_code
    1
"""

from __future__ import annotations


class WarpforgeError(Exception):
    """Base of warpforge's own errors; the message says what to do next."""

    exit_code = 1  # asked correctly, but it failed (README "Exit codes")
    label = "error"  # the word before the message on stderr


class UsageError(WarpforgeError, ValueError):
    """Bad input (unknown name, malformed option or file): exit code 2, nothing ran."""

    exit_code = 2
