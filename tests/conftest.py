"""Test-wide set-up: the Triton interpreter on machines without a GPU, and the `gpu` marker."""

from __future__ import annotations

import os
import shutil

# TRITON_INTERPRET must be set before Triton is first imported; without a GPU driver the only way to
# run a @triton.jit kernel is the interpreter (docs/design.md §5).
HAS_NVIDIA = shutil.which("nvidia-smi") is not None
if not HAS_NVIDIA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

# Without bubblewrap, the CLI refuses to run code warpforge did not ship (variant files, an LLM's) unless told
# --unsafe-run-unsandboxed (issue 26); the suite runs such files through the CLI on purpose, so a machine
# without bwrap says so once here (CI installs bubblewrap and runs them sandboxed). test_walls.py unsets it.
if shutil.which("bwrap") is None:
    os.environ.setdefault("WARPFORGE_UNSAFE_RUN_UNSANDBOXED", "1")
# Tests set their own terminal width Rich reads COLUMNS once, when a module-level Console is built
# at import, else asks the terminal; so a test's output used to depend on the window pytest ran in (a transcript
# test failed under COLUMNS=80). 80 is the narrowest width we promise, and every child process inherits it.
os.environ["COLUMNS"] = "80"
os.environ.pop("LINES", None)
from collections.abc import Callable, Iterator, Sequence  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from warpforge.agent.scripted import Reply, ScriptedServer  # noqa: E402


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except (ImportError, RuntimeError):  # no torch, or a CUDA build without its driver
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Tests of several minutes first: with two workers, one such test started last would run alone at the end
    # of its tier (the two optimize end-to-end tests take ~4.5 min each on 2 cores).
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run with -m gpu on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# --- databases -------------------------------------------------------------------------------------
import glob  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(cmd: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root (docs/design.md §8): drop to the postgres user when we are root.
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL server on 127.0.0.1 (trust auth, private socket dir), stopped afterwards."""
    if os.environ.get("WARPFORGE_TEST_PG_URL"):
        yield os.environ["WARPFORGE_TEST_PG_URL"]
        return
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not bins:
        msg = "PostgreSQL server binaries not found (apt-get install postgresql-15)"
        if os.environ.get("WARPFORGE_REQUIRE_POSTGRES"):
            pytest.fail(msg)
        pytest.skip(msg)
    bindir = Path(bins[-1]).parent
    root = Path(tempfile.mkdtemp(prefix="wf-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
    port = _free_port()
    subprocess.run(
        _as_postgres([str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]),
        check=True,
        capture_output=True,
    )
    opts = f"-k {sock} -c listen_addresses=127.0.0.1 -p {port} -c fsync=off"
    subprocess.run(
        _as_postgres([str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-w", "-l", str(root / "log.txt"), "start"]),
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            _as_postgres([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]), capture_output=True
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def fresh_postgres(postgres_url: str) -> Iterator[str]:
    """A new empty database on the session's server for one test."""
    import uuid

    from sqlalchemy import create_engine, text

    name = f"wf_{uuid.uuid4().hex[:10]}"
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    url = postgres_url.rsplit("/", 1)[0] + f"/{name}"
    yield url
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each database test runs on SQLite and on a real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'wf.db'}"
    return str(request.getfixturevalue("fresh_postgres"))


# Agent tests (kernel and plan agents): a scripted OpenAI-compatible server on 127.0.0.1 (real HTTP, real client).
@pytest.fixture
def scripted() -> Iterator[Callable[..., ScriptedServer]]:
    """``scripted([Reply(...), ...])`` starts a server answering in that order; stopped after the test."""
    servers: list[ScriptedServer] = []

    def start(script: Sequence[Reply], default: Reply | None = None) -> ScriptedServer:
        server = ScriptedServer(script, default).start()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.stop()


# KernelBench problems: the full set in ../shared where the team's layout has it, else the copies that ship.
SHARED_KERNELBENCH = Path(__file__).resolve().parents[2] / "shared" / "kernelbench"


