"""The untrusted side's entry point: runs one candidate and reports raw facts, never verdicts.

Started by evaluator/sandbox/supervisor.py inside the OS sandbox (isolation.py) as ``python -I -c <boot> RESULT_FD``.
It imports torch and Triton, caps its address space at what it holds then plus the parent's budget
(when asked), reads one JSON request line, installs its seccomp filter (child/seccomp.py: ``strict``
where nothing needs new processes, else ``spawn``), and only then imports the candidate; a filter that does
not install ends the child before any candidate code, with the error kind ``wall_not_installed``. Modes:

- ``check`` (child/check.py): run ``launch`` on each case's inputs, asked for one case at a time
  after the import (``need`` marks), with fresh allocations prefilled with a sentinel; send back
  outputs and post-call inputs with their hashes, plus a second-sentinel rerun and a ghost replay
  (kernels disabled) of one case;
- ``compile``, ``space`` (child/compile.py): AOT compilation for a target GPU, constraint enumeration;
- ``reference``, ``bench``, ``ab`` (child/bench.py): time the reference, the candidate on fresh inputs
  for every timed call, or two candidates interleaved.

The report goes to a private pipe and echoes the request's nonce; the child then leaves with
``os._exit`` so that no candidate ``atexit`` hook or lingering thread runs after the report, and the
parent kills the whole sandbox before it reads any file the child wrote.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path
from typing import Any

AS_LIMIT_ENV = "WARPFORGE_CHILD_AS_BYTES"  # the same name as sandbox.AS_LIMIT_ENV (not imported: trusted side)
# No core dumps (a dump of a candidate could be GBs in scratch); files up to 16 GiB (a 256 MB output
# saved twice over is the largest legitimate file).
FILE_LIMIT = 16 << 30
STRICT_MODES = {"check", "space"}  # modes that never need a subprocess under the interpreter
# Room the harness itself needs under the cap before any candidate code runs (the request, a case's inputs
# of the check shapes, the report): a floor, not a measurement of any one case. A cap that leaves less is
# the evaluator's misconfiguration, reported as ``evaluator_limit``, never as the candidate's crash.
HARNESS_HEADROOM = 64 << 20


def _address_space() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _cap_address_space(budget: int) -> str | None:
    """Cap the address space at what this process maps now plus ``budget``; None when set, else why not.

    The soft limit is tried first, with HARNESS_HEADROOM allocated under it: a cap the harness itself
    cannot work under (or one above the hard limit this process inherited) is lifted again and reported."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _address_space() + budget
    gib = 1 << 30
    if hard != resource.RLIM_INFINITY and cap > hard:
        return (
            f"the evaluator cannot cap this child's address space at {cap / gib:.2f} GiB (what torch and Triton "
            f"map, {(cap - budget) / gib:.2f} GiB, plus the job's {budget / gib:.2f} GiB): the process inherited a "
            f"hard limit of {hard / gib:.2f} GiB (ulimit -v or the sandbox); raise that limit"
        )
    try:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        probe = bytearray(HARNESS_HEADROOM)  # touched: the pages exist
        del probe
    except (MemoryError, ValueError, OSError) as exc:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        return (
            f"the job's host memory budget of {budget / gib:.3g} GiB is below the harness's own needs "
            f"({HARNESS_HEADROOM >> 20} MiB for the request, the case's inputs and the report, before any "
            f"candidate code runs; {type(exc).__name__}): raise the budget (Job.host_memory_gb)"
        )
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    return None


def seccomp_profile(mode: str, interpret: bool) -> str:
    """``strict`` (no fork/exec) unless Triton will need ptxas, cuobjdump or a C compiler."""
    return "strict" if interpret and mode in STRICT_MODES else "spawn"


def wall_refusal(profile: str, exc: BaseException, nonce: Any) -> dict[str, Any]:
    """The report of a child whose seccomp filter did not install: the evaluator's error, sent before any
    candidate code is imported (the trusted side maps ``wall_not_installed`` to ``crashed``)."""
    return {
        "error": {
            "stage": "harness",
            "kind": "wall_not_installed",
            "type": type(exc).__name__,
            "message": f"the {profile} seccomp filter did not install: {exc}",
            "traceback": "",
        },
        "seccomp": f"none ({exc})",
        "nonce": nonce,
    }


