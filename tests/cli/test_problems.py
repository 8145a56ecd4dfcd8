"""The KernelBench problems that ship with warpforge, and ``warpforge problems``: a fresh clone has no
``../shared``, and the README's examples must still run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from warpforge.problems import SHIPPED, list_problems, problem_files

UPSTREAM = Path(__file__).resolve().parents[3] / "shared" / "kernelbench"  # the team's layout; absent from a clone
SHIPPED_FILES = sorted(p for p in SHIPPED.glob("level*/*.py"))


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warpforge.cli", "problems", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
        cwd=cwd,
    )


def test_the_shipped_problems_are_licensed_and_each_one_is_documented() -> None:
    assert len(SHIPPED_FILES) == 39 and sum(p.stat().st_size for p in SHIPPED_FILES) < 150_000
    assert (SHIPPED / "LICENSE").read_text().startswith("MIT License")
    readme = (SHIPPED / "README.md").read_text()
    for path in SHIPPED_FILES:
        assert f"`{path.stem}`" in readme, path.name  # every file is in the README's table
    levels = {int(p.parent.name.removeprefix("level")) for p in SHIPPED_FILES}
    assert levels == {1, 2, 3}


@pytest.mark.skipif(
    not UPSTREAM.is_dir(), reason="../shared/kernelbench absent: nothing to compare the shipped files with"
)
@pytest.mark.parametrize("path", SHIPPED_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_shipped_file_is_the_upstream_file_unchanged(path: Path) -> None:
    assert path.read_bytes() == (UPSTREAM / path.parent.name / path.name).read_bytes()


def test_problems_from_a_folder_without_shared(tmp_path: Path) -> None:
    proc = run(cwd=tmp_path)  # ../shared/kernelbench does not exist beside tmp_path
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    names: list[str] = []  # a name wider than its column (79_conv_transposed_...: 85 characters) is folded
    for line in lines:
        cells = line.split("│")
        if len(cells) == 5 and cells[1].strip():
            names.append(cells[2].strip())
        elif len(cells) == 5 and names:
            names[-1] += cells[2].strip()
    assert sorted(names) == sorted(p.stem for p in SHIPPED_FILES)  # whole, not cut
    assert "github.com/ScalingIntelligence/KernelBench" in proc.stdout  # where the other 211 are

    doc = json.loads(run("--json", cwd=tmp_path).stdout)
    assert {p["path"] for p in doc["problems"]} == {str(p) for p in SHIPPED_FILES}
    assert all(p["origin"] == "shipped" for p in doc["problems"])
    assert [p["level"] for p in doc["problems"]] == sorted(p["level"] for p in doc["problems"])

    paths = run("--paths", "--level", "3", cwd=tmp_path).stdout.split()
    assert sorted(paths) == [str(SHIPPED / "level3" / "1_MLP.py"), str(SHIPPED / "level3" / "44_MiniGPTBlock.py")]


def test_a_folder_of_problems_is_listed_after_the_shipped_ones(tmp_path: Path) -> None:
    mine = tmp_path / "level1"
    mine.mkdir()
    shutil.copy(SHIPPED / "level1" / "23_Softmax.py", mine / "7_MySoftmax.py")
    (mine / "notes.py").write_text("")  # not a numbered problem
    for folder in (tmp_path, mine):  # a benchmark root or one level's folder
        found = list_problems([folder], include_shared=False)
        assert (found[-1].name, found[-1].level, found[-1].origin) == ("7_MySoftmax", 1, str(folder))
        assert len(found) == len(SHIPPED_FILES) + 1
    # Sorted by KernelBench's number, not as text ("19_" before "1_").
    names = [p.stem for _, p in problem_files(SHIPPED / "level1")]
    assert names.index("1_Square_matrix_multiplication_") < names.index("19_ReLU")


@pytest.mark.parametrize("args", [["--dir", "/nonexistent/kb"], ["--dir", "."], ["--level", "0"]])
def test_bad_folders_and_levels_are_one_line_and_exit_2(args: list[str], tmp_path: Path) -> None:
    proc = run(*args, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error:"), proc.stderr


def test_paths_name_each_problem_once(tmp_path: Path) -> None:
    mine = tmp_path / "level1"
    mine.mkdir()
    shutil.copy(SHIPPED / "level1" / "23_Softmax.py", mine / "23_Softmax.py")  # as ../shared holds it too
    proc = run("--paths", "--dir", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    softmax = [line for line in proc.stdout.splitlines() if line.endswith("23_Softmax.py")]
    assert softmax == [str(SHIPPED / "level1" / "23_Softmax.py")]  # `run $(... | grep 23_Softmax)`: one task
