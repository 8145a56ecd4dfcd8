"""A task as the commands that read results take it: a built-in name, a stored name, or a task file's path.

The store keys a by-path task (a KernelBench file, a user's task module) by its file's stem: ``run
kb/23_Softmax.py`` stores ``23_Softmax``. ``results``/``best``/``export`` accept either spelling, and a hint
that names a command to run next names the task the way that command accepts it: a built-in task by name, a
by-path one by its file (``warpforge run 23_Softmax`` would be "unknown task").

Example::

    stored_name("kb/23_Softmax.py")      # '23_Softmax'
    runnable(reader, "23_Softmax")       # '/home/me/kb/23_Softmax.py' (the newest campaign's file that exists)
"""

from __future__ import annotations

import difflib
import shlex
from pathlib import Path
from typing import Any


def is_path(task: str) -> bool:
    return task.endswith(".py") or "/" in task


def stored_name(task: str) -> str:
    """The name results are stored under: a path's stem, a name as it is."""
    return Path(task).stem if is_path(task) else task


def runnable(reader: Any, task: str) -> str:
    """``task`` as ``warpforge run``/``export`` accept it, quoted for a shell: a built-in name as it is, a stored
    by-path task as the newest campaign's file that still exists (else the name, which those commands refuse
    with what they know)."""
    from warpforge.kernels.task import builtin_task_names

    if is_path(task) or task in builtin_task_names():
        return shlex.quote(task)
    return shlex.quote(_existing_file(reader, task) or task)


def _existing_file(reader: Any, task: str) -> str | None:
    """The newest campaign's file of the stored by-path task ``task`` that still exists."""
    return next((entry for entry in reader.task_files(task) if Path(entry).is_file()), None)


def stored_file(db: str | None, task: str) -> str | None:
    """The file a stored by-path task name (``23_Softmax``) was run from, for ``warpforge run``: the newest
    campaign's that still exists; None for a built-in name, a member, a path, or a name the store
    does not hold (the command then says what it knows)."""
    from warpforge.kernels.task import builtin_task_names

    if is_path(task) or task in builtin_task_names() or "[" in task or ":" in task:
        return None
    from warpforge.db.queries import Reader
    from warpforge.db.session import DatabaseError

    try:
        return _existing_file(Reader(db), task)
    except DatabaseError:  # no database (or an old one) holds no name: the caller's own error stands
        return None


def exportable(how: str) -> bool:
    """Whether ``warpforge export`` can package the task ``how`` names: a built-in task, a task file that follows
    the task contract (a top-level ``make_inputs``), or a PyTorch-module problem (KernelBench format: ``class
    Model`` and ``get_inputs``), for which export generates the task module (export/bypath.py)."""
    import ast

    path = Path(shlex.split(how)[0]) if how else Path()
    if not is_path(str(path)):
        return True
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return True  # export itself says what is wrong with the file
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return "make_inputs" in names or {"Model", "get_inputs"} <= names


def unknown_task_message(reader: Any, task: str) -> str | None:
    """None when ``task`` is built in or the database holds results for it; else the one-line error, with the
    closest known name and every by-path task the database holds (``warpforge tasks`` lists only the built-in
    ones and the files it is given)."""
    from warpforge.kernels.task import builtin_task_names

    builtin = builtin_task_names()
    if task in builtin or reader.holds_task(task):
        return None
    held = list(reader.stored_task_names())  # only to say what the database does hold
    stored = [t for t in held if t not in builtin]
    close = difflib.get_close_matches(task, builtin + stored, n=1, cutoff=0.6)
    by_path = [t if (file := runnable(reader, t)) == t else f"{t} ({file})" for t in stored]
    return (
        f"unknown task {task!r}"
        + (f" (did you mean {close[0]!r}?)" if close else "")
        + f": built-in tasks are {', '.join(builtin)} (warpforge tasks lists them)"
        + (f"; this database also holds {', '.join(by_path)}" if by_path else "")
    )
