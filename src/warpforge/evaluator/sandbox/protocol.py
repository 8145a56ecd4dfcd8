"""The typed formats that cross the trust boundary: a ``check`` request and the child's report.

Both sides speak newline-delimited JSON (sandbox/supervisor.py); these TypedDicts are that JSON's shape, so the
trusted side (stages.py writes requests, judge/judge.py reads reports) and the child (child/check.py) agree on
keys that mypy can check. A report is *claims*, never trusted as such: judge/judge.py re-derives what it
can (values from its own reference, files from their hashes). The child runs candidate code, so a report
may be anything JSON can say: :func:`validate_report` types it against its mode's TypedDict (pydantic,
strict) as it arrives (sandbox/supervisor.py), and a report that does not fit is the verdict ``rejected:
malformed_report``, never a KeyError or a TypeError in a stage that reads it.

Example::

    >>> req: CheckRequest = {"mode": "check", "candidate": "candidate.py", "candidate_sha256": "0" * 64,
    ...                      "params": {}, "device": "cpu",
    ...                      "constraint_shapes": [], "grid_seed": 1, "cases": []}
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict  # pydantic validates only typing_extensions' TypedDict on Python < 3.12

# Unknown keys stay (readers ignore them); the keys a reader does index are typed.
_OPEN = ConfigDict(extra="allow")


class _CaseRequestBase(TypedDict):
    id: int
    sentinel: float
    shuffled: bool


class CaseRequest(_CaseRequestBase, total=False):
    """One case: its id (inputs are asked for with ``need``), the output sentinel, the grid order; for a
    ModelNew variant, the init inputs of its shape (evaluator/sandbox/model_spec.py)."""

    init: list[Any]


class RerunRequest(TypedDict):
    case: int
    sentinel: float


class _CheckRequestBase(TypedDict):
    mode: str  # "check"
    candidate: str
    candidate_sha256: str  # of the bytes the grammar checked: the child imports nothing else
    params: dict[str, Any]
    device: str
    constraint_shapes: list[dict[str, int]]
    grid_seed: int
    cases: list[CaseRequest]


class PerturbedRequest(TypedDict):
    case: int
    seeds: list[int]  # one perturbed run of the case per seed (child/perturb.py)


class CheckRequest(_CheckRequestBase, total=False):
    rerun: RerunRequest
    ghost: RerunRequest
    perturbed: PerturbedRequest
    training: bool  # each case's inputs end with grad_out; launch, launch_forward, launch_backward run
    model_new: dict[str, Any]  # {"param_names": [...]} for a ModelNew variant (child/model_new.py)
    scratch: str  # added by supervisor.ChildPool.run
    nonce: str  # likewise


@with_config(_OPEN)
class _ErrorBase(TypedDict):
    stage: str
    kind: str
    type: str
    message: str


@with_config(_OPEN)
class ErrorFacts(_ErrorBase, total=False):
    """How the candidate (or the harness) failed in the child (child/common.error_info); stages.child_failure
    maps ``kind`` and ``stage`` to a verdict."""

    traceback: str


@with_config(_OPEN)
class LaunchFacts(TypedDict, total=False):
    """What the child saw around one call of ``launch``."""

    case: int
    kinds: list[str]
    aliases: list[bool]
    seconds: float
    ops: list[str]
    kernel_calls: int | None
    threads: int
    tampered: list[str]
    state_changed: list[str]
    kernels: list[str]  # source hashes of the kernels launched
    grid: str
    grids: list[list[Any]]  # per Triton launch under the interpreter: [gx, gy, gz, shuffled, order digest]
    races: list[dict[str, Any]]  # per case under the interpreter: races between one launch's programs (child/races.py)
    saved: str  # file name in the scratch directory
    sha256: str  # of that file's bytes, checked before it is judged
    error: ErrorFacts
    # A training check (child/backward.py): how many outputs launch, launch_forward and launch_backward
    # returned (in that order in ``saved``), and the kinds of what launch_forward saved.
    parts: list[int]
    saved_kinds: list[str]


@with_config(_OPEN)
class CaseFacts(LaunchFacts, total=False):
    id: int


@with_config(_OPEN)
class CheckReport(TypedDict, total=False):
    """The child's report of a check run."""

    cases: list[CaseFacts]
    rerun: LaunchFacts
    ghost: LaunchFacts
    perturbed: list[LaunchFacts]
    state_before: dict[str, Any]
    state_after: dict[str, Any]
    state_changed_end: list[str]
    threads_end: int
    tampered_end: list[str]
    error: ErrorFacts
    invalid_config: Any  # the shape constraints() refused, only printed
    versions: dict[str, str]
    seccomp: str
    nonce: str


@with_config(_OPEN)
class _Report(TypedDict, total=False):
    error: ErrorFacts
    versions: dict[str, str]
    seccomp: str  # the filter the child installed (child/seccomp.py PROFILES), checked by stages.walls_finding
    nonce: str


