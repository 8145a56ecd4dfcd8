"""The command line's one error boundary: every command of every group goes through :func:`handle_errors`.

The rule (README "Exit codes", docs/design.md §3.4): 0 the command did what it was asked; 1 it was asked
correctly but the answer is a failure; 2 it was asked wrongly and nothing ran. An error is one line on stderr
that says what to do next, never wrapped by Rich (``soft_wrap``), so that at 80 columns only the terminal
folds it. Which code an error gets is the error's own business (``WarpforgeError.exit_code``): this module
lists no error class of any subsystem. Anything that is not a ``WarpforgeError`` is a bug in warpforge,
said in one line (``-vv`` logs the traceback).

:func:`guard_all` wraps every command registered on a Typer application, sub-groups included, so a command
added anywhere cannot skip the boundary (tests/cli/test_every_command.py walks the same tree).

Example::

    app = typer.Typer()
    app.command()(my_command)
    guard_all(app)            # my_command's errors are now one line and the rule's exit code
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.markup import escape as rich_escape

from warpforge.errors import WarpforgeError
from warpforge.inert import InertConsole

err = InertConsole(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])
_GUARDED = "__warpforge_boundary__"
log = logging.getLogger("warpforge.cli")


def fail(message: object, code: int, label: str = "error") -> typer.Exit:
    """Print a one-line error (never wrapped mid-sentence by Rich) and return the Exit to raise."""
    err.print(f"[red]{label}:[/red] {rich_escape(str(message))}", highlight=False, markup=True, soft_wrap=True)
    return typer.Exit(code)


def first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def handle_errors(fn: F) -> F:
    """Known errors become one line on stderr and their exit code, never a traceback (module docstring)."""
    if getattr(fn, _GUARDED, False):
        return fn

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from warpforge.db.session import DRIVER_ERRORS

        try:
            return fn(*args, **kwargs)
        except WarpforgeError as exc:
            raise fail(exc, exc.exit_code, exc.label) from None
        except DRIVER_ERRORS as exc:  # one reached us unexplained (e.g. through Optuna's storage)
            first = first_line(getattr(exc, "orig", None) or exc)
            raise fail(f"database error: {first}; check --db (warpforge doctor checks it)", 1) from None
        except (typer.Exit, typer.Abort):
            raise
        except OSError as exc:  # the machine said no (a read-only directory, a full disk): not our bug
            raise fail(f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""), 1) from None
        except KeyboardInterrupt:
            err.print("interrupted: completed evaluations are stored; continue with --resume", soft_wrap=True)
            raise typer.Exit(130) from None
        except Exception as exc:
            log.debug("unexpected error", exc_info=True)
            raise fail(
                f"internal error ({type(exc).__name__}: {first_line(exc)}): this is a bug in warpforge, not "
                "in what you typed; run again with -vv for the traceback and report it",
                1,
            ) from None

    setattr(wrapper, _GUARDED, True)
    return wrapper  # type: ignore[return-value]


def guard_all(app: typer.Typer) -> None:
    """Wrap every command of ``app`` and of its sub-groups (and their callbacks) in :func:`handle_errors`."""
    for command in app.registered_commands:
        if command.callback is not None:
            command.callback = handle_errors(command.callback)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            guard_all(group.typer_instance)
    if app.registered_callback is not None and app.registered_callback.callback is not None:
        app.registered_callback.callback = handle_errors(app.registered_callback.callback)


def usage_error_line(exc: Any) -> str:
    """Click's usage error (missing argument, bad option value, unknown command) as the one line every other
    error is: what is wrong and where the help is."""
    ctx = getattr(exc, "ctx", None)
    where = f" (see {ctx.command_path} --help)" if ctx is not None else ""
    return "; ".join(line.strip() for line in exc.format_message().splitlines() if line.strip()) + where
