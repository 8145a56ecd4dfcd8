"""Spawned child processes that run untrusted candidate code, supervised from the trusted side.

Each candidate gets a fresh child (``python -I -m warpforge.evaluator.child``) in its own scratch
directory and process group: a candidate that monkeypatches torch, leaks memory or poisons its CUDA
context cannot touch the next one. Importing torch costs about 1-2 s, so the pool keeps one child per
environment pre-spawned and warm: it has imported torch and waits for its single request.

Protocol: the request is one JSON line on the child's stdin, carrying a random nonce; the child answers
on a private pipe (fd passed with ``pass_fds``) with newline-delimited JSON: progress marks
(``{"mark": "launch"}``), which this side timestamps with its own clock and which may start a phase
deadline, then one report that must echo the nonce. A candidate printing fake results to stdout changes
nothing; one writing a canned report to the pipe lacks the nonce (``forged``). EOF with no report means
the child died; past a deadline the whole process group is SIGKILLed; a child whose resident memory
passes its limit is killed too (``oom``): host memory is contained even where RLIMIT_AS cannot be set
(a CUDA process reserves tens of GB of address space).
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The environment variable through which the child learns how much address space it may add after its imports.
AS_LIMIT_ENV = "WARPFORGE_CHILD_AS_BYTES"
# Files the harness itself leaves in a scratch directory; anything else was written by the candidate.
HARNESS_FILES = re.compile(r"(stdout\.txt|stderr\.txt|kernel\.cubin|candidate(_[ab])?\.py|in_\d+\.pt|"
                           r"out_(\d+|rerun|ghost)\.pt|timed_\d+_\d+\.pt|timed_ab_\d_\d+\.pt)")


@dataclass(frozen=True)
class Mark:
    """A progress mark from the child, timestamped on arrival by the parent's monotonic clock."""

    name: str
    at: float  # seconds since the request was written
    data: dict[str, Any]


@dataclass
class ChildOutcome:
    """What came back from one child: a report, or why there is none."""

    status: str  # "done" | "timeout" | "crashed" | "oom" | "forged"
    report: dict[str, Any] | None
    returncode: int | None
    stderr_tail: str
    wall_s: float
    scratch: Path
    marks: list[Mark] = field(default_factory=list)
    phase: str = ""  # the phase whose deadline expired (timeout) or "" for the overall one
    limit_s: float = 0.0  # the deadline that expired, in seconds
    peak_rss: int = 0  # bytes, as sampled by the parent

    def unexpected_files(self) -> list[str]:
        """Names in the scratch directory that neither the harness nor the trusted side wrote."""
        try:
            names = sorted(p.name for p in self.scratch.iterdir())
        except OSError:
            return []
        return [n for n in names if not HARNESS_FILES.fullmatch(n)]


@dataclass
class _Child:
    proc: subprocess.Popen[bytes]
    result_r: int
    scratch: Path
    started: float = field(default_factory=time.monotonic)


