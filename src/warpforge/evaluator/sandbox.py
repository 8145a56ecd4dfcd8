"""Spawned child processes that run untrusted candidate code, supervised from the trusted side.

Each candidate gets a fresh child (``python -I -m warpforge.evaluator.child``) in its own scratch
directory and process group: a candidate that monkeypatches torch, leaks memory or poisons its CUDA
context cannot touch the next one. Importing torch costs about 1-2 s, so the pool keeps one child per
environment pre-spawned and warm: it has imported torch and waits for its single request.

Protocol: the request is one JSON line on the child's stdin; the report is one JSON document on a
private pipe (fd passed with ``pass_fds``), so a candidate printing fake results to stdout changes
nothing. EOF on that pipe with no report means the child crashed; past the timeout the whole
process group is SIGKILLed.
"""

from __future__ import annotations

import json
import os
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


@dataclass
class ChildOutcome:
    """What came back from one child: a report, or why there is none."""

    status: str  # "done" | "timeout" | "crashed"
    report: dict[str, Any] | None
    returncode: int | None
    stderr_tail: str
    wall_s: float
    scratch: Path


@dataclass
class _Child:
    proc: subprocess.Popen[bytes]
    result_r: int
    scratch: Path
    started: float = field(default_factory=time.monotonic)


def child_env(interpret: bool, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: only what it needs; no API keys or database URLs leak into it."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "TRITON_CACHE_DIR", "TMPDIR",
            "LD_LIBRARY_PATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["PYTHONUNBUFFERED"] = "1"
    # The Triton interpreter must be chosen before Triton is imported (DESIGN 8).
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    # Quiet Triton 3.9's FP-fusion deprecation warning without changing its current default.
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    env.update(extra or {})
    return env


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
            prepare: Any = None) -> ChildOutcome:
        """Run one request in a fresh child; ``prepare(scratch)`` writes files the child will read."""
        child = self.take(env)
        if prepare is not None:
            prepare(child.scratch)
        request = {**request, "scratch": str(child.scratch)}
        start = time.monotonic()
        status, report = "crashed", None
        try:
            assert child.proc.stdin is not None
            child.proc.stdin.write((json.dumps(request) + "\n").encode())
            child.proc.stdin.close()
        except BrokenPipeError:
            pass
        chunks: list[bytes] = []
        deadline = start + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                status = "timeout"
                break
            ready, _, _ = select.select([child.result_r], [], [], min(remaining, 1.0))
            if ready:
                data = os.read(child.result_r, 1 << 20)
                if not data:  # EOF: the child closed the pipe (finished or died)
                    break
                chunks.append(data)
        os.close(child.result_r)
        if status == "timeout":
            _kill_group(child.proc)
        else:
            try:
                child.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _kill_group(child.proc)
            if chunks:
                try:
                    report = json.loads(b"".join(chunks).decode())
                    status = "done"
                except (ValueError, UnicodeDecodeError):
                    status = "crashed"
        wall = time.monotonic() - start
        stderr_tail = _tail(child.scratch / "stderr.txt")
        return ChildOutcome(status, report, child.proc.returncode, stderr_tail, wall, child.scratch)

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
