"""Recorded GPU tuning spaces: the few that ship with warpforge, and any folder of them.

``warpforge bench-search`` measures search strategies on brute-forced spaces (every configuration of a kernel
timed on a real GPU, Kernel Tuner cache files: evaluator/run/recorded_spaces.py). A fresh clone has no ``../shared``
folder, so three small spaces ship in ``warpforge/data/spaces/`` (about 180 KB; licence and provenance in the
README there), trimmed by :func:`trim` to what a search reads: each configuration's parameters and its mean
time. ``warpforge spaces`` lists them, those of ``--dir`` folders and, when present, ``../shared/spaces``,
and says where the full public set is.

Example:
    >>> [s.name for s in list_spaces([])][:1]
    ['convolution/RTX_3090']
"""

from __future__ import annotations

import gzip
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from warpforge.errors import UsageError

SHIPPED = Path(__file__).resolve().parent / "data" / "spaces"
SHARED = Path("../shared/spaces")  # the team's checkout layout; absent from a clone from the web
FULL_SET = (
    "the full public set (8 spaces, ~24 MB, MIT): https://github.com/AutoTuningAssociation/benchmark_hub "
    "(cachefiles/), DOI 10.5281/zenodo.15364124; pass its files to bench-search or its folder to --dir"
)


@dataclass(frozen=True)
class SpaceInfo:
    """One recorded space file: where it is and what it holds."""

    name: str  # <kernel folder>/<file stem>, as bench-search's tables name it
    path: str
    origin: str  # "shipped" | the folder it was found in
    gpu: str
    kernel: str
    configs: int  # configurations recorded (failures included); restricted ones are absent
    failed: int
    size_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def space_files(folder: Path) -> list[Path]:
    """``<kernel>/<gpu>.json[.gz]`` files under ``folder``, sorted."""
    return sorted(p for pattern in ("*/*.json.gz", "*/*.json") for p in folder.glob(pattern) if p.is_file())


def shipped_paths() -> list[Path]:
    return space_files(SHIPPED)


def list_spaces(dirs: list[Path], include_shared: bool = True) -> list[SpaceInfo]:
    """The shipped spaces, then those under each of ``dirs``, then ``../shared/spaces`` when it exists.

    A folder passed explicitly that does not exist is a usage error; ``../shared/spaces`` is only looked at.
    """
    from warpforge.evaluator.run.recorded_spaces import read_space

    for d in dirs:
        if not d.is_dir():
            raise UsageError(f"--dir {d}: no such directory")
    folders: list[tuple[Path, str]] = [(SHIPPED, "shipped"), *((d, str(d)) for d in dirs)]
    if include_shared and SHARED.is_dir() and all(SHARED.resolve() != d.resolve() for d in dirs):
        folders.append((SHARED, str(SHARED)))
    out = []
    for folder, origin in folders:
        for path in space_files(folder):
            space = read_space(path)
            out.append(
                SpaceInfo(
                    space.name,
                    str(path),
                    origin,
                    space.device_name or "?",
                    space.kernel_name,
                    len(space),
                    space.n_failed,
                    path.stat().st_size,
                )
            )
    return out


def trim(src: Path, dest: Path) -> None:
    """Write a Kernel Tuner cache file keeping, per configuration, its parameters and ``time`` only.

    ``time`` is Kernel Tuner's mean of the runs (ms) or its failure marker, which is all bench-search reads;
    the per-run ``times`` and the tuner's own overheads (compile/verification/framework time, timestamps) are
    ~85% of a file's compressed bytes (pnpoly/RTX_3090: 498 KB -> 43 KB). How the shipped files were made::

        python -c "from warpforge.spaces import trim; from pathlib import Path; \\
                   trim(Path('../shared/spaces/pnpoly/RTX_3090.json.gz'), Path('pnpoly/RTX_3090.json.gz'))"
    """
    data = json.loads(gzip.decompress(src.read_bytes()))
    keys = data["tune_params_keys"]
    doc = {k: v for k, v in data.items() if k != "cache"}
    doc["cache"] = {
        key: {**{p: rec[p] for p in keys if p in rec}, "time": rec["time"]} for key, rec in data["cache"].items()
    }
    dest.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same input gives the same bytes.
    dest.write_bytes(gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), 9, mtime=0))


def spaces_tables(spaces: list[SpaceInfo]) -> list[Any]:
    """One table per folder (its title says which), five columns, ~71 wide for the longest upstream name."""
    from rich.markup import escape
    from rich.table import Table

    tables = []
    for origin in dict.fromkeys(s.origin for s in spaces):
        where = f"shipped ({SHIPPED})" if origin == "shipped" else origin
        t = Table(title=escape(f"recorded GPU tuning spaces: {where}"), title_justify="left")  # a folder: text
        t.add_column("space", overflow="fold")
        t.add_column("GPU", overflow="fold")
        t.add_column("configs", justify="right", no_wrap=True)
        t.add_column("failed", justify="right", no_wrap=True)
        t.add_column("KB", justify="right", no_wrap=True)
        for s in spaces:
            if s.origin == origin:
                t.add_row(
                    escape(s.name),
                    escape(s.gpu.removeprefix("NVIDIA ").removeprefix("GeForce ") or "-"),
                    str(s.configs),
                    str(s.failed),
                    f"{s.size_bytes / 1e3:.0f}",
                )
        tables.append(t)
    return tables


def unique_paths(spaces: list[SpaceInfo]) -> list[str]:
    """One file per space name, the first found (the shipped one before a full copy of it elsewhere): the
    same space twice would count twice in bench-search's averages."""
    return list({s.name: s.path for s in reversed(spaces)}.values())[::-1]