def child_env(interpret: bool, extra: dict[str, str] | None = None,
              as_limit_bytes: int | None = None) -> dict[str, str]:
    """The child's environment: only what it needs; no API keys or database URLs leak into it.

    ``as_limit_bytes`` is the address space the child may add once torch and Triton are imported
    (RLIMIT_AS): a runaway host allocation fails with MemoryError inside the child instead of waking the
    OOM killer. Never set it for a CUDA child: the driver reserves far more address space than it uses.
    """
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "TRITON_CACHE_DIR", "TMPDIR",
            "LD_LIBRARY_PATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["PYTHONUNBUFFERED"] = "1"
    # The Triton interpreter must be chosen before Triton is imported (DESIGN 8).
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    # Quiet Triton 3.9's FP-fusion deprecation warning without changing its current default.
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    if as_limit_bytes:
        env[AS_LIMIT_ENV] = str(int(as_limit_bytes))
    env.update(extra or {})
    return env


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class ChildPool:
    """Hands out fresh single-use children, keeping one spare warm per environment."""

    def __init__(self, scratch_root: Path | None = None, keep_scratch: bool = False) -> None:
        self.scratch_root = Path(scratch_root or tempfile.mkdtemp(prefix="warpforge-"))
        self.keep_scratch = keep_scratch
        self._spares: dict[str, _Child] = {}
        self._lock = threading.Lock()

    def _spawn(self, env: dict[str, str]) -> _Child:
        self.scratch_root.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="cand-", dir=self.scratch_root))
        result_r, result_w = os.pipe()
        stderr = open(scratch / "stderr.txt", "wb")
        stdout = open(scratch / "stdout.txt", "wb")
        # -I: isolated mode, so neither the scratch directory nor PYTHONPATH can plant modules.
        proc = subprocess.Popen(
            [sys.executable, "-I", "-m", "warpforge.evaluator.child", str(result_w)],
            stdin=subprocess.PIPE, stdout=stdout, stderr=stderr, cwd=scratch, env=env,
            pass_fds=(result_w,), start_new_session=True,
        )
        os.close(result_w)
        stdout.close()
        stderr.close()
        return _Child(proc, result_r, scratch)

    def take(self, env: dict[str, str]) -> _Child:
        key = json.dumps(env, sort_keys=True)
        with self._lock:
            child = self._spares.pop(key, None)
            if child is None or child.proc.poll() is not None:
                child = self._spawn(env)
            self._spares[key] = self._spawn(env)  # warm the next one while this one works
        return child

    def run(self, request: dict[str, Any], env: dict[str, str], timeout_s: float,
            prepare: Any = None, budgets: dict[str, float] | None = None,
            rss_limit_bytes: int | None = None) -> ChildOutcome:
        """Run one request in a fresh child; ``prepare(scratch)`` writes files the child will read.

        ``budgets`` maps a mark name to a phase deadline in seconds: when the child sends that mark, it
        must send the next mark (or its report) within the budget, never later than ``timeout_s``
        overall. A child cannot buy time with marks: the overall deadline never moves.
        """
        child = self.take(env)
        if prepare is not None:
            prepare(child.scratch)
        nonce = secrets.token_hex(16)
        request = {**request, "scratch": str(child.scratch), "nonce": nonce}
        start = time.monotonic()
        overall = start + timeout_s
        phase, phase_deadline, phase_limit = "", math.inf, timeout_s
        status_phase, limit = "", timeout_s
        status, report = "crashed", None
        try:
            assert child.proc.stdin is not None
            child.proc.stdin.write((json.dumps(request) + "\n").encode())
            child.proc.stdin.close()
        except BrokenPipeError:
            pass
        buffer = b""
        lines: list[bytes] = []
        marks: list[Mark] = []
        peak_rss = 0
        # Poll at 0.2 s while a memory limit is watched (a 1 GiB bytearray fills in ~0.3 s), else 1 s.
        poll_s = 0.2 if rss_limit_bytes else 1.0
        while True:
            now = time.monotonic()
            deadline = min(overall, phase_deadline)
            if now >= deadline:
                status = "timeout"
                if phase_deadline < overall:
                    status_phase, limit = phase, phase_limit
                else:
                    status_phase, limit = "", timeout_s
                break
            if rss_limit_bytes:
                rss = _rss_bytes(child.proc.pid)
                peak_rss = max(peak_rss, rss)
                if rss > rss_limit_bytes:
                    status = "oom"
                    break
            ready, _, _ = select.select([child.result_r], [], [], min(deadline - now, poll_s))
            if not ready:
                continue
            data = os.read(child.result_r, 1 << 20)
            if not data:  # EOF: the child closed the pipe (finished or died)
                break
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                msg = _parse(line)
                if isinstance(msg, dict) and isinstance(msg.get("mark"), str):
                    at = time.monotonic()
                    marks.append(Mark(msg["mark"], at - start, msg))
                    if budgets and msg["mark"] in budgets:
                        phase, phase_limit = msg["mark"], budgets[msg["mark"]]
                        phase_deadline = at + phase_limit
                elif line.strip():
                    lines.append(line)
        os.close(child.result_r)
        if buffer.strip():
            lines.append(buffer)
        if status in ("timeout", "oom"):
            _kill_group(child.proc)
        else:
            try:
                child.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _kill_group(child.proc)
            parsed = _parse(lines[-1]) if lines else None
            if isinstance(parsed, dict):
                report = parsed
                status = "done" if parsed.get("nonce") == nonce else "forged"
        wall = time.monotonic() - start
        stderr_tail = _tail(child.scratch / "stderr.txt")
        outcome = ChildOutcome(status, report, child.proc.returncode, stderr_tail, wall, child.scratch, marks,
                               peak_rss=peak_rss)
        if status == "timeout":
            outcome.phase, outcome.limit_s = status_phase, limit
        return outcome

    def release(self, outcome: ChildOutcome) -> None:
        if not self.keep_scratch:
            shutil.rmtree(outcome.scratch, ignore_errors=True)

    def close(self) -> None:
        with self._lock:
            for child in self._spares.values():
                _kill_group(child.proc)
                os.close(child.result_r)
                shutil.rmtree(child.scratch, ignore_errors=True)
            self._spares.clear()
        if not self.keep_scratch:
            shutil.rmtree(self.scratch_root, ignore_errors=True)

    def __enter__(self) -> ChildPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _parse(line: bytes) -> Any:
    try:
        return json.loads(line.decode())
    except (ValueError, UnicodeDecodeError):
        return None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _tail(path: Path, limit: int = 2000) -> str:
    try:
        data = path.read_bytes()[-limit:]
    except OSError:
        return ""
    return data.decode(errors="replace")
