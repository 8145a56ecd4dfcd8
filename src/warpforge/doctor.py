"""``warpforge doctor``: what this installation can and cannot do, each with a next step.

It only looks: the database is opened with ``create=False`` (a missing default file is reported as "none
yet", never created) and is not migrated. Without a GPU it says what a CPU machine does get (correctness,
compile facts, the planner, search on recorded spaces) and points to ``--backend replay`` only when
recordings for some task are installed (none ship with warpforge).

Example::

    >>> [c.name for c in run_checks("sqlite:///wf.db")]  # doctest: +SKIP
    ['versions', 'gpu', 'replay recordings', 'triton interpreter', 'aot compile', 'database', 'without a GPU']
"""

from __future__ import annotations

import platform
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    required: bool = True
    advice: bool = False  # a "what to run" row rather than a check


def _versions() -> Check:
    import torch
    import triton

    import warpforge

    return Check(
        "versions",
        True,
        f"python {platform.python_version()}, torch {torch.__version__}, "
        f"triton {triton.__version__}, warpforge {warpforge.__version__}",
    )


def recorded_tasks() -> list[str]:
    """Tasks with recorded GPU times for ``--backend replay`` (none ship with warpforge itself)."""
    from warpforge.evaluator.run.recordings import has_recordings
    from warpforge.kernels.task import builtin_task_names

    return [t for t in builtin_task_names() if has_recordings(t)]


def _gpu(recorded: list[str]) -> Check:
    import torch

    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        return Check("gpu", True, f"{name} (backend cuda: live timings)", required=False)
    replay = (
        f"recorded GPU times exist for {', '.join(recorded)} (--backend replay ranks those)"
        if recorded
        else "no recorded GPU times are installed, so nothing can be ranked here"
    )
    return Check(
        "gpu",
        False,
        "no CUDA GPU: warpforge run checks correctness in the Triton interpreter and "
        f"compiles for sm_90 (registers, spills, shared memory), but times nothing; {replay}",
        required=False,
    )


def _recordings(recorded: list[str]) -> Check:
    from warpforge.evaluator.run.recordings import recordings_root

    if recorded:
        return Check("replay recordings", True, f"{', '.join(recorded)} under {recordings_root()}", required=False)
    return Check(
        "replay recordings",
        False,
        f"none under {recordings_root()}: --backend replay has nothing to "
        "replay; record on a GPU with benchmarks/record_spaces.py (or set WARPFORGE_RECORDINGS)",
        required=False,
    )


def _cpu_plan(has_gpu: bool) -> Check:
    """What this machine is good for, as commands (docs/design.md §5: everything but GPU timing runs on a CPU)."""
    if has_gpu:
        return Check(
            "what to run",
            True,
            "warpforge run softmax --trials 20 (live timings on this GPU)",
            required=False,
            advice=True,
        )
    return Check(
        "what to run",
        True,
        "\n".join(
            (
                "warpforge eval TASK FILE.py: one variant's correctness and compile facts",
                "warpforge run TASK: the same over its SPACE (checked and compiled, not timed)",
                "warpforge plan search --model M --cluster C: the parallelism planner, fully",
                "warpforge bench-search $(warpforge spaces --paths): search strategies on the recorded GPU spaces "
                "that ship "
                "(warpforge spaces lists them)",
            )
        ),
        required=False,
        advice=True,
    )


def _interpreter() -> Check:
    """Run a tiny kernel in the interpreter, in a child, as the evaluator does."""
    code = (
        "import torch, triton, triton.language as tl\n"
        "@triton.jit\n"
        "def k(x, y, n, B: tl.constexpr):\n"
        "    o = tl.arange(0, B); m = o < n\n"
        "    tl.store(y + o, tl.load(x + o, mask=m) * 2, mask=m)\n"
        "x = torch.arange(5.0); y = torch.empty(5); k[(1,)](x, y, 5, B=8); assert torch.equal(y, x * 2)\n"
    )
    import os

    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    ok = proc.returncode == 0
    return Check("triton interpreter", ok, "runs kernels on the CPU" if ok else proc.stderr.strip()[-300:])


