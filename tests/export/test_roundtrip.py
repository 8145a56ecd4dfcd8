"""Round trip: campaigns fill a database, export writes a package, a fresh venv with torch, triton and transformers
runs it.

- untimed: a real CPU campaign (interpret backend, 3 trials) on rmsnorm, exported with allow_untimed;
- timed: a real replay campaign on swiglu over a recording written here for the ``flat`` template. No
  warpforge recording matches a template (src/warpforge/recordings/ is empty; shared/spaces holds CUDA-C
  spaces of other kernels), so the recording's times are SYNTHETIC, labelled so in its GPU name; what this
  proves is the path (replay -> stored recorded times -> decision -> tables -> package), not a speedup;
- the package is pip-installed into one fresh ``python -m venv`` (made once for the module) that gets torch and
  triton (its runtime) and transformers, plus pytest and numpy for the tests (Triton's interpreter imports
  numpy; triton does not depend on it), and its generated tests run there under TRITON_INTERPRET=1 (the Triton
  kernels in the interpreter on the CPU);
- re-export is byte-identical; the hf-kernels layout loads through ``kernels.get_local_kernel``; the
  ``--patch`` helper is checked on a tiny random Llama (transformers, in the fresh venv), forward and three
  training steps;
- an optimize run's package (tests/export/optimize_fill.py) installed there runs its own tests: the model
  rebuilt from its bundled file, patched by ``patch(model)``, against the unpatched one (outputs, losses, gradients);
- rmsnorm and swiglu train: the generated tests compare their gradients with torch autograd, and a training
  step in the fresh venv compares the gradients of a norm -> projections -> SwiGLU block with plain PyTorch.

Export reads through ``warpforge.db.queries.Reader``. Where the campaign engine does not yet store its decision
(seams-db's wf_decisions writer), the test stores the one the campaign summary reports (accepted best, interval).

Marked slow (about 6-10 minutes on 2 busy cores; the venv alone installs ~400 MB); CI runs it through
``make test-ci`` (.ci/run).
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from warpforge.db.queries import Reader
from warpforge.evaluator.run.recorded_spaces import write_cache
from warpforge.evaluator.run.recordings import recording_path
from warpforge.export.op_plan import OpPlan
from warpforge.export.package import render_package, write_tree
from warpforge.export.plan import plan_task
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import builtin_variants

pytestmark = [pytest.mark.slow, pytest.mark.ci]
NS = "rt_kernels"
GPU = "SYNTHETIC-GPU (test recording, not a measurement)"


def _record_swiglu(root: Path) -> None:
    """A recording of swiglu/flat over its whole SPACE on the task's shapes, with made-up times."""
    task = get_task("swiglu")
    v = next(x for x in builtin_variants("swiglu") if x.name == "flat")
    for shape in task.shapes:
        base = shape["M"] * shape["N"] * 6 / 4.0e9  # ms at 4 TB/s for 3 fp16 tensors
        records = []
        for p in v.configs():
            per_thread = p["BLOCK"] // (32 * p["num_warps"])
            if not 2 <= per_thread <= 64:  # the template's constraints: absent = outside them
                continue
            t = base * (1 + 0.2 * abs(math.log2(p["BLOCK"] / 4096))) * (1 + 0.1 * abs(math.log2(p["num_warps"] / 8)))
            records.append((p, t, [0.98 * t, t, 1.02 * t]))
        meta = {
            "shape": shape,
            "dtype": "float16",
            "reference_ms": [3 * base, 3.1 * base, 3.2 * base],
            "recorded_at": "2026-11-30T00:00:00+00:00",
            "variant_hash": v.source_hash,
            "torch": "2.13.0",
        }
        path = recording_path(root, GPU, "swiglu", v.name, v.source_hash, "float16", shape)
        write_cache(path, GPU, "swiglu/flat", meta, v.space, records)


