"""A warm Triton kernel cache per candidate, so a GPU child does not compile again what the AOT stage compiled.

Each child runs in a sandbox with a private, empty Triton cache (a shared one could be poisoned by another
candidate). On a GPU that meant the first call of every kernel in the check and in the benchmark compiled
from scratch (Triton front end, ptxas, module load: seconds), inside phases budgeted for the candidate's
launch. Now the trusted side keeps one warm directory per candidate (its source, parameters,
task and target), outside any sandbox:

- :func:`seed` copies its entries into the child's scratch directory (``triton-cache``, made the sandbox
  user's) before the request; the child points ``TRITON_CACHE_DIR`` there (child/__main__.py), so Triton
  finds what an earlier stage compiled and writes what it compiles next;
- :func:`harvest` copies the entries the AOT stage's child added back into the warm directory once its
  sandbox is dead: regular files only, never a link, each and all of them capped (readback.py), and never
  over an entry already there. Only the AOT child's entries are kept (stages.harvest): the check and
  benchmark children read the warm entries, and what they add is counted, then dropped.

The cache never crosses candidates: a candidate may poison only its own entries, which run only its own
code. What keeps it from planting a compiled kernel other than its source's is the static rules (module
level: definitions only; host code: no file writes), not this module: the AOT child ran the candidate's
module and ``launch`` before it compiled. Triton's key covers the source, the target, the options and the
specialization, so an entry is used only where the JIT would have compiled exactly it. :class:`CacheUse`
counts entries seeded and added: a launch that compiled nothing again added none.

Example::

    >>> from pathlib import Path
    >>> import tempfile
    >>> warm, scratch = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    >>> (warm / "ABC").mkdir(); _ = (warm / "ABC" / "k.cubin").write_bytes(b"x")
    >>> seed(scratch, warm)
    1
    >>> harvest(scratch, warm, seeded=1).added
    0
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warpforge.evaluator.sandbox.readback import NotReadable, read_regular

CACHE_NAME = "triton-cache"  # inside the scratch directory; the request names it, the child sets TRITON_CACHE_DIR
# One compiled kernel's files (cubin, ptx, ttir, ttgir, llir, json) are well under 1 MiB for the templates; 16 MiB
# a file and 256 MiB a candidate leave room for large autotuned kernels and bound what a candidate can make
# this process copy.
MAX_FILE_BYTES = 16 << 20
MAX_TOTAL_BYTES = 256 << 20


@dataclass(frozen=True)
class CacheUse:
    """One child's use of the warm cache: entries (kernel directories) it was given and entries it added."""

    stage: str
    seeded: int
    added: int


def warm_dir(root: Path, source_hash: str, params: dict[str, Any], task_hash: str, target: str) -> Path:
    """The warm directory of one candidate (variant source, parameters, task, target) under ``root``."""
    key = json.dumps([source_hash, params, task_hash, target], sort_keys=True, default=str)
    return root / "warm-triton" / hashlib.sha256(key.encode()).hexdigest()[:24]


def entries(cache: Path) -> set[str]:
    """Kernel entries (Triton's per-key directories) holding at least one file; temporaries excluded."""
    try:
        return {p.name for p in cache.iterdir() if p.is_dir() and not p.is_symlink() and any(p.iterdir())}
    except OSError:
        return set()


def seed(scratch: Path, warm: Path | None, owner: tuple[int, int] | None = None) -> int:
    """Copy the warm entries into ``scratch/triton-cache`` (owned by ``owner``, the sandbox's uid/gid, if given);
    returns how many entries were seeded. The directory is created even when there is nothing to seed."""
    cache = scratch / CACHE_NAME
    cache.mkdir(exist_ok=True)
    count = 0
    if warm is not None and warm.is_dir():
        for entry in sorted(entries(warm)):
            shutil.copytree(warm / entry, cache / entry, symlinks=True, dirs_exist_ok=True)
            count += 1
    if owner is not None:
        for dirpath, dirnames, filenames in os.walk(cache):
            for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
                os.chown(name, *owner, follow_symlinks=False)
    return count


def harvest(scratch: Path, warm: Path, seeded: int, stage: str = "") -> CacheUse:
    """Copy the entries a (dead) child added to its scratch cache into ``warm``; counts what it added."""
    cache = scratch / CACHE_NAME
    known = entries(warm)
    added = 0
    total = sum(f.stat().st_size for f in warm.rglob("*") if f.is_file()) if warm.is_dir() else 0
    for entry in sorted(entries(cache)):
        if entry in known:
            continue
        added += 1
        files: dict[str, bytes] = {}
        try:
            for path in (cache / entry).iterdir():
                if not stat.S_ISREG(path.lstat().st_mode):
                    raise NotReadable(f"{path.name} is not a regular file")
                files[path.name] = read_regular(path, MAX_FILE_BYTES)
        except (OSError, NotReadable):
            continue  # a half-written or planted entry: not kept
        size = sum(len(b) for b in files.values())
        if total + size > MAX_TOTAL_BYTES:
            continue
        tmp = warm / f".{entry}.tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        os.replace(tmp, warm / entry)
        total += size
    return CacheUse(stage, seeded, added)