def main() -> None:
    # -I ignores PYTHONDONTWRITEBYTECODE: no __pycache__ next to the candidate (any file there that the
    # harness did not write is the candidate's: rejected, wrote_files).
    sys.dont_write_bytecode = True
    import torch
    import triton.runtime.jit

    from warpforge.evaluator.sandbox.child import autotune, libdevice
    from warpforge.evaluator.sandbox.child import common as child_common
    from warpforge.evaluator.sandbox.child.bench import run_ab, run_bench, run_reference
    from warpforge.evaluator.sandbox.child.check import run_check
    from warpforge.evaluator.sandbox.child.compile import run_compile, run_space
    from warpforge.evaluator.sandbox.child.seccomp import SeccompError, install
    from warpforge.kernels.space_values import expand

    if child_common.INTERPRET:
        import triton.runtime.interpreter
    limit = os.environ.get(AS_LIMIT_ENV)
    # After the imports (the harness's included), so the limit is what the candidate may add whatever this
    # torch build maps (a CUDA build maps several GB of libraries): a runaway allocation fails with
    # MemoryError here.
    limit_error = _cap_address_space(int(limit)) if limit else None
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
    child_common.RESULT_FD = int(sys.argv[1])
    line = child_common.read_line()
    req = json.loads(line)
    if limit_error is not None:
        child_common.emit(
            {
                "error": {
                    "stage": "harness",
                    "kind": "evaluator_limit",
                    "type": "EvaluatorLimit",
                    "message": limit_error,
                    "traceback": "",
                },
                "nonce": req.get("nonce"),
            }
        )
        os._exit(0)
    cpu_s = int(req.get("cpu_s") or 0)
    if cpu_s > 0:  # a backstop should the parent die unseen (sandbox.cpu_backstop_s): soft = hard, so the kernel
        # sends SIGKILL (SIGXCPU alone can be ignored, and is, by a disposition inherited from the parent)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    scratch = Path(req["scratch"])
    # Before the candidate: the autotuner runs the configuration the trusted side chose (child/autotune.py), and
    # the interpreter runs libdevice as the compiled kernel does (child/libdevice.py)
    autotune.install(req.setdefault("params", {}))
    for candidate in req.get("candidates") or []:  # A/B: a list-form SPACE's label, as its values
        candidate["params"] = expand(candidate.get("params") or {})
    if child_common.INTERPRET:
        libdevice.install()
    handlers: dict[str, Any] = {
        "check": run_check,
        "compile": run_compile,
        "bench": run_bench,
        "space": run_space,
        "reference": run_reference,
        "ab": run_ab,
    }
    if req.get("triton_cache"):  # the warm kernel cache the parent seeded (evaluator/sandbox/kernel_cache.py); Triton
        # reads TRITON_CACHE_DIR at each compile, so setting it now, before the candidate, is in time
        os.environ["TRITON_CACHE_DIR"] = str(scratch / req["triton_cache"])
    profile = seccomp_profile(req["mode"], child_common.INTERPRET)
    try:
        install(profile)
        seccomp = profile
    except (SeccompError, OSError, AttributeError) as exc:  # AttributeError: a libc without syscall()
        # Fail closed: no candidate code runs without its filter. The trusted side also refuses any report whose
        # ``seccomp`` is not the profile it expects (supervisor.ChildPool.run), so this is the evaluator's error.
        child_common.emit(wall_refusal(profile, exc, req.get("nonce")))
        os._exit(0)
    if str(req.get("device", "")).startswith("cuda"):
        # Creating the CUDA context is ours, not the candidate's: its own phase ("context", a generous budget
        # in stages.phase_budgets), ended by the mode's first mark.
        child_common.mark("context")
        torch.cuda.init()
    try:
        result = handlers[req["mode"]](req, scratch)
    except BaseException as exc:  # noqa: BLE001 - report the harness's own failure too
        result = {"error": child_common.error_info(exc, "harness")}
    import triton

    result["versions"] = {"torch": torch.__version__, "python": sys.version.split()[0], "triton": triton.__version__}
    result["seccomp"] = seccomp
    result["nonce"] = req.get("nonce")
    child_common.emit(result)
    os._exit(0)


if __name__ == "__main__":
    main()
