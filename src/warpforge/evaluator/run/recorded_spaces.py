"""Recorded (brute-forced) tuning spaces: Kernel Tuner cache files and T4 results files.

The ``replay`` backend and ``warpforge bench-search`` read real GPU measurements from these files
instead of running kernels. A configuration missing from the file violates the kernel's restrictions
(it was never compiled, so asking for it costs no evaluation); a recorded failure
(``CompilationFailedConfig``/``RuntimeFailedConfig``) costs one evaluation and yields no time.
warpforge writes its own recordings in Kernel Tuner's cache format with :func:`write_cache`, so one
reader serves both.

Example:
    >>> space = read_space("../shared/spaces/pnpoly/RTX_3090.json.gz")  # doctest: +SKIP
    >>> space.lookup({"between_method": 0, "block_size_x": 32, "tile_size": 1, "use_method": 0})  # doctest: +SKIP
    RecordedTime(status='ok', time_ms=46.268736, times=[...])
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Union

from warpforge.errors import UsageError

Status = Literal["ok", "compile", "runtime"]
# What a record's time may be, as Kernel Tuner writes it.
RecordTime = Union[float, Literal["CompilationFailedConfig", "RuntimeFailedConfig"]]

COMPILE_FAILED = "CompilationFailedConfig"
RUNTIME_FAILED = "RuntimeFailedConfig"
# Kernel Tuner >= 1.0 may store restriction violations as "InvalidConfig": like an absent key, they
# were never compiled, so they are not part of the space.
_INVALID = "InvalidConfig"
_FAILED_STATUS: dict[str, Status] = {COMPILE_FAILED: "compile", RUNTIME_FAILED: "runtime"}
_T4_STATUS: dict[str, Status] = {"correct": "ok", "compile": "compile", "runtime": "runtime"}
# T4 files state their unit in metadata.timeunit (the A100 file spells it "miliseconds").
_T4_UNIT_TO_MS = {
    "miliseconds": 1.0,
    "milliseconds": 1.0,
    "ms": 1.0,
    "seconds": 1e3,
    "s": 1e3,
    "microseconds": 1e-3,
    "us": 1e-3,
}


class CacheFormatError(UsageError):
    """The file is neither a Kernel Tuner cache file nor a T4 results file (or is damaged)."""


@dataclass(frozen=True)
class RecordedTime:
    """One recorded measurement: ``status`` ok (``time_ms`` set) or a compile/runtime failure."""

    status: Status
    time_ms: float | None = None
    times: list[float] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.status != "ok"


@dataclass(frozen=True)
class RecordedSpace:
    """A brute-forced table: configuration (values in ``params`` order) -> :class:`RecordedTime`.

    Example:
        >>> s = RecordedSpace("GPU", "k", [8], {"x": [1, 2]}, {(1,): RecordedTime("ok", 2.0),
        ...                   (2,): RecordedTime("runtime")})
        >>> s.optimum, s.lookup({"x": 2}).failed, s.lookup({"x": 3})
        (2.0, True, None)
    """

    device_name: str
    kernel_name: str
    problem_size: Any
    params: dict[str, list[Any]]
    records: dict[tuple[Any, ...], RecordedTime]
    source: str = ""

    def key(self, config: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(config[name] for name in self.params)

    def lookup(self, config: Mapping[str, Any]) -> RecordedTime | None:
        """The recorded result, or None when the configuration violates the kernel's restrictions."""
        try:
            return self.records.get(self.key(config))
        except KeyError:  # a parameter is missing: not a configuration of this kernel
            return None

    @cached_property
    def optimum(self) -> float:
        """Fastest recorded time in ms (inf when every configuration failed)."""
        return min((r.time_ms for r in self.records.values() if r.time_ms is not None), default=math.inf)

    @property
    def n_failed(self) -> int:
        return sum(1 for r in self.records.values() if r.failed)

    @property
    def name(self) -> str:
        """``<kernel folder>/<file stem>``, e.g. ``gemm/RTX_3090``, for tables."""
        if not self.source:
            return f"{self.kernel_name}/{self.device_name}"
        path = Path(self.source)
        stem = path.name.removesuffix(".gz").removesuffix(".json")
        return f"{path.parent.name}/{stem}"

    def __len__(self) -> int:
        return len(self.records)


