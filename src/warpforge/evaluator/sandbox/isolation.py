"""OS-level isolation for every process that runs candidate code (Debian's bubblewrap).

A child is started as ``bwrap [namespaces, mounts] -- [drop to uid 65534] python -I ...``:

- its own mount, PID, network, IPC, UTS (and, where the kernel allows, cgroup) namespaces: no network
  but a private loopback, no view of the orchestrator's processes (``/proc`` is the sandbox's own), and
  when the sandbox's PID 1 dies the kernel kills every process left inside it;
- the whole file system mounted read-only (the virtual environment's site-packages included: a ``.pth``
  file planted there would run in the trusted orchestrator), with a private ``/tmp`` and the
  candidate's scratch directory (``/tmp/scratch`` inside) as the only writable places; directories
  the unprivileged user cannot traverse (``/root`` when the interpreter lives under it) are replaced by
  an empty tmpfs holding only what the child needs, read-only;
- an unprivileged user (uid/gid 65534, no supplementary groups, no capabilities, ``no_new_privs``);
- GPU device nodes (``/dev/nvidia*``, ``/dev/dri``) only on machines that have them.

Inside, the child itself installs a seccomp filter before importing the candidate (child/seccomp.py):
no ptrace, no other process's memory, no sockets but Unix ones, no mount/namespace calls and, where
nothing needs them (interpreter checks, constraint enumeration), no fork or exec.

``WARPFORGE_SANDBOX`` chooses the policy: ``auto`` (default: isolate when the kernel allows it, else
run unisolated and say so loudly), ``require`` (refuse to run candidates unisolated), ``off``.
Code warpforge did not ship (an LLM's, a user's variant file) always runs under ``require`` unless the
user passes ``--unsafe-run-unsandboxed`` (:func:`require_for_untrusted`, called by the CLI); every child
dies with its parent (``--die-with-parent`` here, a parent-death signal in sandbox/supervisor.py).

Example::

    >>> from warpforge.evaluator.sandbox.isolation import probe
    >>> probe().summary()                       # doctest: +SKIP
    'bwrap: user 65534, mount/pid/net/ipc namespaces, read-only system'
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import warpforge
from warpforge.errors import UsageError

log = logging.getLogger("warpforge.evaluator")

SANDBOX_ENV = "WARPFORGE_SANDBOX"
SANDBOX_UID = 65534  # "nobody" on Debian: owns nothing on the host
SANDBOX_GID = 65534
INSIDE_SCRATCH = "/tmp/scratch"
POLICIES = ("auto", "require", "off")


class SandboxUnavailable(UsageError):
    """Raised under ``WARPFORGE_SANDBOX=require`` when the OS sandbox cannot be set up (exit 2, one line)."""


@dataclass(frozen=True)
class Isolation:
    """What isolation children get on this machine, and why not more."""

    kind: str  # "bwrap" | "none"
    policy: str
    as_root: bool  # bwrap set up by root, then the child drops to SANDBOX_UID with setpriv
    gpu_devices: tuple[str, ...]
    problem: str = ""  # why there is no isolation (kind == "none")

    @property
    def active(self) -> bool:
        return self.kind == "bwrap"

    def summary(self) -> str:
        if not self.active:
            return f"none ({self.problem or 'WARPFORGE_SANDBOX=off'})"
        uid = f"user {SANDBOX_UID}" if self.as_root else f"user {os.getuid()} (unprivileged caller)"
        gpu = f", GPU nodes {list(self.gpu_devices)}" if self.gpu_devices else ", no device nodes"
        return f"bwrap: {uid}, mount/pid/net/ipc namespaces, read-only system and environment, scratch-only writes{gpu}"


def policy() -> str:
    value = os.environ.get(SANDBOX_ENV, "auto").strip().lower() or "auto"
    if value not in POLICIES:
        raise SandboxUnavailable(f"{SANDBOX_ENV}={value!r}: choose one of {', '.join(POLICIES)}")
    return value


def _gpu_devices() -> tuple[str, ...]:
    dev = Path("/dev")
    nodes = sorted(str(p) for p in dev.glob("nvidia*") if p.exists())
    if (dev / "dri").is_dir():
        nodes.append("/dev/dri")
    return tuple(nodes)


def _needed_roots() -> list[Path]:
    """Directories the child must read: the interpreter, the environment, warpforge's own source."""
    paths = {
        Path(sys.base_prefix),
        Path(sys.prefix),
        Path(os.path.realpath(sys.executable)).parent.parent,
        Path(warpforge.__file__).resolve().parents[1],
    }
    return sorted({p.resolve() for p in paths})


