"""A seccomp filter the child installs on itself, on every thread, before the candidate is imported.

Written as a small classic-BPF program (no libseccomp: nothing to install, and the whole policy is the
table below). Denied calls fail with ``EPERM`` (the candidate sees a clear ``PermissionError``), except
``clone3``, which fails with ``ENOSYS`` so that glibc falls back to ``clone`` for new threads, where
the flags can be inspected. A foreign architecture or the x32 ABI kills the process.

Profiles:

- ``strict`` (interpreter checks, constraint enumeration): also no ``fork``/``vfork``/``execve``, and
  ``clone`` only with ``CLONE_THREAD`` (threads yes, processes no);
- ``spawn`` (ahead-of-time compile, GPU modes): Triton runs ``ptxas``, ``cuobjdump`` and the C
  compiler for its launcher as subprocesses, so process creation stays allowed there; those processes
  still live in the sandbox's PID namespace and die with it.

Both deny: ``ptrace``, ``process_vm_readv``/``writev``, sockets other than ``AF_UNIX``, ``mount``,
``umount2``, ``pivot_root``, ``chroot``, ``unshare``, ``setns``, ``bpf``, ``perf_event_open``,
``userfaultfd``, the key-ring calls and module loading.

Example::

    >>> from warpforge.evaluator.sandbox.child.seccomp import install
    >>> install("strict")      # doctest: +SKIP  (irreversible for this process)
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import platform
import struct

# (x86_64, aarch64) syscall numbers; None where the call does not exist on that architecture.
SYSCALLS: dict[str, tuple[int | None, int | None]] = {
    "fork": (57, None),
    "vfork": (58, None),
    "execve": (59, 221),
    "execveat": (322, 281),
    "clone": (56, 220),
    "clone3": (435, 435),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "socket": (41, 198),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "unshare": (272, 97),
    "setns": (308, 268),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "kexec_load": (246, 104),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsmount": (432, 432),
}
ALWAYS_DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "init_module",
    "finit_module",
    "kexec_load",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsmount",
)
SPAWN_CALLS = ("fork", "vfork", "execve", "execveat")
PROFILES = ("strict", "spawn")

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
CLONE_THREAD = 0x00010000
AF_UNIX = 1
# BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW, RET_ERRNO, RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
OFF_NR, OFF_ARCH, OFF_ARG0 = 0, 4, 16  # struct seccomp_data (args[0]'s low word on little-endian)
PR_SET_NO_NEW_PRIVS, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 38, 1, 1
SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}


class SeccompError(RuntimeError):
    """The filter could not be installed (unsupported architecture, or the kernel refused it)."""


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return (code, jt, jf, k)


def program(profile: str, arch: str | None = None) -> list[tuple[int, int, int, int]]:
    """The BPF instructions (code, jt, jf, k) of a profile for ``arch`` (default: this machine's)."""
    arch = arch or platform.machine()
    if arch not in AUDIT_ARCH:
        raise SeccompError(f"no seccomp table for {arch}: only x86_64 and aarch64 are supported")
    if profile not in PROFILES:
        raise SeccompError(f"unknown seccomp profile {profile!r}: choose from {PROFILES}")
    col = 0 if arch == "x86_64" else 1
    eperm = RET_ERRNO | errno.EPERM

    def nr(name: str) -> int | None:
        return SYSCALLS[name][col]

    prog = [
        _ins(LD_W_ABS, OFF_ARCH),
        _ins(JEQ_K, AUDIT_ARCH[arch], 1, 0),
        _ins(RET_K, RET_KILL_PROCESS),
        _ins(LD_W_ABS, OFF_NR),
    ]
    if arch == "x86_64":  # the x32 ABI sets bit 30 of the number: same kernel entry, other numbers
        prog += [_ins(JGE_K, 0x40000000, 0, 1), _ins(RET_K, RET_KILL_PROCESS)]
    denied = list(ALWAYS_DENIED) + (list(SPAWN_CALLS) if profile == "strict" else [])
    for name in denied:
        number = nr(name)
        if number is not None:
            prog += [_ins(JEQ_K, number, 0, 1), _ins(RET_K, eperm)]
    clone3 = nr("clone3")
    assert clone3 is not None
    prog += [_ins(JEQ_K, clone3, 0, 1), _ins(RET_K, RET_ERRNO | errno.ENOSYS)]
    socket = nr("socket")
    assert socket is not None
    # socket(domain, ...): AF_UNIX only (the network namespace has no route out anyway).
    prog += [
        _ins(JEQ_K, socket, 0, 4),
        _ins(LD_W_ABS, OFF_ARG0),
        _ins(JEQ_K, AF_UNIX, 0, 1),
        _ins(RET_K, RET_ALLOW),
        _ins(RET_K, eperm),
    ]
    if profile == "strict":
        clone = nr("clone")
        assert clone is not None
        # clone(flags, ...): a thread (CLONE_THREAD) yes, a process no.
        prog += [
            _ins(JEQ_K, clone, 0, 4),
            _ins(LD_W_ABS, OFF_ARG0),
            _ins(JSET_K, CLONE_THREAD, 0, 1),
            _ins(RET_K, RET_ALLOW),
            _ins(RET_K, eperm),
        ]
    prog.append(_ins(RET_K, RET_ALLOW))
    return prog


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(profile: str) -> None:
    """Install ``profile`` on every thread of this process (TSYNC); irreversible."""
    arch = platform.machine()
    prog = program(profile, arch)
    blob = b"".join(struct.pack("=HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(blob, len(blob))
    fprog = _SockFprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SeccompError(f"prctl(NO_NEW_PRIVS) failed: errno {ctypes.get_errno()}")
    rc = libc.syscall(SYS_SECCOMP[arch], SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(fprog))
    if rc != 0:
        raise SeccompError(f"seccomp(SET_MODE_FILTER, TSYNC) failed: returned {rc}, errno {ctypes.get_errno()}")
