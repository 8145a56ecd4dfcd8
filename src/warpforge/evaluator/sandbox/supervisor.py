"""Spawned child processes that run untrusted candidate code, supervised from the trusted side.

Each candidate gets a fresh child (``python -I -m warpforge.evaluator.sandbox.child``) in its own scratch
directory, inside the OS sandbox of isolation.py (bubblewrap: own mount/PID/network/IPC namespaces,
uid 65534, read-only system, only the scratch directory writable; the child adds a seccomp filter).
Importing torch costs about 1-2 s, so the pool keeps one child per environment pre-spawned and warm:
it has imported torch and waits for its single request.

Protocol: the request is one JSON line on the child's stdin; the child answers on a private pipe (fd
passed with ``pass_fds``) with newline-delimited JSON: progress marks (``{"mark": "launch"}``), which
this side timestamps with its own clock and which may start a phase deadline, then one report. A mark
``{"mark": "need", ...}`` asks for data (a case's inputs, only after the candidate is imported): the
``feed`` callback answers with bytes written to the child's stdin as one length-prefixed frame (an
empty frame is a refusal). Reading stops at the report; then the child's whole PID namespace is
killed and reaped before anything it wrote is read, so no process of the candidate's outlives its
report. EOF with no report means the child died; past a deadline the sandbox is SIGKILLed; a child
whose resident memory passes its limit is killed too (``oom``).
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
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import warpforge
from warpforge import keys
from warpforge.evaluator.sandbox import isolation
from warpforge.evaluator.sandbox.procs import (
    RssWatch,
    alive,
    close_quietly,
    die_with_parent,
    group_members,
    read_init_pid,
    send_signal,
    write_all,
)
from warpforge.evaluator.sandbox.protocol import check_report, validate_report
from warpforge.evaluator.sandbox.readback import tail_text

# The environment variable through which the child learns how much address space it may add after its imports.
AS_LIMIT_ENV = "WARPFORGE_CHILD_AS_BYTES"
# Files the harness itself leaves in a scratch directory; anything else was written by the candidate.
HARNESS_FILES = re.compile(
    r"(stdout\.txt|stderr\.txt|kernel\.cubin|candidate(_[ab])?\.py|task|triton-cache|"
    r"out_(\d+|rerun|ghost|perturbed_\d)\.pt|timed_\d+_\d+\.pt|timed_ab_\d_\d+\.pt)"
)
# How the child is started: from the same warpforge tree as this process (an editable install may point
# elsewhere), in isolated mode (-I: neither the working directory nor PYTHONPATH can plant modules).
_BOOT = "import sys; sys.path.insert(0, {root!r}); from warpforge.evaluator.sandbox.child.__main__ import main; main()"
# After the report, the child's namespace must be gone within this many seconds of SIGKILL.
REAP_S = 10.0
# What a child can make this process hold (2 GiB of progress marks grew the orchestrator to 3.5 GB and
# still ended ok). Honest children send up to 4 marks per case (imported, need, compile, launch) and 3 per timed
# shape, each under 200 bytes, and one report of tens of KB (a bench report carries 3 lists of 110 floats per
# shape, ~7 KB a shape). Past any cap the child is killed and judged `flooded` (rejected: output_flood).
MAX_MARKS = 10_000
MAX_MARK_BYTES = 64 << 10
MAX_REPORT_BYTES = 16 << 20
# The stderr tail quoted in verdicts (read from the file's end: a 3 GiB stderr costs this much, not 3 GiB).
TAIL_BYTES = 2000


def cpu_backstop_s(timeout_s: float) -> int:
    """RLIMIT_CPU for a child (set by the child once it has its request): a backstop that ends a spinning
    candidate even when nothing watches it any more (its parent killed, the death signal lost). Every core
    busy for the whole deadline, plus a minute: an honest child, whose wall time the deadline bounds, never
    comes near it."""
    return math.ceil(timeout_s * (os.cpu_count() or 1)) + 60


@dataclass
class PhaseClock:
    """The deadlines of one child: an overall one that never moves, and the current phase's.

    Every mark from the child ends the phase it was in; a mark named in ``budgets`` starts a phase bounded by
    that many seconds from its arrival, any other mark a phase bounded only by the overall deadline. So a
    budget covers exactly the work between its mark and the next one (the candidate's "launch" budget
    used to run on through the harness's own saving and the next case's input transfer, up to the next
    budgeted mark). A child cannot buy time with marks: the overall deadline stays where it was.

    Example::

        >>> clock = PhaseClock(0.0, 100.0, {"launch": 5.0})
        >>> clock.on_mark("launch", 1.0); clock.deadline()
        6.0
        >>> clock.on_mark("launched", 2.0); clock.deadline()
        100.0
    """

    start: float
    overall_s: float
    budgets: Mapping[str, float]
    phase: str = ""
    phase_limit_s: float = 0.0
    phase_end: float = math.inf

    def on_mark(self, name: str, at: float) -> None:
        self.phase = name
        if name in self.budgets:
            self.phase_limit_s, self.phase_end = self.budgets[name], at + self.budgets[name]
        else:
            self.phase_limit_s, self.phase_end = 0.0, math.inf

    def deadline(self) -> float:
        return min(self.start + self.overall_s, self.phase_end)

    def expired_phase(self) -> tuple[str, float]:
        """(phase, its limit) when the phase's deadline came first, else ("", the overall limit)."""
        if self.phase_end < self.start + self.overall_s:
            return self.phase, self.phase_limit_s
        return "", self.overall_s


