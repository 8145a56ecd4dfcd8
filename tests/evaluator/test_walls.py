"""The evaluator's walls (issue 26): bounded read-back, no keys in reach, no orphans, no unisolated LLM code.

The manifest fixtures (io_*, env_read, spin_forever) prove each verdict end to end in test_adversarial.py;
these tests pin what a verdict cannot show: the orchestrator's own memory, environment and processes.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from warpforge.evaluator.sandbox.readback import NotReadable, read_regular, tail_bytes, tail_text

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "evaluator" / "adversarial"


# --- bounded read-back ---------------------------------------------------------------------------------------


def test_tail_reads_only_the_end_of_a_large_file(tmp_path: Path) -> None:
    big = tmp_path / "stderr.txt"
    with open(big, "wb") as f:
        f.truncate(4 << 30)  # 4 GiB, sparse: reading it whole would cost 4 GiB
        f.seek((4 << 30) - 3)
        f.write(b"end")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert tail_bytes(big, 2000).endswith(b"end") and len(tail_bytes(big, 2000)) == 2000
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 << 10  # KiB: far below 4 GiB


def test_symlinks_fifos_devices_and_hard_links_are_refused_unread(tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to("/proc/self/environ")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "a").write_bytes(b"x")
    os.link(tmp_path / "a", tmp_path / "b")
    dev = tmp_path / "dev"
    dev.symlink_to("/dev/zero")
    for path, why in (
        (link, "symbolic link"),
        (fifo, "not a regular file"),
        (tmp_path / "b", "2 links"),
        (dev, "symbolic link"),
    ):
        with pytest.raises(NotReadable, match=why):
            read_regular(path, 1 << 20)  # a FIFO would block forever in a plain open(): O_NONBLOCK
        assert tail_text(path).startswith(f"[{path.name} is ") and "refused" in tail_text(path)
    assert tail_text(tmp_path / "missing") == ""


def test_read_regular_caps_the_size(tmp_path: Path) -> None:
    path = tmp_path / "out_0.pt"
    path.write_bytes(b"y" * 1000)
    assert read_regular(path, 1000) == b"y" * 1000
    with pytest.raises(NotReadable, match="cap"):
        read_regular(path, 999)


@pytest.mark.slow
def test_orchestrator_peak_memory_stays_bounded_under_floods() -> None:
    """Each fixture in a fresh orchestrator process; its own VmHWM against the honest control's (~2 min).

    The old read-back held every mark and the whole stderr file: 256 MiB floods added hundreds of MiB.
    """
    sys.path.insert(0, str(REPO / "benchmarks"))
    from orchestrator_memory import BOUND_MIB, measure, table

    rows = measure(("control_double", "io_stderr_flood", "io_marks_flood", "io_report_flood"), mib=256)
    print(table(rows))
    base = int(str(rows[0]["vmhwm_kib"]))
    assert rows[0]["verdict"] == "ok"
    for row in rows[1:]:
        assert int(str(row["vmhwm_kib"])) - base <= BOUND_MIB * 1024, row
    assert [r["reason"] for r in rows[2:]] == ["output_flood", "output_flood"]


# --- no orphans ----------------------------------------------------------------------------------------------

BOOT_MARK = "from warpforge.evaluator.sandbox.child.__main__ import main"


def _candidates(root: str) -> dict[int, float]:
    """Processes of this checkout's candidate children (bwrap or python), with their CPU seconds so far."""
    found = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if stat[0] == "Z":
            continue
        if (BOOT_MARK in cmdline and root in cmdline) or (cmdline.startswith("bwrap") and root in cmdline):
            found[int(entry)] = (int(stat[11]) + int(stat[12])) / tick
    return found


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` in the process tree (read from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from warpforge.cli import main; main()", *args]


@pytest.mark.slow  # ~15-50 s on 2 cores: the slow tier (`make test-slow`)
def test_sigkill_of_the_orchestrator_leaves_no_candidate_running(tmp_path: Path) -> None:
    """``warpforge eval`` of a kernel that never returns (kernel_hang), SIGKILLed once a candidate has spun for
    10 CPU seconds (its imports cost ~3): every candidate process (the spinning one and the warm spares) must
    disappear, not spin on for the whole 600 s timeout."""
    src_root = str(REPO / "src")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    extra = [] if shutil.which("bwrap") else ["--unsafe-run-unsandboxed"]
    cli = subprocess.Popen(
        _cli(
            "eval",
            str(FIXTURES / "task_double.py"),
            str(FIXTURES / "kernel_hang.py"),
            "--backend",
            "interpret",
            "--timeout",
            "600",
            *extra,
        ),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # Only this CLI's own candidates count: the other xdist worker may be running candidates of this checkout
    # at the same moment. Its tree is collected while it lives (a SIGKILLed parent's children are reparented).
    ours: set[int] = set()
    try:
        deadline = time.monotonic() + 300  # generous: a wait, not a timing assertion
        spinning = False
        while time.monotonic() < deadline and cli.poll() is None and not spinning:
            time.sleep(0.5)
            ours |= _descendants(cli.pid)
            spinning = any(cpu >= 10 for pid, cpu in _candidates(src_root).items() if pid in ours)
        assert spinning, "no candidate ever spun (the CLI ended or the wait ran out)"
        ours |= _descendants(cli.pid)
        assert ours & set(_candidates(src_root)), "the CLI's candidates were not found in its process tree"
        cli.send_signal(signal.SIGKILL)
        cli.wait()
        deadline = time.monotonic() + 60
        left = set(_candidates(src_root)) & ours
        while left and time.monotonic() < deadline:
            time.sleep(0.5)
            left = set(_candidates(src_root)) & ours
        assert not left, f"candidate processes outlived the orchestrator: {sorted(left)}"
    finally:
        if cli.poll() is None:
            cli.kill()


def test_the_cpu_time_backstop_reaches_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """RLIMIT_CPU from the request (sandbox.cpu_backstop_s): at 1 s, spin_forever (which spins at import) is
    killed by the kernel long before its 120 s deadline; at the default, the honest control finishes."""
    from warpforge.evaluator.run.stages import space_stage
    from warpforge.evaluator.sandbox import supervisor as sandbox
    from warpforge.evaluator.sandbox.job import Job
    from warpforge.kernels.task import load_task_file
    from warpforge.kernels.variant import load_variant

    assert sandbox.cpu_backstop_s(100.0) >= 100 * (os.cpu_count() or 1)
    task = load_task_file(FIXTURES / "task_double.py")
    control = Job(task, load_variant(FIXTURES / "control_double.py"), {})
    spin = Job(task, load_variant(FIXTURES / "spin_forever.py"), {}, static_rules="core")  # a run-time layer
    with sandbox.ChildPool() as pool:
        failure, _ = space_stage(pool, control)
        assert failure is None  # the default backstop lets it finish
        monkeypatch.setattr(sandbox, "cpu_backstop_s", lambda timeout_s: 1)
        failure, _ = space_stage(pool, spin)
    assert failure is not None and (failure.verdict.value, failure.reason) == ("crashed", "process_died"), failure


# --- no keys in reach ----------------------------------------------------------------------------------------

_EVAL_ENV_READ = """
import json, sys
from pathlib import Path
from warpforge.evaluator.run.adversarial import fixture_job, load_manifest
from warpforge.evaluator.run.backend import get_backend
root = Path(sys.argv[1])
fixture = next(f for f in load_manifest(root / "manifest.json") if f.name == "env_read")
backend = get_backend("interpret")
try:
    result = backend.evaluate(fixture_job(fixture, root, "interpret"))
finally:
    backend.close()
print(json.dumps(result.model_dump(mode="json")))
"""


@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_a_candidate_reading_every_environment_finds_no_key(sandbox: str) -> None:
    """env_read prints /proc/self/environ and /proc/<ppid>/environ (keys last) and dies; the stored result
    must not contain the orchestrator's key. With the sandbox off its parent is the orchestrator itself: the key
    must be gone from the orchestrator's environment block, not only from os.environ (warpforge.keys)."""
    secret = "sk-walls-test-" + os.urandom(8).hex()
    env = {**os.environ, "OPENAI_API_KEY": secret, "HF_TOKEN": secret + "-hf", "WARPFORGE_SANDBOX": sandbox}
    done = subprocess.run(
        [sys.executable, "-c", _EVAL_ENV_READ, str(FIXTURES)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    stored = done.stdout.strip().splitlines()[-1]
    result = json.loads(stored)
    assert (result["verdict"], result["reason"]) == ("crashed", "process_died"), result
    assert "environ" in result["message"]  # the attack ran and its output was quoted
    assert secret not in stored and secret not in done.stderr


def test_the_child_environment_is_an_allowlist(monkeypatch: pytest.MonkeyPatch) -> None:
    from warpforge.evaluator.sandbox.supervisor import child_env

    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-children")
    monkeypatch.setenv("SOME_RANDOM_SETTING", "x")
    env = child_env(interpret=True)
    assert "OPENAI_API_KEY" not in env and "SOME_RANDOM_SETTING" not in env
    assert set(env) <= {
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
        "PYTHONUNBUFFERED",
        "TRITON_INTERPRET",
        "TRITON_DEFAULT_FP_FUSION",
        "WARPFORGE_CHILD_AS_BYTES",
    }


def test_llm_config_holds_the_key_out_of_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from warpforge import keys
    from warpforge.agent.config import load_llm_config

    monkeypatch.setenv("WARPFORGE_LLM_MODEL", "gpt-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-config-test-123456")
    config = load_llm_config()
    assert "OPENAI_API_KEY" not in os.environ
    assert config.models[0].api_key() == "sk-config-test-123456" == keys.get("OPENAI_API_KEY")
    assert load_llm_config().models[0].model == "gpt-test"  # a second read still finds the held key
    keys._HELD.pop("OPENAI_API_KEY", None)


# --- never unisolated for code warpforge did not ship --------------------------------------------------------


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch):
    """This process as on a machine without bubblewrap (CI installs it; a fresh laptop may not have it)."""
    import shutil as real_shutil

    from warpforge.evaluator.sandbox import isolation

    real_which = real_shutil.which
    monkeypatch.setattr(isolation.shutil, "which", lambda name: None if name == "bwrap" else real_which(name))
    monkeypatch.delenv(isolation.SANDBOX_ENV, raising=False)
    monkeypatch.delenv("WARPFORGE_UNSAFE_RUN_UNSANDBOXED", raising=False)  # tests/conftest.py sets it without bwrap
    isolation.probe.cache_clear()
    yield
    isolation.probe.cache_clear()


@pytest.mark.parametrize(
    "args",
    [
        ["eval", str(FIXTURES / "task_double.py"), str(FIXTURES / "control_double.py"), "--backend", "interpret"],
        ["run", "softmax", "--proposer", "llm", "--llm-replay", "nothing", "--trials", "1", "--backend", "interpret"],
        ["run", "softmax", "--variant-file", str(FIXTURES / "control_softmax_online.py"), "--trials", "1"],
    ],
)
def test_untrusted_code_without_bwrap_is_one_line_exit_2(
    no_bwrap, args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from warpforge.cli import app

    monkeypatch.setenv("WARPFORGE_DB", f"sqlite:///{tmp_path / 'wf.db'}")
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 2, out.output
    lines = [ln for ln in out.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "apt-get install -y bubblewrap" in lines[0] and "--unsafe-run-unsandboxed" in lines[0]
    assert "Traceback" not in out.output


def test_the_explicit_flag_runs_unisolated_with_a_warning(no_bwrap, caplog: pytest.LogCaptureFixture) -> None:
    from warpforge.evaluator.sandbox import isolation

    isolation.require_for_untrusted("variant files", unsafe=True)
    assert not isolation.probe().active and isolation.policy() == "auto"
    assert "WITHOUT OS isolation" in caplog.text


def test_shipped_templates_still_run_without_bwrap(no_bwrap) -> None:
    from warpforge.evaluator.sandbox import isolation

    assert isolation.probe().kind == "none"  # auto: a warning, no refusal


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (CI installs it)")
def test_untrusted_code_with_bwrap_sets_require(monkeypatch: pytest.MonkeyPatch) -> None:
    from warpforge.evaluator.sandbox import isolation

    monkeypatch.delenv(isolation.SANDBOX_ENV, raising=False)
    isolation.require_for_untrusted("LLM-written candidates", unsafe=False)
    assert os.environ[isolation.SANDBOX_ENV] == "require" and isolation.probe().active
    isolation.probe.cache_clear()


def test_doctor_says_how_to_install_bubblewrap(no_bwrap) -> None:
    from warpforge.doctor import _sandbox

    check = _sandbox()
    assert not check.ok and "apt-get install bubblewrap" in check.detail and "--unsafe-run-unsandboxed" in check.detail


def test_setup_sandbox_never_fails_the_run() -> None:
    done = subprocess.run([str(REPO / "scripts" / "setup_sandbox.sh")], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("sandbox:") or done.stdout == ""
