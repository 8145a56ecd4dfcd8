"""Fixtures for the planner tests: the shared measured data (skipped when absent) and a private database."""

from __future__ import annotations

from pathlib import Path

import pytest

# <repo>/../shared/parallel: the measured tables live next to the repository, never inside it.
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "parallel"


@pytest.fixture
def shared_parallel() -> Path:
    if not (SHARED / "vtrain_a100_single_node.csv").is_file():
        pytest.skip(f"measured planner data not found at {SHARED} (shared/parallel next to the repo)")
    return SHARED


@pytest.fixture(autouse=True)
def _private_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Any default-database write goes to a temporary SQLite file, never the user's data dir."""
    url = f"sqlite:///{tmp_path / 'wf.db'}"
    monkeypatch.setenv("WARPFORGE_DB", url)
    return url