@pytest.fixture(scope="module")
def exported() -> Iterator[dict[str, Any]]:
    from warpforge.search.engine.campaign import CampaignSpec, run_campaign

    # Its own directory, not pytest's tmp_path: pytest keeps only the last 3 base temp dirs per user, and
    # another pytest run of the same user (parallel sessions) deleted the venv under this one mid-test.
    tmp = Path(tempfile.mkdtemp(prefix="wf-export-roundtrip-"))
    url = f"sqlite:///{tmp / 'wf.db'}"
    old = os.environ.get("WARPFORGE_RECORDINGS")
    os.environ["WARPFORGE_RECORDINGS"] = str(tmp / "recordings")
    try:
        _record_swiglu(tmp / "recordings")
        run_campaign(CampaignSpec(name="cpu", tasks=["rmsnorm"], trials=3, backend="interpret", db_url=url, seed=0))
        replay = run_campaign(
            CampaignSpec(name="replayed", tasks=["swiglu"], trials=8, backend="replay", db_url=url, seed=0)
        )
    finally:
        if old is None:
            os.environ.pop("WARPFORGE_RECORDINGS", None)
        else:
            os.environ["WARPFORGE_RECORDINGS"] = old
    t = replay.tasks[0]
    assert t.best_variant == "flat" and t.best_params, t
    reader = Reader(url)
    # The campaign stores its own decision (search/engine/decision.py); export must find it accepted.
    assert any(d.accepted for d in reader.decisions(campaign="replayed"))
    plans = [plan_task(reader, get_task("rmsnorm"), allow_untimed=True), plan_task(reader, get_task("swiglu"))]
    dest = tmp / "pkg"
    write_tree(dest, render_package(plans, NS, patch=True))
    yield {"tmp": tmp, "dest": dest, "plans": plans, "best": t}
    shutil.rmtree(tmp, ignore_errors=True)


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_plans_come_from_the_campaigns(exported: dict[str, Any]) -> None:
    rms, swi = exported["plans"]
    assert rms.untimed and rms.info["timing_source"] == "untimed" and rms.info["campaign"] == "cpu"
    assert not swi.untimed and swi.info["timing_source"] == "recorded" and swi.tables[0].gpu == GPU
    assert dict(swi.tables[0].general) == exported["best"].best_params
    # every tuned entry is a configuration some evaluation verified ok (the replay backend: recorded ok)
    assert len(swi.tables[0].entries) == 3


def test_reexport_is_byte_identical(exported: dict[str, Any]) -> None:
    dest = exported["dest"]
    before = _digest(dest)
    report = write_tree(dest, render_package(exported["plans"], NS, patch=True))
    assert report.written == () and report.removed == ()
    assert _digest(dest) == before


def _fresh_venv(tmp: Path) -> Path:
    """torch and triton (the package's runtime), transformers (what an optimize package's tests rebuild a
    causal LM with, and the --patch helper's tests), pytest and numpy (Triton's interpreter imports numpy)."""
    reuse = os.environ.get("WARPFORGE_TEST_EXPORT_VENV")  # development only: a venv this test made before
    if reuse and (Path(reuse) / "bin" / "python").exists():
        return Path(reuse) / "bin" / "python"
    venv = Path(reuse) if reuse else tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    import torch
    import triton

    torch_version = torch.__version__.split("+")[0]
    pip = [str(py), "-m", "pip", "install", "-q"]
    # torch's CPU build first, as scripts/bootstrap.sh does: a local wheel (pip find-links), else PyTorch's CPU
    # index, so the resolver never pulls the multi-GB CUDA build.
    if subprocess.run([*pip, "--no-index", "--no-deps", f"torch=={torch_version}"]).returncode != 0:
        subprocess.run(
            [*pip, "--no-deps", f"torch=={torch_version}", "--index-url", "https://download.pytorch.org/whl/cpu"],
            check=True,
            timeout=1500,
        )
    import transformers

    subprocess.run(
        [
            *pip,
            f"torch=={torch_version}",
            f"triton=={triton.__version__}",
            f"transformers=={transformers.__version__}",
            "pytest",
            "numpy",
        ],
        check=True,
        timeout=1500,
    )
    return py


@pytest.fixture(scope="module")
def venv(exported: dict[str, Any]) -> Path:
    """One fresh venv for the module's tests (~90 s to make: once, not per test)."""
    return _fresh_venv(exported["tmp"])


