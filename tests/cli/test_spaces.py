"""The recorded spaces that ship with warpforge, and ``warpforge spaces`` (issue 31: a fresh clone has no
``../shared``, and bench-search had nothing to read)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from warpforge.evaluator.run.recorded_spaces import read_space
from warpforge.spaces import SHIPPED, list_spaces, shipped_paths, trim, unique_paths

UPSTREAM = Path(__file__).resolve().parents[3] / "shared" / "spaces"  # the team's layout; absent from a clone
# From the upstream README (shared/spaces/README.md, "configs in file / valid / failed"): the trimmed files
# must hold every configuration and failure of the originals.
EXPECTED = {"pnpoly/RTX_3090": (4092, 330), "convolution/RTX_3090": (6768, 1548), "convolution_milo/A100": (4362, 161)}


def test_the_shipped_spaces_are_small_licensed_and_whole() -> None:
    files = shipped_paths()
    assert {read_space(p).name: (len(read_space(p)), read_space(p).n_failed) for p in files} == EXPECTED
    assert sum(p.stat().st_size for p in files) < 300_000  # "a few hundred KB at most" (issue 31)
    readme = (SHIPPED / "README.md").read_text()
    assert "MIT License" in readme and "Copyright (c) 2025 AutoTuningAssociation" in readme


@pytest.mark.skipif(not UPSTREAM.is_dir(), reason="../shared/spaces absent: nothing to compare the trimmed files with")
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_trimming_keeps_every_configuration_and_time(name: str, tmp_path: Path) -> None:
    full = read_space(UPSTREAM / f"{name}.json.gz")
    trim(UPSTREAM / f"{name}.json.gz", tmp_path / "t.json.gz")
    shipped = read_space(SHIPPED / f"{name}.json.gz")
    assert (tmp_path / "t.json.gz").read_bytes() == (SHIPPED / f"{name}.json.gz").read_bytes()  # reproducible
    assert {k: (r.status, r.time_ms) for k, r in full.records.items()} == {
        k: (r.status, r.time_ms) for k, r in shipped.records.items()
    }


def test_list_spaces_names_where_each_comes_from(tmp_path: Path) -> None:
    extra = tmp_path / "mine" / "pnpoly"
    extra.mkdir(parents=True)
    (extra / "RTX_3090.json.gz").write_bytes((SHIPPED / "pnpoly" / "RTX_3090.json.gz").read_bytes())
    found = list_spaces([tmp_path / "mine"], include_shared=False)
    assert [(s.name, s.origin) for s in found][-1] == ("pnpoly/RTX_3090", str(tmp_path / "mine"))
    # The same space twice would count twice in bench-search: --paths keeps the first (shipped) one.
    assert sorted(unique_paths(found)) == sorted(str(p) for p in shipped_paths())


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warpforge.cli", "spaces", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
    )


def test_spaces_command_from_a_folder_without_shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # ../shared/spaces does not exist beside tmp_path
    proc = run()
    assert proc.returncode == 0, proc.stderr
    assert "pnpoly/RTX_3090" in proc.stdout and "benchmark_hub" in proc.stdout and "../shared" not in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    assert sorted(run("--paths").stdout.split()) == sorted(str(p) for p in shipped_paths())
    from typer.testing import CliRunner

    from warpforge.cli import app

    doc = json.loads(CliRunner().invoke(app, ["spaces", "--json"]).output)
    assert {s["origin"] for s in doc["spaces"]} == {"shipped"}
    bad = run("--dir", str(tmp_path / "nope"))
    assert (bad.returncode, bad.stderr.count("\n")) == (2, 1) and "no such directory" in bad.stderr
