"""KernelBench problems: a curated few that ship with warpforge, and any folder of them.

A KernelBench problem is a Python file with ``class Model``, ``get_inputs`` and ``get_init_inputs``
(kernels/kernelbench.py loads it as a task). A fresh clone has no ``../shared`` folder, so 39 problems ship in
``warpforge/data/problems/level{1,2,3}/`` (about 42 KB; unchanged upstream files, licence and provenance in
the README there): two or more per template family, a few level-2 chains and two level-3 models.
``warpforge problems`` lists them, those under ``--dir`` folders and, when present, ``../shared/kernelbench``,
and says where the full benchmark is.

Example:
    >>> [p.name for p in list_problems([]) if p.level == 1][:2]
    ['1_Square_matrix_multiplication_', '2_Standard_matrix_multiplication_']
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from warpforge.errors import UsageError

SHIPPED = Path(__file__).resolve().parent / "data" / "problems"
SHARED = Path("../shared/kernelbench")  # the team's checkout layout; absent from a clone from the web
FULL_SET = (
    "the full benchmark (250 problems in levels 1-3, MIT): https://github.com/ScalingIntelligence/KernelBench "
    "(folder KernelBench/); pass its folder to --dir"
)
_LEVEL = re.compile(r"level(\d+)")


@dataclass(frozen=True)
class ProblemInfo:
    """One problem file: its name (the file stem, as KernelBench numbers it), level and where it is."""

    name: str
    level: int
    path: str
    origin: str  # "shipped" | the folder it was found in

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def problem_files(folder: Path) -> list[tuple[int, Path]]:
    """``level<N>/<number>_<name>.py`` files under ``folder`` (or ``folder`` itself when it is one level's
    folder), sorted by level then by KernelBench's number."""
    levels = [folder] if _LEVEL.fullmatch(folder.name) else sorted(p for p in folder.glob("level*") if p.is_dir())
    found = []
    for level_dir in levels:
        match = _LEVEL.fullmatch(level_dir.name)
        if match is None:
            continue
        for path in level_dir.glob("*.py"):
            number = path.stem.split("_", 1)[0]
            if number.isdigit():
                found.append((int(match.group(1)), int(number), path))
    return [(level, path) for level, _, path in sorted(found, key=lambda t: (t[0], t[1]))]


def list_problems(dirs: list[Path], include_shared: bool = True) -> list[ProblemInfo]:
    """The shipped problems, then those under each of ``dirs``, then ``../shared/kernelbench`` when it exists.

    A folder passed explicitly that does not exist, or holds no problem, is a usage error; ``../shared`` is only
    looked at.
    """
    for d in dirs:
        if not d.is_dir():
            raise UsageError(f"--dir {d}: no such directory")
        if not problem_files(d):
            raise UsageError(
                f"--dir {d}: no KernelBench problems there (level<N>/<number>_<name>.py files, or one level's folder)"
            )
    folders: list[tuple[Path, str]] = [(SHIPPED, "shipped"), *((d, str(d)) for d in dirs)]
    if include_shared and SHARED.is_dir() and all(SHARED.resolve() != d.resolve() for d in dirs):
        folders.append((SHARED, str(SHARED)))
    return [
        ProblemInfo(path.stem, level, str(path), origin)
        for folder, origin in folders
        for level, path in problem_files(folder)
    ]


def shipped_problem(name: str) -> Path:
    """The shipped file of problem ``name`` (its stem, e.g. ``23_Softmax``)."""
    for info in list_problems([], include_shared=False):
        if info.name == name:
            return Path(info.path)
    raise KeyError(f"no shipped problem {name!r}")
