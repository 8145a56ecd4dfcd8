"""Test-wide set-up: the Triton interpreter on machines without a GPU, and the `gpu` marker."""

from __future__ import annotations

import os
import shutil

# TRITON_INTERPRET must be set before Triton is first imported; without a GPU driver the only way to
# run a @triton.jit kernel is the interpreter (DESIGN 5).
HAS_NVIDIA = shutil.which("nvidia-smi") is not None
if not HAS_NVIDIA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run with -m gpu on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
