"""The ``warpforge`` command line: every Typer command lives in this package, nothing else holds Typer code.

``boundary`` is the one error handler every command goes through; ``root`` holds the application and
the top-level commands; the other modules hold one
command group each (``results``, ``agent``, ``plan``, ``plan_agent``, ``export``). The entry point is
:func:`warpforge.cli.root.main`.
"""

from __future__ import annotations

from warpforge.cli.boundary import handle_errors
from warpforge.cli.root import app, main

__all__ = ["app", "handle_errors", "main"]