def _aot() -> Check:
    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if tool.exists():
        return Check("aot compile", True, "triton.compile for sm_90 with cuobjdump resource reports")
    return Check("aot compile", False, f"{tool} missing: register/spill reports unavailable", required=False)


def _database(url: str | None) -> Check:
    """Open the database without creating or migrating it: doctor only looks."""
    from warpforge.db.session import Database, DatabaseError, DatabaseURLError

    try:
        db = Database(url, create=False)
    except DatabaseURLError as exc:
        from warpforge.db.session import default_url, sqlite_file

        path = sqlite_file(url or default_url())
        if path is not None and not path.exists():  # not an error when the first run can create it
            parent = next((p for p in path.parents if p.exists()), None)
            if parent is not None and not parent.is_dir():
                return Check(
                    "database",
                    False,
                    f"no database at {path}, and none can be created there: {parent} "
                    "is a file, not a directory; pass another --db",
                )
            return Check(
                "database", True, f"none yet at {path}: the first warpforge run (or warpforge db upgrade) creates it"
            )
        return Check("database", False, str(exc))
    try:
        db.check()
        revision, head = db.current_revision(), _head_revision()
    except DatabaseError as exc:
        return Check("database", False, str(exc))
    if revision == head:
        return Check("database", True, f"{db.safe_url} at revision {revision}")
    return Check(
        "database",
        True,
        f"{db.safe_url} at revision {revision or 'none (empty)'}; the next run migrates "
        f"it to {head} (or: warpforge db upgrade)",
    )


def _head_revision() -> str | None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from warpforge.db.session import MIGRATIONS_DIR

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return ScriptDirectory.from_config(cfg).get_current_head()


def _sandbox() -> Check:
    """Which OS isolation candidate children get (evaluator/sandbox/isolation.py); required under
    WARPFORGE_SANDBOX=require."""
    from warpforge.evaluator.sandbox.isolation import SandboxUnavailable, policy, probe

    try:
        iso = probe()
    except SandboxUnavailable as exc:
        return Check("sandbox", False, str(exc))
    detail = (
        f"{iso.summary()} (WARPFORGE_SANDBOX={iso.policy})"
        if iso.active
        else (
            f"{iso.summary()}: install bubblewrap (Debian/Ubuntu: sudo apt-get install bubblewrap; Fedora: sudo dnf "
            "install bubblewrap; `make run` does it as root). Until then shipped templates run unisolated with a "
            "warning, and LLM-written or user-supplied candidates are refused unless --unsafe-run-unsandboxed"
        )
    )
    return Check("sandbox", iso.active, detail, required=policy() == "require")


def _seccomp() -> Check:
    """Whether the child's seccomp filters install here, found by installing each (isolation.probe_seccomp):
    without one every evaluation ends ``crashed: wall_not_installed``, so it is required."""
    from warpforge.evaluator.sandbox.isolation import probe_seccomp

    found = probe_seccomp()
    ok = all(v == "installs" for v in found.values())
    detail = "; ".join(f"{profile}: {state}" for profile, state in found.items())
    return Check(
        "seccomp",
        ok,
        detail
        + (
            ""
            if ok
            else " (every evaluation ends crashed: wall_not_installed until "
            "it installs: a Linux kernel with seccomp filters, x86_64 or "
            "aarch64)"
        ),
    )


def run_checks(db_url: str | None = None) -> list[Check]:
    import torch

    recorded = recorded_tasks()
    has_gpu = bool(torch.cuda.is_available())
    return [
        _versions(),
        _gpu(recorded),
        _recordings(recorded),
        _interpreter(),
        _aot(),
        _sandbox(),
        _seccomp(),
        _database(db_url),
        _cpu_plan(has_gpu),
    ]
