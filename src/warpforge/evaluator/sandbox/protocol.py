"""The typed formats that cross the trust boundary: a ``check`` request and the child's report.

Both sides speak newline-delimited JSON (sandbox/supervisor.py); these TypedDicts are that JSON's shape, so the
trusted side (stages.py writes requests, judge/judge.py reads reports) and the child (child/check.py) agree on
keys that mypy can check. A report is *claims*, never trusted as such: judge/judge.py re-derives what it
can (values from its own reference, files from their hashes).

Example::

    >>> req: CheckRequest = {"mode": "check", "candidate": "candidate.py", "candidate_sha256": "0" * 64,
    ...                      "params": {}, "device": "cpu",
    ...                      "constraint_shapes": [], "grid_seed": 1, "cases": []}
"""

from __future__ import annotations

from typing import Any, TypedDict


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


class CheckRequest(_CheckRequestBase, total=False):
    rerun: RerunRequest
    ghost: RerunRequest
    training: bool  # each case's inputs end with grad_out; launch, launch_forward, launch_backward run
    model_new: dict[str, Any]  # {"param_names": [...]} for a ModelNew variant (child/model_new.py)
    scratch: str  # added by sandbox.ChildPool.run
    nonce: str  # likewise


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
    saved: str  # file name in the scratch directory
    sha256: str  # of that file's bytes, checked before it is judged
    error: dict[str, Any]
    # A training check (child/backward.py): how many outputs launch, launch_forward and launch_backward
    # returned (in that order in ``saved``), and the kinds of what launch_forward saved.
    parts: list[int]
    saved_kinds: list[str]


class CaseFacts(LaunchFacts, total=False):
    id: int


class CheckReport(TypedDict, total=False):
    """The child's report of a check run."""

    cases: list[CaseFacts]
    rerun: LaunchFacts
    ghost: LaunchFacts
    state_before: dict[str, str]
    state_after: dict[str, str]
    state_changed_end: list[str]
    threads_end: int
    tampered_end: list[str]
    error: dict[str, Any]
    invalid_config: str
    versions: dict[str, str]
    seccomp: str
    nonce: str
