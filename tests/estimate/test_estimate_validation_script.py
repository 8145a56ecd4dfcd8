"""benchmarks/estimate_validation.py without KernelBench's timings: it says so and validates nothing (exit 0)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "estimate_validation.py"


def test_without_a_snapshot_it_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = importlib.util.spec_from_file_location("estimate_validation", SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "estimate_validation", script)  # its dataclasses look their module up
    spec.loader.exec_module(script)
    monkeypatch.delenv("WARPFORGE_KERNELBENCH_GIT", raising=False)
    assert script.main([]) == 0
    assert "no KernelBench snapshot" in capsys.readouterr().out
    assert script.main(["--snapshot", str(tmp_path / "absent")]) == 0
    assert "Nothing was validated" in capsys.readouterr().out
