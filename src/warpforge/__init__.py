"""warpforge: an agentic optimizer for deep-learning performance (Triton kernels, parallelism plans)."""

from __future__ import annotations

__version__ = "0.1.0"
