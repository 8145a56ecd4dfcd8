"""Where recorded real-GPU times live, and whether a task has any: what backend selection and ``replay`` share.

Recordings are Kernel Tuner cache files written by ``benchmarks/record_spaces.py`` on a GPU, one per
(GPU, task, variant, shape, dtype), at
``recordings/<gpu>/<task>/<variant>-<source hash[:12]>/<dtype>__<shape>.json.gz`` inside the package, or
under ``WARPFORGE_RECORDINGS``. The variant's source hash is part of the path, so an edited template never
borrows the times of its previous version.

Example::

    >>> recording_path(Path("rec"), "NVIDIA H100", "softmax", "online", "ab" * 20, "float16", {"M": 4, "N": 8})
    PosixPath('rec/NVIDIA_H100/softmax/online-abababababab/float16__M=4,N=8.json.gz')
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import warpforge
from warpforge.kernels.taskdef import shape_key

PACKAGE_RECORDINGS = Path(warpforge.__file__).resolve().parent / "recordings"


def recordings_root() -> Path:
    return Path(os.environ.get("WARPFORGE_RECORDINGS", PACKAGE_RECORDINGS))


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=,-]+", "_", text).strip("_")


def recording_path(
    root: Path, gpu: str, task: str, variant: str, source_hash: str, dtype: str, shape: dict[str, int]
) -> Path:
    return root / slug(gpu) / task / f"{variant}-{source_hash[:12]}" / f"{dtype}__{slug(shape_key(shape))}.json.gz"


def has_recordings(task: str, root: Path | None = None) -> bool:
    root = root or recordings_root()
    return root.is_dir() and any(root.glob(f"*/{task}/*/*.json.gz"))
