"""The project's own errors: what the CLI turns into one line and an exit code (anything else is a bug).

- :class:`UsageError` (also a ``ValueError``): bad input, an unknown name, a malformed option -> exit 2;
- other :class:`WarpforgeError` subclasses (e.g. ``CampaignError``, ``DatabaseError``): the run cannot go
  on -> exit 1.

Example:
    >>> from warpforge.errors import UsageError
    >>> isinstance(UsageError("unknown sampler 'x'"), ValueError)
    True
"""

from __future__ import annotations


class WarpforgeError(Exception):
    """Base of warpforge's own errors; the message says what to do next."""


class UsageError(WarpforgeError, ValueError):
    """Bad input (unknown name, malformed option or file): exit code 2."""
