"""The ``warpforge`` command line: every Typer command lives in this package, nothing else holds Typer code.

``root`` holds the application, the error boundary and the top-level commands; the other modules hold one
command group each (``results``, ``agent``, ``plan``, ``plan_agent``, ``export``). The entry point is
:func:`warpforge.cli.root.main`.
"""

from __future__ import annotations

from warpforge.cli.root import app, handle_errors, main

__all__ = ["app", "handle_errors", "main"]