def read_space(path: str | Path) -> RecordedSpace:
    """Read a Kernel Tuner cache file or a T4 results file (``.json`` or ``.json.gz``).

    Raises :class:`CacheFormatError` with a one-line reason on anything else.
    """
    path = Path(path)
    data = _load_json(path)
    if not isinstance(data, dict):
        raise CacheFormatError(f"{path}: top level is not a JSON object")
    if "cache" in data:
        return _from_kt(data, str(path))
    if "results" in data:
        return _from_t4(data, str(path))
    raise CacheFormatError(f"{path}: neither a Kernel Tuner cache ('cache') nor a T4 file ('results')")


def _load_json(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CacheFormatError(f"{path}: cannot read ({exc.strerror})") from None
    if raw[:2] == b"\x1f\x8b":  # gzip magic, whatever the suffix says
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise CacheFormatError(f"{path}: damaged gzip data ({exc})") from None
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # Kernel Tuner appends one record at a time and closes the object only at the end, so an
        # interrupted tuning run leaves "...},\n" behind; it repairs such files the same way.
        repaired = text.rstrip().rstrip(",") + "}}"
        try:
            return json.loads(repaired)
        except json.JSONDecodeError:
            raise CacheFormatError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None


def _from_kt(data: dict[str, Any], source: str) -> RecordedSpace:
    try:
        tune_params = {str(k): list(v) for k, v in data["tune_params"].items()}
        keys = [str(k) for k in data.get("tune_params_keys", list(tune_params))]
        cache = data["cache"]
    except (KeyError, TypeError, AttributeError) as exc:
        raise CacheFormatError(f"{source}: Kernel Tuner cache without a valid {exc} field") from None
    if not isinstance(cache, dict) or set(keys) != set(tune_params):
        raise CacheFormatError(f"{source}: 'tune_params_keys' and 'tune_params' disagree")
    params = {k: tune_params[k] for k in keys}
    records: dict[tuple[Any, ...], RecordedTime] = {}
    for cache_key, rec in cache.items():
        if not isinstance(rec, dict) or "time" not in rec:
            raise CacheFormatError(f"{source}: cache entry {cache_key!r} has no 'time'")
        try:
            values = tuple(rec[k] for k in keys)
        except KeyError:
            values = _parse_key(cache_key, params, source)
        result = _kt_time(rec["time"], rec.get("times"), source, cache_key)
        if result is not None:
            records[values] = result
    return RecordedSpace(
        str(data.get("device_name", "")),
        str(data.get("kernel_name", "")),
        data.get("problem_size"),
        params,
        records,
        source,
    )


def _parse_key(cache_key: str, params: dict[str, list[Any]], source: str) -> tuple[Any, ...]:
    """Recover typed values from the comma-joined key by matching each part against the candidates."""
    parts = cache_key.split(",")
    if len(parts) != len(params):
        raise CacheFormatError(f"{source}: cache key {cache_key!r} does not have {len(params)} values")
    out = []
    for part, (name, values) in zip(parts, params.items()):
        match = [v for v in values if str(v) == part]
        if not match:
            raise CacheFormatError(f"{source}: {name}={part} in key {cache_key!r} is not a candidate value")
        out.append(match[0])
    return tuple(out)


def _kt_time(time: Any, times: Any, source: str, key: str) -> RecordedTime | None:
    if isinstance(time, str):
        if time == _INVALID:
            return None
        if time not in _FAILED_STATUS:
            raise CacheFormatError(f"{source}: entry {key!r} has unknown time {time!r}")
        return RecordedTime(_FAILED_STATUS[time])
    if isinstance(time, bool) or not isinstance(time, (int, float)) or not math.isfinite(time):
        raise CacheFormatError(f"{source}: entry {key!r} has a non-numeric time {time!r}")
    return RecordedTime("ok", float(time), [float(t) for t in (times or [])])


def _from_t4(data: dict[str, Any], source: str) -> RecordedSpace:
    meta = data.get("metadata") or {}
    scale = _T4_UNIT_TO_MS.get(str(meta.get("timeunit", "milliseconds")).lower())
    if scale is None:
        raise CacheFormatError(f"{source}: unknown T4 timeunit {meta.get('timeunit')!r}")
    results = data["results"]
    if not isinstance(results, list) or not results:
        raise CacheFormatError(f"{source}: T4 'results' is empty or not a list")
    names: list[str] = []
    rows: list[tuple[dict[str, Any], RecordedTime]] = []
    for i, res in enumerate(results):
        try:
            config = dict(res["configuration"])
            invalidity = str(res.get("invalidity", "correct"))
            status = _T4_STATUS.get(invalidity)
            if status is None:  # "constraints" and the like: outside the restricted space
                continue
            if not names:
                names = list(config)
            if status == "ok":
                value = next(m["value"] for m in res["measurements"] if m["name"] == "time")
                runtimes = res.get("times", {}).get("runtimes", [])
                rows.append((config, RecordedTime("ok", float(value) * scale, [float(t) * scale for t in runtimes])))
            else:
                rows.append((config, RecordedTime(status)))
        except (KeyError, TypeError, ValueError, StopIteration):
            raise CacheFormatError(f"{source}: T4 result #{i} lacks a configuration or a time") from None
    # T4 files carry no candidate lists: the candidates are the values seen, in sorted (ordinal) order.
    params = {n: sorted({c[n] for c, _ in rows}, key=_sort_key) for n in names}
    records = {tuple(c[n] for n in names): r for c, r in rows}
    return RecordedSpace(
        str(meta.get("device_name", "")),
        str(meta.get("kernel_name", "")),
        meta.get("problem_size"),
        params,
        records,
        source,
    )


def _sort_key(v: Any) -> tuple[int, Any]:
    return (0, v) if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, str(v))