class _KernelBase(TypedDict):
    kernel: str
    registers: int | None
    spill_bytes: int | None
    shared_bytes: int | None
    compile_s: float | None


@with_config(_OPEN)
class KernelFacts(_KernelBase, total=False):
    """One kernel the AOT compile built (child/compile.py), the basis of a result's Resources."""

    source_hash: str
    shape: dict[str, int] | None  # None for a specialization compiled after the check (no shape of its own)
    dtype: str | None
    num_warps: int


@with_config(_OPEN)
class CompileReport(_Report, total=False):
    kernels: list[KernelFacts]
    compiled_hashes: list[str]
    target: str


@with_config(_OPEN)
class SpaceReport(_Report, total=False):
    names: list[str]
    feasible: list[list[Any]]  # rows of SPACE values: stages.space_stage maps each back to SPACE's own value


@with_config(_OPEN)
class TimedCaseFacts(TypedDict, total=False):
    id: int
    ms: list[float]
    ref_ms: list[float]
    pending_ms: list[float]
    saved: list[int]
    threads: int
    forward_ms: list[float]
    backward_ms: list[float]
    ref_forward_ms: list[float]
    ref_backward_ms: list[float]


@with_config(_OPEN)
class BenchReport(_Report, total=False):
    """``reference`` and ``bench`` (child/bench.py)."""

    cases: list[TimedCaseFacts]
    tampered: list[str]
    state_changed: list[str]
    device: dict[str, Any]


@with_config(_OPEN)
class ABReport(_Report, total=False):
    samples: list[list[list[float]]]  # [candidate][case][round]
    tampered: list[str]
    state_changed: list[str]
    threads: int
    which: int


REPORTS: dict[str, Any] = {
    "check": CheckReport,
    "compile": CompileReport,
    "space": SpaceReport,
    "reference": BenchReport,
    "bench": BenchReport,
    "ab": ABReport,
}


@lru_cache(maxsize=None)
def _adapter(mode: str) -> TypeAdapter[Any]:
    return TypeAdapter(REPORTS.get(mode, _Report))


def validate_report(mode: str, report: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """``(typed report, "")``, or ``(None, why)`` in one line when the report does not fit its mode's shape.

    Example::

        >>> validate_report("space", {"names": ["BLOCK"], "feasible": [[64]]})[1]
        ''
        >>> validate_report("space", {"names": "BLOCK"})[1]
        "names: Input should be a valid list (got 'BLOCK')"
    """
    try:
        return _adapter(mode).validate_python(report, strict=True), ""
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "report"
        got = repr(first.get("input"))
        return None, f"{where}: {first['msg']} (got {got[:60]}{'...' if len(got) > 60 else ''})"
    except RecursionError:  # nesting JSON allows but no report has
        return None, "report: nested too deeply"


def _times(values: list[float]) -> bool:
    return bool(values) and all(math.isfinite(v) and v > 0 for v in values)


def check_report(request: dict[str, Any], report: dict[str, Any]) -> str:
    """What a typed report says that its request rules out ("" when nothing): the ids, counts and times the
    trusted side indexes and divides by (a timed case without times, a zero time, a space row of the wrong
    width). Only reports without an error are held to it: an error report stops at child_failure."""
    if report.get("error") or "invalid_config" in report:
        return ""
    mode = request.get("mode")
    if mode == "check":
        for case in report.get("cases", []):
            missing = [k for k in ("id", "kinds", "aliases") if k not in case]
            if missing:
                return f"cases: a case without {', '.join(missing)}"
    if mode == "space":
        if report.get("names") != list(request.get("space", {})):
            return "names: not the parameters of SPACE in SPACE's order"
        if any(len(row) != len(report["names"]) for row in report.get("feasible", [])):
            return "feasible: a row's length is not SPACE's parameter count"
    if mode in ("reference", "bench"):
        ids = [c["id"] for c in request.get("cases", [])]
        cases = report.get("cases", [])
        if [c.get("id") for c in cases] != ids:
            return f"cases: ids {[c.get('id') for c in cases][:5]} are not the request's {ids[:5]}"
        keys = ("ms",) if mode == "reference" else ("ms", "ref_ms")
        for case in cases:
            for key in keys:
                if not _times(case.get(key, [])):
                    return f"cases.{case['id']}.{key}: times are a non-empty list of positive finite ms"
    if mode == "ab":
        samples = report.get("samples", [])
        rounds, n = int(request.get("rounds", 0)), len(request.get("cases", []))
        if len(samples) != 2 or any(
            len(per) != n or any(len(r) != rounds or not _times(r) for r in per) for per in samples
        ):
            return f"samples: not 2 candidates x {n} cases x {rounds} rounds of positive finite ms"
    return ""