Feed = Callable[[dict[str, Any]], bytes | None]


@dataclass(frozen=True)
class Mark:
    """A progress mark from the child, timestamped on arrival by the parent's monotonic clock."""

    name: str
    at: float  # seconds since the request was written
    data: dict[str, Any]


@dataclass(frozen=True)
class Walls:
    """The walls one child ran behind, as recorded with results (EvalResult.walls)."""

    isolation: str  # isolation.Isolation.summary()
    seccomp: str  # the profile the child installed, or why none
    problem: str = ""  # a wall that should be up and is not: the evaluator's error, never the candidate's verdict

    def summary(self) -> str:
        return f"{self.isolation}; seccomp {self.seccomp}"


@dataclass
class ChildOutcome:
    """What came back from one child: a report, or why there is none."""

    status: str  # "done" | "timeout" | "crashed" | "oom" | "forged" | "flooded" | "malformed" | "walls_down"
    report: dict[str, Any] | None
    returncode: int | None
    stderr_tail: str
    wall_s: float
    scratch: Path
    marks: list[Mark] = field(default_factory=list)
    phase: str = ""  # the phase whose deadline expired (timeout) or "" for the overall one
    limit_s: float = 0.0  # the deadline that expired, in seconds
    peak_rss: int = 0  # bytes, as sampled by the parent
    isolation: str = ""  # isolation.Isolation.summary() of the child
    survivors: int = 0  # processes of the candidate's still alive after the kill (should be 0)
    flood: str = ""  # which cap on the result pipe a flooded child passed
    malformed: str = ""  # why a report (status "malformed") did not fit its mode's typed shape (protocol.py)
    walls: Walls | None = None

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
    inside: str  # the scratch directory's path as the child sees it
    init_pid: int | None  # host pid of the sandbox's PID 1 (None without isolation)
    started: float = field(default_factory=time.monotonic)


def child_env(
    interpret: bool, extra: dict[str, str] | None = None, as_limit_bytes: int | None = None
) -> dict[str, str]:
    """The child's environment: only what it needs; no API keys or database URLs leak into it.

    ``as_limit_bytes`` is the address space the child may add once torch and Triton are imported
    (RLIMIT_AS): a runaway host allocation fails with MemoryError inside the child instead of waking the
    OOM killer. Never set it for a CUDA child: the driver reserves far more address space than it uses.
    """
    keep = (
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "CUDA_VISIBLE_DEVICES",
        "TRITON_CACHE_DIR",
        "TMPDIR",
        "LD_LIBRARY_PATH",
        "OPENBLAS_CORETYPE",
        "OPENBLAS_L2_SIZE",
        "OMP_NUM_THREADS",
    )
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["PYTHONUNBUFFERED"] = "1"
    # The Triton interpreter must be chosen before Triton is imported (docs/design.md §8).
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    # Quiet Triton 3.9's FP-fusion deprecation warning without changing its current default.
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    if as_limit_bytes:
        env[AS_LIMIT_ENV] = str(int(as_limit_bytes))
    env.update(extra or {})
    return env