def _hidden_ancestor(path: Path) -> Path | None:
    """The topmost ancestor of ``path`` that other users cannot traverse (e.g. /root, mode 0700)."""
    for parent in reversed(path.parents):
        if parent == Path("/"):
            continue
        try:
            mode = parent.stat().st_mode
        except OSError:
            return None
        if not mode & stat.S_IXOTH:
            return parent
    return None


def bwrap_args(scratch: Path, devices: Sequence[str], as_root: bool) -> list[str]:
    """The bubblewrap command line (before the child's own command) for one scratch directory."""
    args = [
        "bwrap",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--new-session",
        "--die-with-parent",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
    ]
    if not as_root:
        args[1:1] = ["--unshare-user", "--disable-userns"]
    hidden: dict[Path, list[Path]] = {}
    for root in _needed_roots():
        top = _hidden_ancestor(root)
        if top is not None and as_root:
            hidden.setdefault(top, []).append(root)
    for top, roots in sorted(hidden.items()):
        args += ["--perms", "0755", "--tmpfs", str(top)]
        for root in roots:
            args += ["--ro-bind", str(root), str(root)]
    for node in devices:
        args += ["--dev-bind", node, node]
    args += ["--perms", "1777", "--tmpfs", "/tmp"]
    under_tmp = [r for r in _needed_roots() if Path("/tmp") in r.parents]
    made: set[Path] = set()
    for root in under_tmp:  # a checkout or venv under /tmp (CI may clone there) would vanish under the tmpfs
        for parent in reversed(root.parents):  # bwrap makes missing parents 0700: uid 65534 could not enter
            if Path("/tmp") in parent.parents and parent not in made:
                made.add(parent)
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", str(root), str(root)]
    args += ["--bind", str(scratch), INSIDE_SCRATCH, "--chdir", INSIDE_SCRATCH, "--"]
    if as_root:
        args += [
            "setpriv",
            f"--reuid={SANDBOX_UID}",
            f"--regid={SANDBOX_GID}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
        ]
    return args


def _detect(chosen: str) -> Isolation:
    """What isolation this machine gives under policy ``chosen`` (starts one empty sandbox to find out)."""
    as_root = os.geteuid() == 0
    devices = _gpu_devices()
    if chosen == "off":
        return Isolation("none", chosen, as_root, devices, f"{SANDBOX_ENV}=off")
    if shutil.which("bwrap") is None:
        return Isolation("none", chosen, as_root, devices, "bubblewrap is not installed (apt-get install bubblewrap)")
    if as_root and shutil.which("setpriv") is None:
        return Isolation("none", chosen, as_root, devices, "setpriv is not installed (apt-get install util-linux)")
    iso = Isolation("bwrap", chosen, as_root, devices)
    problem = _try(iso)
    return Isolation("none", chosen, as_root, devices, problem) if problem else iso


@functools.lru_cache(maxsize=1)
def probe() -> Isolation:
    """Decide once per process whether children can be isolated, by starting one empty sandbox."""
    chosen = policy()
    iso = _detect(chosen)
    if not iso.active:
        message = (
            f"candidate code runs WITHOUT OS isolation: {iso.problem}. It can write wherever this user "
            f"can (site-packages included) and see this process; set {SANDBOX_ENV}=require to refuse"
        )
        if chosen == "require":
            raise SandboxUnavailable(message.replace("; set", ". Unset") + f" (policy {SANDBOX_ENV}=require)")
        if chosen != "off":
            log.warning(message)
    return iso


