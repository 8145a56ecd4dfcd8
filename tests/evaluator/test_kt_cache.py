"""Kernel Tuner cache / T4 reader and writer (warpforge.evaluator.run.recorded_spaces)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from warpforge.evaluator.run.recorded_spaces import (
    CacheFormatError,
    RecordedSpace,
    RecordedTime,
    read_space,
    write_cache,
)

SPACES = Path(__file__).resolve().parents[2].parent / "shared" / "spaces"
PARAMS = {"block": [32, 64, 128], "warps": [4, 8]}
RECORDS = [
    ({"block": 32, "warps": 4}, 2.0, [2.0, 2.0]),
    ({"block": 64, "warps": 4}, 1.0, [0.9, 1.1]),
    ({"block": 64, "warps": 8}, "CompilationFailedConfig", []),
    ({"block": 128, "warps": 8}, "RuntimeFailedConfig", []),
]


@pytest.mark.parametrize("name", ["k.json", "k.json.gz"])
def test_write_then_read_round_trip(tmp_path: Path, name: str) -> None:
    path = write_cache(tmp_path / name, "NVIDIA H100", "matmul", [1024, 1024], PARAMS, RECORDS)
    space = read_space(path)
    assert (space.device_name, space.kernel_name, space.problem_size) == ("NVIDIA H100", "matmul", [1024, 1024])
    assert space.params == PARAMS
    assert len(space) == 4 and space.n_failed == 2
    assert space.optimum == 1.0
    assert space.lookup({"block": 64, "warps": 4}) == RecordedTime("ok", 1.0, [0.9, 1.1])
    assert space.lookup({"block": 64, "warps": 8}).status == "compile"  # type: ignore[union-attr]
    assert space.lookup({"block": 128, "warps": 8}).failed  # type: ignore[union-attr]
    # absent: violates the restrictions (never compiled) -> no record at all
    assert space.lookup({"block": 32, "warps": 8}) is None
    assert space.lookup({"block": 32}) is None


def test_written_file_is_kernel_tuner_layout(tmp_path: Path) -> None:
    path = write_cache(tmp_path / "k.json", "GPU", "k", 7, PARAMS, RECORDS[:1])
    doc = json.loads(path.read_text())
    assert doc["tune_params_keys"] == ["block", "warps"]
    assert doc["cache"]["32,4"] == {"block": 32, "warps": 4, "time": 2.0, "times": [2.0, 2.0]}


def test_writer_rejects_bad_records(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lacks parameters"):
        write_cache(tmp_path / "k.json", "GPU", "k", 1, PARAMS, [({"block": 32}, 1.0, [])])
    with pytest.raises(ValueError, match="time must be"):
        write_cache(tmp_path / "k.json", "GPU", "k", 1, PARAMS, [({"block": 32, "warps": 4}, "oops", [])])


def test_interrupted_cache_file_is_repaired(tmp_path: Path) -> None:
    path = write_cache(tmp_path / "k.json", "GPU", "k", 1, PARAMS, RECORDS[:2])
    text = path.read_text()
    assert text.endswith("}}")
    path.write_text(text[:-2] + ",\n")  # how Kernel Tuner leaves a file when tuning is interrupted
    assert len(read_space(path)) == 2


def test_invalid_config_entries_are_outside_the_space(tmp_path: Path) -> None:
    path = write_cache(tmp_path / "k.json", "GPU", "k", 1, PARAMS, RECORDS[:1])
    doc = json.loads(path.read_text())
    doc["cache"]["64,4"] = {"block": 64, "warps": 4, "time": "InvalidConfig"}
    path.write_text(json.dumps(doc))
    assert read_space(path).lookup({"block": 64, "warps": 4}) is None


def _t4_result(config: dict, invalidity: str, value: object) -> dict:
    return {
        "configuration": config,
        "invalidity": invalidity,
        "times": {"runtimes": [value] * 2},
        "measurements": [{"name": "time", "value": value, "unit": ""}],
        "objectives": ["time"],
    }


def test_t4_file(tmp_path: Path) -> None:
    doc = {
        "schema_version": "1.0.0",
        "metadata": {"timeunit": "seconds"},
        "results": [
            _t4_result({"b": 64, "w": 4}, "correct", 0.002),
            _t4_result({"b": 32, "w": 4}, "correct", 0.001),
            _t4_result({"b": 32, "w": 8}, "runtime", "RuntimeFailedConfig"),
            _t4_result({"b": 64, "w": 8}, "constraints", "InvalidConfig"),
        ],
    }
    path = tmp_path / "t4.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    space = read_space(path)
    assert space.params == {"b": [32, 64], "w": [4, 8]}  # sorted: the ordinal order
    assert space.lookup({"b": 32, "w": 4}).time_ms == pytest.approx(1.0)  # type: ignore[union-attr]
    assert space.lookup({"b": 32, "w": 8}).status == "runtime"  # type: ignore[union-attr]
    assert space.lookup({"b": 64, "w": 8}) is None
    assert space.optimum == pytest.approx(1.0)


@pytest.mark.parametrize(
    "content, match",
    [
        (b"not json at all", "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"foo": 1}', "neither a Kernel Tuner cache"),
        (b'{"cache": {}, "tune_params": {"a": [1]}, "tune_params_keys": ["b"]}', "disagree"),
        (b'{"cache": {"1": {"a": 1}}, "tune_params": {"a": [1]}}', "has no 'time'"),
        (b'{"cache": {"1": {"a": 1, "time": "weird"}}, "tune_params": {"a": [1]}}', "unknown time"),
        (b'{"results": []}', "empty"),
        (b"\x1f\x8b garbage", "gzip"),
    ],
)
def test_malformed_files_raise_one_line_errors(tmp_path: Path, content: bytes, match: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(CacheFormatError, match=match) as info:
        read_space(path)
    assert "\n" not in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CacheFormatError, match="cannot read"):
        read_space(tmp_path / "nope.json")


def test_recorded_space_name() -> None:
    s = RecordedSpace("GPU", "k", None, {"x": [1]}, {(1,): RecordedTime("ok", 1.0)}, source="/a/gemm/RTX_3090.json.gz")
    assert s.name == "gemm/RTX_3090"


@pytest.mark.skipif(not SPACES.is_dir(), reason=f"recorded spaces not found at {SPACES}")
def test_t4_file_matches_its_kernel_tuner_twin() -> None:
    kt = read_space(SPACES / "convolution_milo" / "A100.json.gz")
    t4 = read_space(SPACES / "convolution_milo" / "A100_T4.json.gz")
    assert (len(kt), kt.n_failed) == (4362, 161)
    assert t4.records.keys() == kt.records.keys()
    assert t4.optimum == kt.optimum
    assert all(t4.records[k].status == r.status for k, r in kt.records.items())