class ChildPool:
    """Hands out fresh single-use children, keeping one spare warm per environment."""

    def __init__(self, scratch_root: Path | None = None, keep_scratch: bool = False) -> None:
        self.scratch_root = Path(scratch_root or tempfile.mkdtemp(prefix="warpforge-"))
        self.keep_scratch = keep_scratch
        self.isolation = isolation.probe()  # raises SandboxUnavailable under WARPFORGE_SANDBOX=require
        # No provider key stays in this process's environment once it runs candidates: an
        # unsandboxed candidate can read /proc/<ppid>/environ. The LLM client finds them in warpforge.keys.
        keys.hold()
        self._spares: dict[str, _Child] = {}
        self._lock = threading.Lock()

    def _spawn(self, env: dict[str, str]) -> _Child:
        self.scratch_root.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="cand-", dir=self.scratch_root))
        iso = self.isolation
        isolation.prepare_scratch(scratch, iso)
        result_r, result_w = os.pipe()
        fds = [result_w]
        info_r = info_w = -1
        if iso.active:
            info_r, info_w = os.pipe()
            fds.append(info_w)
            # Private to the sandbox: a per-candidate Triton cache (a shared one could be poisoned).
            env = {**env, "HOME": "/tmp", "TMPDIR": "/tmp", "TRITON_CACHE_DIR": "/tmp/triton-cache"}
        stderr = open(scratch / "stderr.txt", "wb")
        stdout = open(scratch / "stdout.txt", "wb")
        root = str(Path(warpforge.__file__).resolve().parents[1])  # the src/ (or site-packages) directory
        command = [sys.executable, "-I", "-c", _BOOT.format(root=root), str(result_w)]
        if iso.active:
            command = isolation.wrap(command, scratch, iso)
            command[1:1] = ["--info-fd", str(info_w)]
        proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=stdout,
            stderr=stderr,
            cwd=scratch,
            env=env,
            pass_fds=tuple(fds),
            start_new_session=True,
            preexec_fn=die_with_parent(),
        )
        os.close(result_w)
        stdout.close()
        stderr.close()
        init_pid = None
        if iso.active:
            os.close(info_w)
            init_pid = read_init_pid(info_r)
            os.close(info_r)
        return _Child(proc, result_r, scratch, isolation.INSIDE_SCRATCH if iso.active else str(scratch), init_pid)

    def take(self, env: dict[str, str]) -> _Child:
        key = json.dumps(env, sort_keys=True)
        with self._lock:
            child = self._spares.pop(key, None)
            if child is None or child.proc.poll() is not None:
                child = self._spawn(env)
            self._spares[key] = self._spawn(env)  # warm the next one while this one works
        return child

    def run(
        self,
        request: Mapping[str, Any],
        env: dict[str, str],
        timeout_s: float,
        prepare: Any = None,
        budgets: dict[str, float] | None = None,
        rss_limit_bytes: int | None = None,
        feed: Feed | None = None,
    ) -> ChildOutcome:
        """Run one request in a fresh child; ``prepare(scratch)`` writes files the child will read.

        ``budgets`` maps a mark name to a phase deadline in seconds: when the child sends that mark, it
        must send the next mark (or its report) within the budget, never later than ``timeout_s``
        overall (:class:`PhaseClock`). A child cannot buy time with marks: the overall deadline never moves. ``feed``
        answers the child's ``need`` marks (see the module docstring).
        """
        child = self.take(env)
        if prepare is not None:
            prepare(child.scratch)
        nonce = secrets.token_hex(16)
        request = {**request, "scratch": child.inside, "nonce": nonce, "cpu_s": cpu_backstop_s(timeout_s)}
        start = time.monotonic()
        overall = start + timeout_s
        clock = PhaseClock(start, timeout_s, budgets or {})
        status_phase, limit = "", timeout_s
        status, report = "crashed", None
        malformed = ""
        assert child.proc.stdin is not None
        stdin_fd = child.proc.stdin.fileno()
        os.set_blocking(stdin_fd, False)
        if not write_all(stdin_fd, (json.dumps(request) + "\n").encode(), overall):
            feed = None
        if feed is None:
            close_quietly(child.proc.stdin)
        buffer = b""
        lines: list[bytes] = []
        marks: list[Mark] = []
        peak_rss = 0
        got_report = False
        # Poll at 0.2 s while a memory limit is watched (a 1 GiB bytearray fills in ~0.3 s), else 1 s.
        poll_s = 0.2 if rss_limit_bytes else 1.0
        watch = RssWatch(child.proc, child.init_pid)
        sampled = -math.inf
        flood = ""
        while not got_report and not flood:
            now = time.monotonic()
            deadline = clock.deadline()
            if now >= deadline:
                status = "timeout"
                status_phase, limit = clock.expired_phase()
                break
            if rss_limit_bytes and now - sampled >= poll_s:
                sampled = now
                rss = watch.sample()
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
            while b"\n" in buffer and not got_report and not flood:
                line, buffer = buffer.split(b"\n", 1)
                msg = _parse(line)
                if isinstance(msg, dict) and isinstance(msg.get("mark"), str):
                    if len(line) > MAX_MARK_BYTES or len(marks) >= MAX_MARKS:
                        flood = (
                            f"a mark of {len(line)} bytes (cap {MAX_MARK_BYTES})"
                            if len(line) > MAX_MARK_BYTES
                            else f"more than {MAX_MARKS} progress marks"
                        )
                        break
                    at = time.monotonic()
                    marks.append(Mark(msg["mark"], at - start, msg))
                    clock.on_mark(msg["mark"], at)
                    payload = feed(msg) if feed is not None else None
                    if msg["mark"] == "need" and feed is not None:
                        payload = payload or b""
                        frame = len(payload).to_bytes(8, "little") + payload
                        if not write_all(stdin_fd, frame, clock.deadline()):
                            feed = None
                elif line.strip():
                    lines.append(line)
                    got_report = True  # the report is the last message: stop reading here
            if not got_report and not flood and len(buffer) > MAX_REPORT_BYTES:
                flood = f"a message of more than {MAX_REPORT_BYTES} bytes"
        if flood:
            status = "flooded"
            buffer, lines = b"", []
        os.close(child.result_r)
        close_quietly(child.proc.stdin)
        if not got_report and buffer.strip():
            lines.append(buffer)
        if status in ("timeout", "oom", "flooded"):
            survivors = self._end(child, grace_s=0.0)
        else:
            survivors = self._end(child, grace_s=10.0)
            parsed = _parse(lines[-1]) if lines else None
            if isinstance(parsed, dict):
                report = parsed
                status = "done" if parsed.get("nonce") == nonce else "forged"
            if status == "done" and report is not None:  # typed before any stage reads it (protocol.py)
                typed, malformed = validate_report(str(request.get("mode")), report)
                malformed = malformed or check_report(dict(request), typed or {})
                if malformed:
                    status, report = "malformed", None
                else:
                    report = typed
        walls = self._walls(request, env, report)
        if status == "done" and walls.problem:  # fail closed: a wall that did not install is never a verdict
            status, report = "walls_down", None
        wall = time.monotonic() - start
        stderr_tail = tail_text(child.scratch / "stderr.txt", TAIL_BYTES)
        outcome = ChildOutcome(
            status,
            report,
            child.proc.returncode,
            stderr_tail,
            wall,
            child.scratch,
            marks,
            peak_rss=peak_rss,
            isolation=self.isolation.summary(),
            survivors=survivors,
            flood=flood,
        )
        if status == "timeout":
            outcome.phase, outcome.limit_s = status_phase, limit
        outcome.malformed = malformed
        outcome.walls = walls
        return outcome

    def _walls(self, request: Mapping[str, Any], env: dict[str, str], report: dict[str, Any] | None) -> Walls:
        """Which walls the child ran behind: the OS sandbox (decided here) and the seccomp filter (the child's
        report, held to the profile this side expects for the mode: a weaker or missing one is a problem)."""
        from warpforge.evaluator.sandbox.child.__main__ import seccomp_profile  # stdlib only at import: safe here

        expected = seccomp_profile(str(request.get("mode")), env.get("TRITON_INTERPRET") == "1")
        ran = str((report or {}).get("seccomp", "")) if report is not None else ""
        problem = ""
        harness_only = ((report or {}).get("error") or {}).get("kind") == "evaluator_limit"  # before any install
        if report is not None and ran != expected and not harness_only:
            problem = (
                f"the child reports seccomp {ran or 'absent'!r} where the {expected!r} filter must be installed "
                "before any candidate code"
            )
        return Walls(self.isolation.summary(), ran or "unknown (no report)", problem)

    def _end(self, child: _Child, grace_s: float) -> int:
        """Let the child exit (up to ``grace_s``), then kill everything it started; returns survivors.

        In a sandbox, SIGKILL to its PID 1 makes the kernel kill every process in the namespace; PID 1
        exits only once they are all gone, so a dead (or zombie) PID 1 means nothing of the candidate's
        can still write. Without a sandbox only the child's process group can be killed.
        """
        try:
            child.proc.wait(timeout=grace_s) if grace_s > 0 else None
        except subprocess.TimeoutExpired:
            pass
        if child.init_pid is not None:
            send_signal(child.init_pid, signal.SIGKILL, group=True)
            send_signal(child.init_pid, signal.SIGKILL, group=False)
        _kill_group(child.proc)
        if child.init_pid is None:
            return 0
        end = time.monotonic() + REAP_S
        while time.monotonic() < end and alive(child.init_pid):
            time.sleep(0.01)
        return len(group_members(child.init_pid)) if alive(child.init_pid) else 0

    def release(self, outcome: ChildOutcome) -> None:
        if not self.keep_scratch:
            shutil.rmtree(outcome.scratch, ignore_errors=True)

    @contextmanager
    def running(
        self,
        request: Mapping[str, Any],
        env: dict[str, str],
        timeout_s: float,
        prepare: Any = None,
        budgets: dict[str, float] | None = None,
        rss_limit_bytes: int | None = None,
        feed: Feed | None = None,
    ) -> Iterator[ChildOutcome]:
        """:meth:`run` one request; the with-block judges its outcome and the files the child left in its scratch
        directory, which is released when the block ends, however it ends (a return, a failure, an error).

        Example::

            >>> with pool.running(request, job.env(interpret=True), 60.0, _write_candidate(job)) as outcome:
            ...     failure = child_failure(job, outcome, "constraint enumeration")     # doctest: +SKIP
        """
        outcome = self.run(
            request, env, timeout_s, prepare, budgets=budgets, rss_limit_bytes=rss_limit_bytes, feed=feed
        )
        try:
            yield outcome
        finally:
            self.release(outcome)

    def close(self) -> None:
        with self._lock:
            for child in self._spares.values():
                self._end(child, grace_s=0.0)
                os.close(child.result_r)
                close_quietly(child.proc.stdin)
                shutil.rmtree(child.scratch, ignore_errors=True)
            self._spares.clear()
        if not self.keep_scratch:
            shutil.rmtree(self.scratch_root, ignore_errors=True)

    def __enter__(self) -> ChildPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


SURROGATES = re.compile("[\ud800-\udfff]")


def _parse(line: bytes) -> Any:
    try:
        msg = json.loads(line.decode())
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: "[" * 10**5 is one line
        return None
    # JSON may escape a lone surrogate ("\ud800"): such a string in a verdict's message could not be printed to a
    # UTF-8 terminal nor read back from the stored result, so each one becomes U+FFFD here.
    try:
        return _no_surrogates(msg) if b"\\ud" in line.lower() else msg
    except RecursionError:  # as deep as json.loads allows, deeper than this walk: no message
        return None


def _no_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return SURROGATES.sub("\ufffd", value)
    if isinstance(value, list):
        return [_no_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_no_surrogates(k): _no_surrogates(v) for k, v in value.items()}
    return value


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
