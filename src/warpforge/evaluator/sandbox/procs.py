"""Process plumbing for sandbox/supervisor.py: resident memory of a sandbox, its PID 1, signals, pipes.

Example::

    >>> from warpforge.evaluator.sandbox.procs import alive
    >>> import os
    >>> alive(os.getpid())
    True
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import math
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def die_with_parent() -> Callable[[], None]:
    """A ``preexec_fn`` that ties the new process to this one: SIGKILL when this thread's process dies.

    Without it a CLI killed with SIGKILL leaves its candidates running (one ran on for 40 minutes). bubblewrap's
    ``--die-with-parent`` does the same for sandboxed children; this covers the unsandboxed path and bwrap
    itself. Set between fork and exec, it survives the exec (no set-user-ID binary is involved); a parent that
    died before it was set is caught by comparing the parent pid. The signal follows the *thread* that
    started the child: each ChildPool is used by one long-lived thread (pool.LocalPool's workers, the CLI's
    main thread), and a spare whose thread ended is found dead by ``take`` and replaced.
    """
    parent = os.getpid()

    def preexec() -> None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class RssWatch:
    """Resident memory of a child; inside a sandbox, of every process in its process group.

    Finding the group's members scans /proc (tens of ms on a loaded machine), so membership is refreshed
    at most every 2 s; the members' own statm files are read at every sample. The parent timestamps
    marks when it reads them, and a scan in the way would make them late.
    """

    def __init__(self, proc: subprocess.Popen[bytes], init_pid: int | None) -> None:
        self.proc, self.init_pid = proc, init_pid
        self.members: list[int] = []
        self.refreshed = -math.inf

    def sample(self) -> int:
        if self.init_pid is None:
            return _rss_bytes(self.proc.pid)
        now = time.monotonic()
        if now - self.refreshed > 2.0:
            self.members, self.refreshed = group_members(self.init_pid), now
        return sum(_rss_bytes(pid) for pid in self.members)


def group_members(pgid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getpgid(int(entry)) == pgid:
                    out.append(int(entry))
            except OSError:
                continue
    return out


def read_init_pid(fd: int) -> int | None:
    """bubblewrap's --info-fd JSON: ``child-pid`` is the host pid of the sandbox's PID 1."""
    data = b""
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    try:
        info = json.loads(data.decode())
    except (ValueError, UnicodeDecodeError):
        info = None
    pid = info.get("child-pid") if isinstance(info, dict) else None
    return int(pid) if isinstance(pid, int) else None


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a zombie PID 1 has no namespace left)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def send_signal(pid: int, sig: int, group: bool) -> None:
    try:
        os.killpg(pid, sig) if group else os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def write_all(fd: int, data: bytes, deadline: float) -> bool:
    """Write ``data`` to a non-blocking pipe before ``deadline``; False if the child stopped reading."""
    view = memoryview(data)
    while view:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        _, ready, _ = select.select([], [fd], [], min(remaining, 1.0))
        if not ready:
            continue
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            continue
        except (BrokenPipeError, OSError):
            return False
    return True


def close_quietly(stream: Any) -> None:
    try:
        if stream is not None and not stream.closed:
            stream.close()
    except OSError:
        pass
