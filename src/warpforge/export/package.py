"""Render a self-contained Python package of exported ops, and write it idempotently.

``render_package`` turns :class:`~warpforge.export.op_plan.OpPlan` s into ``{relative path: bytes}``: the op
modules (``triton_op`` + ``wrap_triton``, CPU kernel from the reference, ``register_fake``), the winning
variant sources, the task sources, per-GPU config JSON, ``kernel_info.json``, generated tests, a benchmark
script, ``pyproject.toml`` and a README. Nothing in it depends on the time of export, and JSON is written
with sorted keys, so the same database gives the same bytes. ``write_tree`` writes only files whose bytes
changed and removes files that an earlier export wrote and this one does not (tracked in
``.warpforge-export.json``); it refuses a non-empty directory that no export wrote.

Formats: ``package`` (a pip-installable project) and ``hf-kernels`` (Hugging Face ``kernels`` layout: a
noarch ``build/torch-universal/`` variant with ``metadata.json``, loadable by ``kernels.get_local_kernel``).

Example::

    >>> files = render_package([plan], "mykernels")              # doctest: +SKIP
    >>> write_tree(Path("out"), files)                           # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warpforge.errors import UsageError
from warpforge.export.op_plan import OpPlan
from warpforge.export.optimize_package import OptimizeBundle
from warpforge.export.source import (
    OpSignature,
    TrainingFacts,
    check_standalone,
    effective_grad_tolerances,
    effective_tolerances,
    op_signature,
    self_check_tolerances,
    shape_map,
    training_facts,
    wrap_launches,
)
from warpforge.export.standalone import standalone_source
from warpforge.kernels.taskdef import dtype_name

RUNTIME = Path(__file__).parent / "runtime"
TEMPLATES = Path(__file__).parent / "templates"
MANIFEST = ".warpforge-export.json"
FORMATS = ("package", "hf-kernels")
# Shapes above this many elements (product of the shape's sizes) are skipped by the generated tests under
# the Triton interpreter: it runs a 1024x4096 softmax (2**22) in about 1.5 s (docs/design.md §8).
INTERPRETER_LIMIT = 1 << 18
HF_VARIANT = "build/torch-universal"


class ExportUsageError(UsageError):
    """Bad export arguments (namespace, format, incompatible ops); the message says what to change."""


def check_namespace(ns: str) -> None:
    # A kernels-library name must be lowercase letters, digits and dashes: the same rule with underscores
    # keeps one namespace valid for torch.library, Python imports and the hf-kernels format.
    if not re.fullmatch(r"[a-z][a-z0-9_]*[a-z0-9]", ns) or ns in {"torch", "triton", "warpforge"}:
        raise ExportUsageError(
            f"namespace {ns!r} must be a lowercase Python identifier (letters, digits, "
            "underscores; e.g. mykernels) and not torch/triton/warpforge"
        )


def _env() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True) + "\n").encode()


def _py_list(items: list[Any]) -> str:
    return "[\n" + "".join(f"    {item!r},\n" for item in items) + "]"


def gpu_slug(gpu: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", gpu).strip("_") or "gpu"


def _cases(plan: OpPlan) -> list[tuple[dict[str, int], str]]:
    """Measured (shape, dtype) pairs first, then every correctness shape in every task dtype."""
    out: list[tuple[dict[str, int], str]] = []
    for table in plan.tables:
        for e in table.entries:
            out.append((dict(e.shape), e.dtype))
    for shape in plan.task.check_shapes or plan.task.small_shapes:
        for dt in plan.task.dtypes:
            out.append((dict(shape), dtype_name(dt)))
    seen: set[str] = set()
    unique: list[tuple[dict[str, int], str]] = []
    for shape, name in out:
        key = json.dumps([shape, name], sort_keys=True)
        if key not in seen:
            seen.add(key)
            unique.append((shape, name))
    return unique


def _fmt_speedup(info: Mapping[str, Any]) -> tuple[str, str]:
    s = info.get("speedup_vs_eager")
    low, high = (info.get("speedup_vs_eager_interval") or [None, None])[:2]
    return (
        f"{s:.3g}x" if s else "not timed",
        f"{low:.3g}-{high:.3g}x" if low is not None and high is not None else "-",
    )


def _triton_pin(plans: list[OpPlan]) -> tuple[str, str]:
    import torch
    import triton

    tritons = {p.info.get("versions", {}).get("triton") or triton.__version__ for p in plans}
    if len(tritons) > 1:
        raise ExportUsageError(
            f"the ops were tuned with different Triton versions ({', '.join(sorted(tritons))}): "
            "export them into separate packages"
        )
    torches = sorted({p.info.get("versions", {}).get("torch") or torch.__version__ for p in plans})
    return tritons.pop(), ", ".join(torches)


def reference_copy(source: str, ns: str) -> str:
    """A task file as the package ships it: its docstring's examples import the task from the package, not
    from warpforge (``pytest --doctest-modules`` in the user's project would fail on ``import warpforge``).

    >>> reference_copy(">>> from warpforge.kernels.tasks import softmax as sm\\n", "wf")
    '>>> from wf._reference import softmax as sm\\n'
    """
    return re.sub(r"(>>>\s+)from warpforge\.kernels\.tasks import ", rf"\1from {ns}._reference import ", source)


def render_package(
    plans: list[OpPlan], ns: str, fmt: str = "package", patch: bool = False, optimize: OptimizeBundle | None = None
) -> dict[str, bytes]:
    """Every file of the exported package, by relative path (see the module docstring); ``optimize``: an optimize
    run's patch of a model (export/optimize_package.py), ``patch(model)`` in the package."""
    check_namespace(ns)
    if patch and optimize is not None:
        raise ExportUsageError(
            "--patch (apply_NS_kernels by module structure) and an optimize run's patch(model) "
            "are two ways to patch: export them into separate packages"
        )
    if fmt not in FORMATS:
        raise ExportUsageError(f"unknown --format {fmt!r}: use one of {', '.join(FORMATS)}")
    env = _env()
    triton_version, torch_version = _triton_pin(plans)
    ops = sorted(p.task.name for p in plans)
    pkg: dict[str, bytes] = {}
    root: dict[str, bytes] = {}
    info_all: dict[str, Any] = {}
    shapes_for_bench: dict[str, list[Any]] = {}
    rows = []
    trained: list[str] = []
    for plan in sorted(plans, key=lambda p: p.task.name):
        op = plan.task.name
        sig = op_signature(plan.task)
        info = dict(plan.info)
        info_all[op] = info
        pkg[f"_kernels/{op}.py"] = wrap_launches(plan.variant_source).encode()
        task_text = plan.task_source or plan.task.path.read_text()
        pkg[f"_reference/{op}.py"] = reference_copy(standalone_source(task_text, f"task {op}"), ns).encode()
        for table in plan.tables:
            pkg[f"configs/{op}/{gpu_slug(table.gpu)}.json"] = _json({"op": op, **table.to_json()})
        first_tensor = next(n for n, k in sig.inputs if k == "tensor")
        train = training_facts(plan.task, plan.variant_source)
        if train is not None:
            trained.append(op)
        common = {
            "ns": ns,
            "op": op,
            "info": info,
            "untimed": plan.untimed,
            **_training_context(sig, train),
            "description": plan.task.description.replace('"""', "'''"),
        }
        pkg[f"{op}.py"] = (
            env.get_template("op.py.j2")
            .render(
                **common,
                signature=sig.annotated(),
                returns=sig.returns(),
                names=", ".join(sig.names),
                example_args=", ".join(sig.names),
                first_tensor=first_tensor,
                first_index=sig.names.index(first_tensor),
                dims=repr({k: list(v) for k, v in sorted(shape_map(plan.task).items())}),
                tolerances=repr(self_check_tolerances(plan.task)),
            )
            .encode()
        )
        cases = _cases(plan)
        root[f"tests/test_{op}.py"] = (
            env.get_template("test_op.py.j2")
            .render(
                **common,
                cases=_py_list(cases),
                interp_limit=INTERPRETER_LIMIT,
                tolerances=repr(dict(sorted(effective_tolerances(plan.task).items()))),
                grad_tolerances=repr(dict(sorted(effective_grad_tolerances(plan.task).items()))),
                bf16_dot=bool(re.search(r"\btl\.dot\b", plan.variant_source)),
            )
            .encode()
        )
        measured = [c for c in cases if any(c[0] == dict(e.shape) for t in plan.tables for e in t.entries)]
        shapes_for_bench[op] = measured or [(dict(s), dtype_name(plan.task.dtypes[0])) for s in plan.task.shapes]
        speedup, interval = _fmt_speedup(info)
        rows.append({"op": op, "info": info, "speedup": speedup, "interval": interval})
    untimed_ops = [p.task.name for p in plans if p.untimed]
    pkg["kernel_info.json"] = _json(info_all)
    pkg["_config.py"] = (RUNTIME / "_config.py").read_bytes()
    pkg["_testing.py"] = (RUNTIME / "_testing.py").read_bytes()
    pkg["_selfcheck.py"] = (RUNTIME / "_selfcheck.py").read_bytes()
    if trained:
        pkg["_training.py"] = (RUNTIME / "_training.py").read_bytes()
    pkg["_kernels/__init__.py"] = b'"""The winning Triton kernels and launchers, one module per op."""\n'
    pkg["_reference/__init__.py"] = b'"""The tasks\' PyTorch references (ground truth, CPU path), one per op."""\n'
    pkg["py.typed"] = b""
    pkg["__init__.py"] = (
        env.get_template("__init__.py.j2").render(ns=ns, ops=ops, optimize=optimize is not None).encode()
    )
    if optimize is not None:
        pkg.update(optimize.package_files)
        root.update(optimize.root_files)
    patch_kinds: list[str] = []
    if patch:
        from warpforge.export.patch import render_patch

        patch_files, patch_kinds = render_patch(env, ns, ops, trained)
        for path, data in patch_files.items():
            (root if path.startswith("tests/") else pkg)[path] = data
    root["README.md"] = (
        env.get_template("README.md.j2")
        .render(
            ns=ns,
            plans=rows,
            triton_version=triton_version,
            any_untimed=bool(untimed_ops),
            untimed_ops=untimed_ops,
            patch=patch,
            patch_kinds=patch_kinds,
            trained=trained,
            optimize=optimize.readme if optimize is not None else None,
        )
        .encode()
    )
    root["bench.py"] = (
        env.get_template("bench.py.j2")
        .render(ns=ns, ops=ops, shapes=json.dumps(shapes_for_bench, indent=4, sort_keys=True))
        .encode()
    )
    if fmt == "package":
        root["pyproject.toml"] = (
            env.get_template("pyproject.toml.j2")
            .render(
                ns=ns,
                dist=ns.replace("_", "-"),
                version="0.1.0",
                ops=ops,
                triton_version=triton_version,
                torch_version=torch_version,
            )
            .encode()
        )
        files = {f"{ns}/{k}": v for k, v in pkg.items()} | root
    else:
        files = {f"{HF_VARIANT}/{ns}/{k}": v for k, v in pkg.items()} | root
        digest = hashlib.sha256(b"".join(k.encode() + v for k, v in sorted(files.items()))).hexdigest()[:12]
        files[f"{HF_VARIANT}/metadata.json"] = _json(
            {
                "id": f"{ns}_{digest}",
                "name": ns.replace("_", "-"),
                "version": 1,
                "license": "Apache-2.0",
                "python-depends": [],
                "backend": {"type": "cuda"},
            }
        )
        # The generated tests import the package by name: put the build variant on sys.path for them.
        files["tests/conftest.py"] = (
            '"""Make the hf-kernels build variant importable by name for the generated tests."""\n\n'
            "import sys\nfrom pathlib import Path\n\n"
            f'sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "{HF_VARIANT}"))\n'
        ).encode()
    for rel, data in files.items():  # the package runs with torch and triton only: refuse it otherwise, loudly
        if rel.endswith(".py"):
            check_standalone(data.decode(), rel)
    return dict(sorted(files.items()))


def _training_context(sig: OpSignature, train: TrainingFacts | None) -> dict[str, Any]:
    """Template values of a training op (``training`` false for a forward-only one)."""
    if train is None:
        return {"training": False, "n_saved": 0, "grad_inputs": [], "grad_names": "", "grad_tensors": ""}
    saved = [f"saved_{i}" for i in range(train.n_saved)]
    n_out, n_grads = 1 + train.n_saved, len(train.grad_inputs)
    return {
        "training": True,
        "n_saved": train.n_saved,
        "grad_inputs": list(train.grad_inputs),
        "grad_names": ", ".join(sig.names[i] for i in train.grad_inputs),
        "grad_tensors": ", ".join(sig.names[i] for i in train.grad_inputs),
        "saved_signature": "".join(f"{s}: torch.Tensor, " for s in saved),
        "saved_tuple": ", ".join(saved) + ("," if len(saved) == 1 else ""),
        "fwd_returns": "torch.Tensor" if n_out == 1 else "tuple[" + ", ".join(["torch.Tensor"] * n_out) + "]",
        "bwd_returns": "torch.Tensor" if n_grads == 1 else "tuple[" + ", ".join(["torch.Tensor"] * n_grads) + "]",
    }


@dataclass(frozen=True)
class WriteReport:
    dest: Path
    written: tuple[str, ...]
    unchanged: tuple[str, ...]
    removed: tuple[str, ...]


def write_tree(dest: Path, files: Mapping[str, bytes]) -> WriteReport:
    """Write ``files`` under ``dest``: only changed bytes, stale files of an earlier export removed."""
    manifest = dest / MANIFEST
    old: dict[str, str] = {}
    if manifest.exists():
        old = json.loads(manifest.read_text()).get("files", {})
    elif dest.exists() and any(dest.iterdir()):
        raise ExportUsageError(
            f"{dest} is not empty and was not written by warpforge export: pass an empty or new --dest directory"
        )
    written, unchanged = [], []
    for rel, data in files.items():
        path = dest / rel
        if path.exists() and path.read_bytes() == data:
            unchanged.append(rel)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(rel)
    removed = []
    for rel in sorted(set(old) - set(files)):
        path = dest / rel
        if path.exists():
            path.unlink()
            removed.append(rel)
    hashes = {k: hashlib.sha256(v).hexdigest() for k, v in files.items()}
    doc = _json({"generator": "warpforge export", "files": hashes})
    if not manifest.exists() or manifest.read_bytes() != doc:
        manifest.write_bytes(doc)
    return WriteReport(dest, tuple(written), tuple(unchanged), tuple(removed))