@pytest.fixture
def kernelbench_file() -> Callable[[int, str], Path]:
    """``kernelbench_file(1, "42_Max_Pooling_2D")``: that problem's file from ../shared/kernelbench, else the
    shipped copy (warpforge/data/problems, the same bytes); the test skips, saying so, when neither has it."""
    from warpforge.problems import SHIPPED

    def find(level: int, name: str) -> Path:
        for root in (SHARED_KERNELBENCH, SHIPPED):
            path = root / f"level{level}" / f"{name}.py"
            if path.is_file():
                return path
        pytest.skip(
            f"KernelBench level {level} {name} not found at {SHARED_KERNELBENCH} (../shared/kernelbench) "
            "and not shipped"
        )

    return find


# warpforge optimize's report as stored for the dashboard (tests/db/test_optimize_runs.py, tests/dashboard/):
# a training step of a small transformers model with two patched regions, one region named with markup.
SCRIPT_REGION = '<script>alert("region")</script>'


@pytest.fixture
def optimize_report() -> Any:
    from warpforge.optimize.plans import PlanRow, PlanSection
    from warpforge.optimize.report import Checks, OptimizeReport, RegionRow, SpeedupEstimate
    from warpforge.parallel.specs import ModelSpec

    regions = [
        RegionRow(
            name="model.layers.0.input_layernorm",
            kind="rmsnorm",
            share=0.1234,
            task="rmsnorm (M=128,N=64)",
            status="patched",
            patched=True,
            estimated_us=12.5,
            fused_us=4.1,
        ),
        RegionRow(
            name="model.layers.0.mlp.act_fn",
            kind="swiglu",
            share=0.0811,
            task="swiglu (M=128,N=256)",
            status="patched (backward: torch autograd of the task's reference)",
            patched=True,
            estimated_us=8.2,
            fused_us=3.0,
        ),
        RegionRow(
            name=SCRIPT_REGION,
            kind="attention",
            share=0.2,
            task=None,
            status="no task: the LLM proposer can take its problem (--proposer llm)",
            patched=False,
            estimated_us=20.3,
        ),
        RegionRow(
            name="rest",
            kind="loose",
            share=0.5955,
            task=None,
            status="no task: loose tensor ops of its module",
            patched=False,
            estimated_us=60.1,
        ),
    ]
    checks = Checks(
        max_abs_diff=0.000977,
        output_tolerance=0.01,
        outputs_match=True,
        losses_before=[10.37, 10.21, 10.02],
        losses_after=[10.37, 10.21, 10.03],
        loss_tolerance=0.05,
        losses_match=True,
        grad_max_rel_diff=0.0042,
        grad_tolerance=0.02,
        grads_match=True,
        kernel_calls={"model.layers.0.input_layernorm": 6, "model.layers.0.mlp.act_fn": 3},
        fallback={},
        interpreted=True,
    )
    spec = ModelSpec(name="qwen3-tiny", layers=2, hidden=64, heads=4, vocab=1000, seq=64, activation="swiglu")
    plans = PlanSection(
        model=spec,
        cluster="dgx-h100",
        nodes=1,
        gpus=8,
        global_batch=64,
        plans=[
            PlanRow(
                rank=1,
                plan="tp1 pp1 dp8 mb2",
                tokens_per_s=1.25e6,
                step_time_s=0.0131,
                mfu=0.41,
                peak_mem_gb=3.2,
                hbm_gb=80.0,
                fits="yes",
            )
        ],
    )
    return OptimizeReport(
        target="./qwen3-tiny",
        kind="transformers",
        train=True,
        dtype="float16",
        batch=2,
        seq=64,
        gpu="H100 SXM",
        regions=regions,
        coverage=0.4062,
        checks=checks,
        speedup=SpeedupEstimate(
            estimated=1.1873,
            basis="speed of light on H100 SXM per op of the eager step; an estimate, not a time",
            before_us=101.1,
            after_us=85.15,
            ceiling=1.3021,
        ),
        campaigns={"rmsnorm": "optimize-20261206-rmsnorm", "swiglu": "optimize-20261206-swiglu"},
        trials={"rmsnorm": 5, "swiglu": 3},
        untimed=True,
        package="warpforge-optimize/package",
        patches="warpforge-optimize/patches.json",
        plans=plans,
    )
