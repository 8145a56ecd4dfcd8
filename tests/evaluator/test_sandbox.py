"""The OS sandbox, the seccomp filter, the strict static rules and the judge's artefact checks.

The manifest fixtures (test_adversarial.py) prove each defence end to end; these tests pin the pieces:
what the seccomp profiles allow, what bubblewrap is started with, that the strict rules accept every
built-in template and refuse each forbidden construct, that case inputs are sent once and only after
import, and that a missing or altered artefact is a failure, never a pass.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from warpforge.evaluator.judge.judge import Judge, plan_cases
from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.stages import CaseFeed
from warpforge.evaluator.sandbox import isolation
from warpforge.evaluator.sandbox.child.seccomp import program
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.supervisor import ChildOutcome, ChildPool, child_env
from warpforge.evaluator.static.checks import check_source
from warpforge.kernels.task import load_task_file
from warpforge.kernels.variant import TEMPLATES_DIR, load_variant

ROOT = Path(__file__).parent / "adversarial"
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _run_python(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": SRC}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_running_releases_the_scratch_directory_however_the_block_ends(tmp_path: Path) -> None:
    """ChildPool.running: the with-block reads what the child left in its scratch; then it is removed, also when
    the block returns early or raises (the stages judge inside it and return from the middle)."""
    request = {"mode": "space", "candidate": "candidate.py", "space": {"B": [1, 2]}, "shapes": [{"N": 1}]}

    def write(scratch: Path) -> None:
        (scratch / "candidate.py").write_text("SPACE = {'B': [1, 2]}\n")

    def judged(pool: ChildPool) -> tuple[Path, bool]:
        with pool.running(request, child_env(interpret=True), 120, write) as outcome:
            return outcome.scratch, (outcome.scratch / "candidate.py").is_file()

    with ChildPool(tmp_path) as pool:
        scratch, seen = judged(pool)
        assert seen and not scratch.exists()
        with pytest.raises(RuntimeError, match="judging failed"):
            with pool.running(request, child_env(interpret=True), 120, write) as outcome:
                scratch = outcome.scratch
                raise RuntimeError("judging failed")
        assert scratch.is_relative_to(tmp_path) and not scratch.exists()


def test_strict_seccomp_allows_threads_and_refuses_processes_and_network() -> None:
    out = _run_python("""
        import os, socket, subprocess, threading
        from warpforge.evaluator.sandbox.child.seccomp import install
        install("strict")
        t = threading.Thread(target=lambda: print("thread ok")); t.start(); t.join()
        socket.socket(socket.AF_UNIX).close(); print("unix ok")
        for name, f in [("fork", os.fork), ("spawn", lambda: subprocess.run(["true"])),
                        ("inet", lambda: socket.socket(socket.AF_INET)),
                        ("exec", lambda: os.execv("/bin/true", ["true"]))]:
            try:
                f(); print(name, "ALLOWED")
            except PermissionError:
                print(name, "denied")
    """)
    assert out.split() == [
        "thread",
        "ok",
        "unix",
        "ok",
        "fork",
        "denied",
        "spawn",
        "denied",
        "inet",
        "denied",
        "exec",
        "denied",
    ]


def test_spawn_seccomp_allows_subprocesses_but_not_ptrace() -> None:
    out = _run_python("""
        import ctypes, subprocess
        from warpforge.evaluator.sandbox.child.seccomp import install
        install("spawn")
        print(subprocess.run(["echo", "child"], capture_output=True, text=True).stdout.strip())
        libc = ctypes.CDLL(None, use_errno=True)
        print(libc.syscall(101, 0, 0, 0, 0), ctypes.get_errno())  # ptrace(PTRACE_TRACEME)
    """)
    assert out.split() == ["child", "-1", "1"]  # EPERM


def test_seccomp_program_denies_the_listed_calls_on_both_architectures() -> None:
    for arch, fork_nr in (("x86_64", 57), ("aarch64", None)):
        strict, spawn = program("strict", arch), program("spawn", arch)
        ks_strict = {ins[3] for ins in strict if ins[0] == 0x15}
        ks_spawn = {ins[3] for ins in spawn if ins[0] == 0x15}
        assert (101 if arch == "x86_64" else 117) in ks_strict & ks_spawn  # ptrace everywhere
        execve = 59 if arch == "x86_64" else 221
        assert execve in ks_strict and execve not in ks_spawn
        if fork_nr:
            assert fork_nr in ks_strict and fork_nr not in ks_spawn
        assert len(strict) < 255  # classic BPF jump offsets are 8 bits


def test_bwrap_command_isolates_and_drops_privileges(tmp_path: Path) -> None:
    args = isolation.bwrap_args(tmp_path, ("/dev/nvidia0",), as_root=True)
    text = " ".join(args)
    for flag in (
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--ro-bind / /",
        "--proc /proc",
        f"--bind {tmp_path} {isolation.INSIDE_SCRATCH}",
        "--dev-bind /dev/nvidia0 /dev/nvidia0",
        f"--reuid={isolation.SANDBOX_UID}",
        "--no-new-privs",
        "--bounding-set=-all",
    ):
        assert flag in text, flag
    assert "--unshare-user" in isolation.bwrap_args(tmp_path, (), as_root=False)
    assert "/dev/nvidia0" not in " ".join(isolation.bwrap_args(tmp_path, (), as_root=True))


def test_require_policy_refuses_without_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    isolation.probe.cache_clear()
    monkeypatch.setenv(isolation.SANDBOX_ENV, "require")
    monkeypatch.setattr(isolation.shutil, "which", lambda name: None)
    try:
        with pytest.raises(isolation.SandboxUnavailable, match="bubblewrap"):
            isolation.probe()
        monkeypatch.setenv(isolation.SANDBOX_ENV, "auto")
        iso = isolation.probe.__wrapped__()
        assert not iso.active and "bubblewrap is not installed" in iso.summary()
    finally:
        isolation.probe.cache_clear()


def test_every_template_passes_the_strict_rules() -> None:
    templates = sorted(TEMPLATES_DIR.rglob("*.py"))
    assert len(templates) >= 10
    for path in templates:
        if path.name != "__init__.py":
            assert check_source(path.read_text()) is None, path


@pytest.mark.parametrize(
    "source, reason",
    [
        ("import os\n", "forbidden_import"),
        ("from torch import _C\n", "forbidden_import"),
        ("import torch\ndef launch(x):\n    return torch._C\n", "private_access"),
        ("def launch(x):\n    return x.__class__\n", "private_access"),
        ("def launch(x):\n    return getattr(x, 'mm')\n", "dynamic_access"),
        ("def launch(x):\n    return x.tolist()\n", "host_read"),
        ("def launch(x):\n    return x.to('cpu')\n", "host_read"),
        ("import torch\ndef launch(x):\n    return torch.utils\n", "torch_compute_call"),
        ("import triton\ndef launch(x):\n    return triton.runtime\n", "forbidden_import"),
        ("import triton\nimport torch\nF = torch.empty\n@triton.jit\ndef k(x):\n    F(x)\n", "jit_body_disallowed"),
        ("import triton\n@triton.jit\ndef k(x):\n    y = x.handle\n", "jit_body_disallowed"),
        ("import triton\n@triton.jit\ndef k(x):\n    import math\n", "jit_body_disallowed"),
        ("from os import fork\nfork()\n", "forbidden_import"),
    ],
)
def test_strict_rules_refuse(source: str, reason: str) -> None:
    finding = check_source(source)
    assert finding is not None and finding.reason == reason, finding


def test_core_rules_see_process_calls_at_module_level() -> None:
    finding = check_source("import os\nos.fork()\n", "core")
    assert finding is not None and finding.reason == "process_spawn"


def test_runtime_only_fixtures_are_also_refused_by_the_strict_rules() -> None:
    from warpforge.evaluator.run.adversarial import load_manifest

    runtime = [f for f in load_manifest(ROOT / "manifest.json") if f.runtime_only]
    assert len(runtime) >= 10
    for f in runtime:
        assert check_source((ROOT / f.variant).read_text()) is not None, f.name


@pytest.fixture(scope="module")
def double_job() -> Job:
    return Job(load_task_file(ROOT / "task_double.py"), load_variant(ROOT / "control_double.py"), {"BLOCK": 256})


def test_case_inputs_are_sent_after_import_and_once(double_job: Job) -> None:
    import random

    plan = plan_cases(double_job.task, [{"N": 8}], [torch.float32], 2, 0, random.Random(1))
    feed = CaseFeed(plan)
    assert feed({"mark": "need", "case": 0}) is None  # before the candidate is imported
    feed({"mark": "imported"})
    other = next(c.id for c in plan.cases if plan.pair is None or c.id != plan.pair.id)
    data = feed({"mark": "need", "case": other})
    assert data is not None
    assert torch.equal(torch.load(io.BytesIO(data))[0], plan.cases[other].inputs[0])
    assert feed({"mark": "need", "case": other}) is None  # each case once
    assert plan.pair is not None
    assert all(feed({"mark": "need", "case": plan.pair.id}) for _ in range(3))  # case, rerun, ghost
    assert feed({"mark": "need", "case": plan.pair.id}) is None
    assert len(feed.refused) == 3


def _judge_with(double_job: Job, tmp_path: Path, ghost: bool, tamper: bool) -> tuple[Verdict | None, str]:
    """A finished check of the honest formula on one case, with the ghost missing or a file altered."""
    import random

    plan = plan_cases(double_job.task, [{"N": 8}], [torch.float32], 1, 0, random.Random(2))
    case = plan.cases[0]
    x = case.inputs[0]

    def save(name: str, out: torch.Tensor) -> dict[str, object]:
        buffer = io.BytesIO()
        torch.save({"out": [out], "inputs_after": [x.clone()]}, buffer)
        (tmp_path / name).write_bytes(buffer.getvalue())
        return {"saved": name, "sha256": hashlib.sha256(buffer.getvalue()).hexdigest()}

    facts = {"kinds": ["Tensor"], "aliases": [False], "ops": [], "kernel_calls": 1, "threads": 0}
    report: dict[str, object] = {
        "cases": [{"id": case.id, **facts, **save(f"out_{case.id}.pt", x * 2 + 1)}],
        "rerun": {"case": case.id, **facts, **save("out_rerun.pt", x * 2 + 1)},
    }
    if ghost:
        report["ghost"] = {"case": case.id, **facts, **save("out_ghost.pt", torch.full_like(x, float("nan")))}
    if tamper:
        (tmp_path / f"out_{case.id}.pt").write_bytes(b"rewritten after the report")
    outcome = ChildOutcome("done", report, 0, "", 1.0, tmp_path)
    found = Judge(double_job, plan, outcome).judge()
    return (None, "") if found is None else (found.verdict, found.reason)


def test_judge_passes_a_complete_honest_report(double_job: Job, tmp_path: Path) -> None:
    assert _judge_with(double_job, tmp_path, ghost=True, tamper=False) == (None, "")


def test_a_missing_ghost_is_a_failure(double_job: Job, tmp_path: Path) -> None:
    assert _judge_with(double_job, tmp_path, ghost=False, tamper=False) == (Verdict.REJECTED, "missing_artefact")


def test_an_output_changed_after_its_hash_was_reported_is_rejected(double_job: Job, tmp_path: Path) -> None:
    assert _judge_with(double_job, tmp_path, ghost=True, tamper=True) == (Verdict.REJECTED, "output_tampered")


def test_budgets_grow_with_measured_load(monkeypatch: pytest.MonkeyPatch, double_job: Job) -> None:
    from warpforge.evaluator.run import stages

    monkeypatch.setattr(stages.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(stages.os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    assert stages.budget_s(double_job) == double_job.timeout_s  # idle: the job's own timeout
    monkeypatch.setattr(stages.os, "getloadavg", lambda: (6.0, 5.0, 4.0))
    assert stages.budget_s(double_job) == pytest.approx(3 * double_job.timeout_s)  # 3 runnable per CPU
    monkeypatch.setattr(stages.os, "getloadavg", lambda: (40.0, 40.0, 40.0))
    assert stages.budget_s(double_job, 4) == pytest.approx(16 * double_job.timeout_s)  # capped at 4x


def test_a_timeout_names_its_budget_and_how_to_raise_it(double_job: Job, tmp_path: Path) -> None:
    from warpforge.evaluator.run.stages import child_failure

    outcome = ChildOutcome("timeout", None, None, "", 240.0, tmp_path, limit_s=240.0)
    found = child_failure(double_job, outcome, "correctness check")
    assert found is not None and found.verdict is Verdict.TIMEOUT
    assert "240 s" in found.message and "load factor 2" in found.message and "--timeout" in found.message


def test_roots_under_tmp_stay_visible_and_enterable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A checkout or venv under /tmp (a CI clone) vanished under the sandbox's private /tmp, and bwrap made
    # the missing parents 0700, so uid 65534 could not import warpforge ("No module named 'warpforge'").
    root = Path("/tmp/ci-clone/src")
    monkeypatch.setattr(isolation, "_needed_roots", lambda: [Path("/usr"), root])
    args = isolation.bwrap_args(tmp_path, [], as_root=True)
    tmpfs = args.index("/tmp", args.index("--tmpfs", args.index("1777")))
    after = args[tmpfs:]
    assert ["--perms", "0755", "--dir", "/tmp/ci-clone"] == after[after.index("--perms") : after.index("--perms") + 4]
    assert after[after.index("--ro-bind") : after.index("--ro-bind") + 3] == ["--ro-bind", str(root), str(root)]
    assert "/usr" not in after  # only roots under /tmp are bound again
