"""``warpforge doctor``: what this installation can and cannot do, each with a next step."""

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


def _versions() -> Check:
    import torch
    import triton

    import warpforge

    return Check("versions", True, f"python {platform.python_version()}, torch {torch.__version__}, "
                 f"triton {triton.__version__}, warpforge {warpforge.__version__}")


def _gpu() -> Check:
    import torch

    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        return Check("gpu", True, f"{name} (backend cuda: live timings)", required=False)
    return Check("gpu", False, "no CUDA GPU: correctness runs in the Triton interpreter, times come only from "
                 "recordings (--backend replay)", required=False)


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
    from warpforge.db.session import Database, DatabaseError

    try:
        db = Database(url)
        db.upgrade()
        return Check("database", True, f"{db.safe_url} at revision {db.current_revision()}")
    except DatabaseError as exc:
        return Check("database", False, str(exc))


def _sandbox() -> Check:
    """Which OS isolation candidate children get (evaluator/isolation.py); required under WARPFORGE_SANDBOX=require."""
    from warpforge.evaluator.isolation import SandboxUnavailable, policy, probe

    try:
        iso = probe()
    except SandboxUnavailable as exc:
        return Check("sandbox", False, str(exc))
    detail = f"{iso.summary()} (WARPFORGE_SANDBOX={iso.policy})" if iso.active else iso.summary()
    return Check("sandbox", iso.active, detail,
                 required=policy() == "require")


def run_checks(db_url: str | None = None) -> list[Check]:
    return [_versions(), _gpu(), _interpreter(), _aot(), _sandbox(), _database(db_url)]
