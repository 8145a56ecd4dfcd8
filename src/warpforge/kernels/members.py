"""A family member as a task of its own: ``elementwise[gelu_tanh]`` wherever a task name is accepted.

A family (docs/tasks.md "Task families") is one task module whose templates branch on module constants
(``OP = "gelu"``); a member is a row of its ``MEMBERS``: a name, a reference and those constants. The
member task ``family[member]`` is the family's task with two files generated for it, under the user cache:

- the task module: the family's module verbatim followed by a tail (:data:`MARK`) that sets ``NAME`` to the
  member task's name, ``DEFAULT_MEMBER`` to the member and ``reference`` to its reference. Everything that
  loads a task by its file (the sandboxed child, another worker host, ``warpforge export``, which ships the
  file) then computes the member, with no member argument to carry;
- the family's templates with each member constant written in (:func:`with_constants`) and ``TASK`` naming
  the member task; a template lacking one of the constants is not one of the member's.

``family[member]`` is the one canonical spelling (it is also how a match is labelled); ``family:member`` is
accepted where a shell makes brackets awkward (zsh globs them unless quoted) and means the same task.

Example::

    >>> split_member("elementwise[gelu_tanh]"), split_member("elementwise:gelu_tanh"), split_member("softmax")
    (('elementwise', 'gelu_tanh'), ('elementwise', 'gelu_tanh'), None)
    >>> op_identifier("elementwise[leaky_relu(0.01)]")
    'elementwise_leaky_relu_0_01'
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from warpforge.kernels.taskdef import Member

# The shipped templates, one folder per task (kernels/variant.py re-exports it; it imports this module).
TEMPLATES_DIR = Path(__file__).parent / "templates"

MARK = "# ---- warpforge: this module computes one member of the family above (generated; the family is unchanged) ----"
_BRACKETS = re.compile(r"^(?P<family>\w+)\[(?P<member>.+)\]$")
_COLON = re.compile(r"^(?P<family>\w+):(?P<member>[^/]+)$")


def split_member(name: str) -> tuple[str, str] | None:
    """(family, member) of a member task's name, ``family[member]`` or ``family:member``; None for any other."""
    found = _BRACKETS.match(name) or _COLON.match(name)
    return (found["family"], found["member"]) if found else None


def member_task_name(family: str, member: str) -> str:
    """The canonical name: ``family[member]``."""
    return f"{family}[{member}]"


def op_identifier(task_name: str) -> str:
    """A Python identifier for a task's exported op (the package's module, ``torch.ops.NS.<op>``): the name itself
    for a plain task, ``elementwise_gelu_tanh`` for ``elementwise[gelu_tanh]``."""
    if split_member(task_name) is None:
        return task_name
    return re.sub(r"\W+", "_", task_name).strip("_")


def with_constants(text: str, constants: tuple[tuple[str, Any], ...]) -> str | None:
    """The template with each module constant ``NAME = ...`` (one line) set to the member's value; None when a
    template lacks one (it cannot compute that member)."""
    lines = text.splitlines(keepends=True)
    for name, value in constants:
        spots = [i for i, ln in enumerate(lines) if ln.startswith(f"{name} = ")]
        if len(spots) != 1:
            return None
        lines[spots[0]] = f"{name} = {value!r}\n"
    return "".join(lines)


def renamed_template(text: str, family: str, task_name: str) -> str | None:
    """The template with its ``TASK = '<family>'`` line naming ``task_name``; None when it names another task."""
    for line in (f"TASK = {family!r}", f'TASK = "{family}"'):
        if line in text:
            return text.replace(line, f"TASK = {task_name!r}", 1)
    return None


def member_tail(task_name: str, member: str) -> str:
    """The lines that make a family's module compute ``member`` (appended to the family's source verbatim)."""
    return (
        f"\n\n{MARK}\n"
        f"NAME = {task_name!r}\n"
        f"DEFAULT_MEMBER = {member!r}\n"
        "reference = {_wf_row[0]: _wf_row[1] for _wf_row in MEMBERS}[DEFAULT_MEMBER]\n"
    )


def cache_root() -> Path:
    """Where member tasks' files are written (beside evaluator/judge/matching.py's matched problems)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("warpforge")) / "members"


def _write(path: Path, text: str) -> None:
    """Write atomically: several worker processes may generate the same member at once."""
    if path.is_file() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


# Tasks whose templates are another task's with module constants rewritten (each template has one source file):
# conv_transpose is conv's implicit GEMM and direct loop with ``TRANSPOSED = True``, the weight layout being all
# that differs. task -> (the task whose templates it takes, the constants written in).
DERIVED_TEMPLATES: dict[str, tuple[str, tuple[tuple[str, Any], ...]]] = {
    "conv_transpose": ("conv", (("TRANSPOSED", True),)),
}


def template_files(task: str, root: Path | None = None) -> list[Path]:
    """A built-in task's template files: ``kernels/templates/<task>/*.py``, or for a task of
    :data:`DERIVED_TEMPLATES` its source task's templates with the constants and ``TASK`` written in, as real files
    under ``root/<task>/<hash of the sources>/`` (the user cache by default): the judge, a sandboxed child and
    ``warpforge export`` read exactly the bytes that run. A source template lacking a constant is left out."""
    derived = DERIVED_TEMPLATES.get(task)
    if derived is None:
        return sorted(p for p in (TEMPLATES_DIR / task).glob("*.py") if not p.stem.startswith("_"))
    source, constants = derived
    texts = {p.stem: p.read_text() for p in template_files(source)}
    digest = hashlib.sha256("\0".join([repr(constants), *texts, *texts.values()]).encode()).hexdigest()[:16]
    folder = (root or cache_root().parent / "derived") / task / digest
    out: list[Path] = []
    for stem, text in texts.items():
        written = with_constants(text, constants)
        renamed = renamed_template(written, source, task) if written is not None else None
        if renamed is not None:
            _write(folder / f"{stem}.py", renamed)
            out.append(folder / f"{stem}.py")
    return out


def member_files(family_file: Path, family: str, member: Member, root: Path | None = None) -> tuple[Path, list[Path]]:
    """Write the member task's module and its templates; (the module, the templates). Files go under
    ``root/<hash of the family module, its templates and the member>/`` so an edited family gets new files."""
    name = member_task_name(family, member.name)
    source = family_file.read_text() + member_tail(name, member.name)
    texts = {p.stem: p.read_text() for p in template_files(family)}
    constants = tuple(member.constants.items())
    digest = hashlib.sha256("\0".join([source, repr(constants), *texts.values()]).encode()).hexdigest()[:16]
    folder = (root or cache_root()) / digest
    module = folder / family_file.name
    _write(module, source)
    out: list[Path] = []
    for stem, text in texts.items():
        written = with_constants(text, constants)
        renamed = renamed_template(written, family, name) if written is not None else None
        if renamed is None:
            continue
        target = folder / "variants" / f"{stem}.py"
        _write(target, renamed)
        out.append(target)
    return module, out