def write_cache(
    path: str | Path,
    device_name: str,
    kernel_name: str,
    problem_size: Any,
    tune_params: dict[str, list[Any]],
    records: Sequence[tuple[Mapping[str, Any], RecordTime, Sequence[float]]],
) -> Path:
    """Write a Kernel Tuner cache file (gzip-compressed when ``path`` ends in ``.gz``).

    ``records`` holds ``(params, time_ms | "CompilationFailedConfig" | "RuntimeFailedConfig", times)``.
    Configurations not written are, by the format's rule, outside the kernel's restrictions.

    Example:
        >>> write_cache("/tmp/k.json", "NVIDIA H100", "k", [1024], {"x": [1, 2]},
        ...             [({"x": 1}, 0.5, [0.5, 0.5]), ({"x": 2}, "RuntimeFailedConfig", [])])
        PosixPath('/tmp/k.json')
    """
    path = Path(path)
    keys = list(tune_params)
    cache: dict[str, dict[str, Any]] = {}
    for params, time, times in records:
        missing = [k for k in keys if k not in params]
        if missing:
            raise ValueError(f"record {dict(params)} lacks parameters {missing}")
        if isinstance(time, str):
            if time not in _FAILED_STATUS:
                raise ValueError(f"time must be a number, {COMPILE_FAILED!r} or {RUNTIME_FAILED!r}")
            entry_time: Any = time
        else:
            entry_time = float(time)
        entry = {k: params[k] for k in keys}
        entry.update(time=entry_time, times=[float(t) for t in times])
        cache[",".join(str(params[k]) for k in keys)] = entry
    doc = {
        "device_name": device_name,
        "kernel_name": kernel_name,
        "problem_size": problem_size,
        "tune_params_keys": keys,
        "tune_params": {k: list(v) for k, v in tune_params.items()},
        "objective": "time",
        "cache": cache,
    }
    payload = json.dumps(doc).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(payload) if path.name.endswith(".gz") else payload)
    return path
