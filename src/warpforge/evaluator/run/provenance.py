"""What a result says about where it came from: the software that produced it and a hardware fingerprint.

Apart from the backend contract (backend.py) so that backends and the stages stamp their results without
calling back into the contract module.

Example::

    >>> from warpforge.evaluator.run.provenance import fingerprint
    >>> fingerprint({"host": "x86_64", "kind": "interpreter"}) == fingerprint({"kind": "interpreter", "host": "x86_64"})
    True
"""

from __future__ import annotations

import hashlib
import json

import torch

import warpforge


def fingerprint(details: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(details, sort_keys=True).encode()).hexdigest()[:16]


def software_versions() -> dict[str, str]:
    import triton

    return {"torch": torch.__version__, "triton": triton.__version__, "warpforge": warpforge.__version__}