def _try(iso: Isolation) -> str:
    """Start ``python -c pass`` in a sandbox around a throwaway scratch directory; '' when it works."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="warpforge-probe-") as tmp:
        scratch = Path(tmp)
        prepare_scratch(scratch, iso)
        cmd = bwrap_args(scratch, iso.gpu_devices, iso.as_root) + [sys.executable, "-I", "-c", "pass"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap failed to start ({exc})"
        if done.returncode != 0:
            return f"bubblewrap refused: {done.stderr.strip()[:300] or f'exit code {done.returncode}'}"
    return ""


# Installs each profile in a throwaway interpreter (the filter is irreversible) and tries what it must refuse.
_SECCOMP_PROBE = """
import ctypes, errno, os, platform, runpy, sys
table = runpy.run_path(sys.argv[1])
table["install"](sys.argv[2])
if sys.argv[2] == "strict":
    try:
        os.fork()
    except PermissionError:
        print("refused")
else:  # ptrace(PTRACE_TRACEME): denied with EPERM by both profiles
    libc = ctypes.CDLL(None, use_errno=True)
    nr = table["SYSCALLS"]["ptrace"][0 if platform.machine() == "x86_64" else 1]
    if libc.syscall(nr, 0, 0, 0, 0) == -1 and ctypes.get_errno() == errno.EPERM:
        print("refused")
"""


def probe_seccomp() -> dict[str, str]:
    """Each seccomp profile (child/seccomp.py) as it installs on this machine, found by installing it in a
    fresh interpreter and trying a call it denies (fork for ``strict``, ptrace for ``spawn``): ``"installs"`` or
    why not. The child installs the same filter before any candidate code, and fails closed without it."""
    from warpforge.evaluator.sandbox.child import seccomp

    found = {}
    for profile in seccomp.PROFILES:
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-c", _SECCOMP_PROBE, seccomp.__file__, profile],
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            found[profile] = f"the probe did not run ({exc})"
            continue
        tail = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        found[profile] = "installs" if done.stdout.strip() == "refused" else f"does not install: {tail[:200]}"
    return found


UNSAFE_FLAG = "--unsafe-run-unsandboxed"
HOW_TO_INSTALL = (
    "install bubblewrap (as root: apt-get install -y bubblewrap, which `make run` does where it can; "
    "elsewhere ask an administrator, see `warpforge doctor`)"
)


def require_for_untrusted(what: str, unsafe: bool) -> None:
    """Before code warpforge did not ship runs (``what``: "LLM-written candidates", "variant files"): the sandbox
    is required unless ``unsafe`` (the user's ``--unsafe-run-unsandboxed``). Raises SandboxUnavailable, one line
    saying how to install bubblewrap, when it cannot be set up. Sets the policy for this process and every
    worker it starts (the environment is inherited), so no later ChildPool falls back to running unisolated.
    """
    if unsafe:
        if policy() == "off":
            os.environ[SANDBOX_ENV] = "auto"  # the flag allows running unisolated; it does not ask for it
            probe.cache_clear()
        if policy() != "require" and not probe().active:
            log.warning("%s run WITHOUT OS isolation (%s): %s", what, UNSAFE_FLAG, probe().problem)
        return
    if policy() == "off":
        raise SandboxUnavailable(f"{what} never run unisolated: {SANDBOX_ENV}=off needs {UNSAFE_FLAG} as well")
    iso = _detect("require")
    if not iso.active:
        raise SandboxUnavailable(
            f"{what} run only in the bubblewrap sandbox, unavailable here ({iso.problem}): "
            f"{HOW_TO_INSTALL}, or pass {UNSAFE_FLAG} to run them without OS isolation"
        )
    os.environ[SANDBOX_ENV] = "require"
    probe.cache_clear()


def prepare_scratch(scratch: Path, iso: Isolation) -> None:
    """Hand the scratch directory (and only it) to the sandbox's user."""
    if iso.active and iso.as_root:
        os.chown(scratch, SANDBOX_UID, SANDBOX_GID)
        # Reachable through its (root-only, mkdtemp 0700) parent only by root: the sandbox sees it as
        # /tmp/scratch, and other sandboxes' users never see it at all.


def wrap(command: list[str], scratch: Path, iso: Isolation) -> list[str]:
    """``command`` as it should be started for one child (unchanged when there is no isolation)."""
    if not iso.active:
        return command
    return bwrap_args(scratch, iso.gpu_devices, iso.as_root) + command