# The fresh venv (~400 MB of wheels with transformers, made here for the module) plus the generated suite under
# the interpreter, gradient tests and the tiny Llama included: 30 min was too little under a load of 15.
@pytest.mark.timeout(3600)
@pytest.mark.long
def test_fresh_venv_runs_the_generated_tests(exported: dict[str, Any], venv: Path) -> None:
    tmp, dest = exported["tmp"], exported["dest"]
    py = venv
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", "--no-build-isolation", str(dest)],
        check=True,
        timeout=600,
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["TRITON_INTERPRET"] = "1"
    probe = subprocess.run(
        [
            str(py),
            "-c",
            "import importlib.util, rt_kernels; "
            "print(importlib.util.find_spec('warpforge') is None, rt_kernels.__file__)",
        ],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert probe.stdout.startswith("True ") and "site-packages" in probe.stdout, probe.stdout
    # the untimed op warns once at import
    assert "never timed" in probe.stderr, probe.stderr
    run = subprocess.run(
        [str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(dest / "tests")],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    tail = run.stdout[-3000:]
    assert run.returncode == 0, tail
    assert " passed" in tail and "failed" not in tail, tail
    # the --patch helper's tests (a tiny Llama, transformers in the venv) ran there, none skipped for it
    assert "transformers" not in tail, tail


TRAINING_STEP = """
import torch, rt_kernels

torch.manual_seed(0)
x = torch.randn(6, 32)
w = torch.nn.Parameter(1.0 + 0.1 * torch.randn(32))
gate, up = torch.nn.Linear(32, 48), torch.nn.Linear(32, 48)
params = [w, *gate.parameters(), *up.parameters()]


def plain_rmsnorm(x, w):  # Llama's RMSNorm written out here, independent of the package
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def plain_swiglu(a, b):
    return torch.nn.functional.silu(a) * b


def loss_of(norm, act):
    h = norm(x, w)
    return act(gate(h), up(h)).pow(2).mean()


got = torch.autograd.grad(loss_of(rt_kernels.rmsnorm, rt_kernels.swiglu), params)
want = torch.autograd.grad(loss_of(plain_rmsnorm, plain_swiglu), params)
for g, e in zip(got, want):
    torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-4)
before = float(loss_of(rt_kernels.rmsnorm, rt_kernels.swiglu))
with torch.no_grad():
    for p, g in zip(params, got):
        p -= 0.5 * g
after = float(loss_of(rt_kernels.rmsnorm, rt_kernels.swiglu))
assert after < before, (before, after)
print("trained", len(got), "gradients equal torch's; loss", before, "->", after)
"""


def test_fresh_venv_trains_through_the_ops(exported: dict[str, Any], venv: Path) -> None:
    """A training step in the fresh venv (no warpforge): RMSNorm -> gate/up -> SwiGLU, the gradients of the norm
    weight and both projections against plain PyTorch autograd, kernels in the interpreter."""
    tmp, dest = exported["tmp"], exported["dest"]
    py = venv
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(dest)], check=True, timeout=600
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["TRITON_INTERPRET"] = "1"
    run = subprocess.run([str(py), "-c", TRAINING_STEP], cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.startswith("trained 5 gradients equal torch's"), run.stdout


@pytest.mark.timeout(1800)
def test_fresh_venv_patches_a_model_with_an_optimize_package(exported: dict[str, Any], venv: Path) -> None:
    """An optimize run's package (tests/export/optimize_fill.py: swiglu's winner and one region's patch) installed
    in the fresh venv: its own tests rebuild the model from the bundled file, patch it, and compare outputs, two
    SGD steps' losses and the gradients with the unpatched model (kernels in the interpreter); unpatch restores."""
    from optimize_fill import NS as OPT_NS
    from optimize_fill import write_optimize_package

    tmp = exported["tmp"]
    dest = tmp / "optimize-package"
    (tmp / "optimize-db").mkdir(exist_ok=True)
    write_optimize_package(tmp / "optimize-db", dest)
    subprocess.run(
        [str(venv), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(dest)],
        check=True,
        timeout=600,
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["TRITON_INTERPRET"] = "1"
    run = subprocess.run(
        [
            str(venv),
            "-m",
            "pytest",
            "-v",
            "-p",
            "no:cacheprovider",
            "-rs",
            str(dest / "tests" / "test_patched_model.py"),
        ],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    print(run.stdout[-4000:])  # the fresh-venv run, as the closing note quotes it
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout[-3000:] + run.stderr[-2000:]
    probe = subprocess.run(
        [
            str(venv),
            "-c",
            f"import importlib.util, {OPT_NS}; "
            f"print(importlib.util.find_spec('warpforge') is None, {OPT_NS}.regions())",
        ],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
    )
    assert probe.stdout.strip() == "True ['act']", probe.stdout + probe.stderr[-2000:]


def test_hf_kernels_layout_loads_through_the_local_loader(exported: dict[str, Any]) -> None:
    pytest.importorskip("kernels")
    plans: list[OpPlan] = exported["plans"]
    dest = exported["tmp"] / "hf"
    write_tree(dest, render_package(plans, "rt_hf", fmt="hf-kernels"))
    code = (
        "import torch, kernels\n"
        "from pathlib import Path\n"
        f"mod = kernels.get_local_kernel(Path({str(dest)!r}))\n"
        "x = torch.randn(7, 33, dtype=torch.float16); w = torch.randn(33, dtype=torch.float16)\n"
        "import importlib; ref = importlib.import_module(mod.__name__ + '._reference.rmsnorm')\n"
        "torch.testing.assert_close(mod.rmsnorm(x, w), ref.reference(x, w))\n"
        "assert torch.ops.rt_hf.swiglu is not None\n"
        "print('loaded', sorted(mod.KERNEL_INFO))\n"
    )
    env = dict(os.environ, TRITON_INTERPRET="1", HF_HUB_OFFLINE="1")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "loaded ['rmsnorm', 'swiglu']" in run.stdout
