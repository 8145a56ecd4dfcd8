"""The files that make an optimize run's package patch a model by itself (``warpforge optimize``, and
``warpforge export --optimize-run ID`` from the stored run).

Besides the ops (export/package.py), the package gets:

- ``NS/patches.json``: every verified region's patch (optimize/patch_spec.py, versioned), plus the prefix of the
  module paths the proof's wrapper adds (``lm.`` around a causal LM: a user patches the LM itself);
- ``NS/_patching.py``: optimize/patching.py with what it imports from warpforge written in at export
  (export/standalone.py): the patcher the proof ran, needing only torch;
- ``NS/_patch.py``: ``patch(model, *, regions=None)``, ``unpatch(model)``, ``patch_report(model)``, ``regions()``;
- ``tests/test_patched_model.py`` with the target bundled (``tests/target/``: the KernelBench file, or the
  transformers ``config.json``) and ``tests/target.json`` (batch, sequence, dtype, seed, steps, learning rate,
  tolerances): the model rebuilt with random weights from the seed, patched, and compared with an unpatched
  copy: outputs, the training steps' losses and the first step's gradients. ``python tests/test_patched_model.py``
  prints that comparison as one JSON line; the proof (optimize/prove.py) runs exactly that, with warpforge
  blocked, so what ships is what was proven.

Example::

    >>> bundle = optimize_bundle("wf_opt", shipped_source(path, "optimize/patching.py"), specs, prefix,
    ...                          target_files, settings, summary)                  # doctest: +SKIP
    >>> sorted(bundle.package_files)                                                  # doctest: +SKIP
    ['_patch.py', '_patching.py', 'patches.json']
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warpforge.export.standalone import standalone_source

RUNTIME = Path(__file__).parent / "runtime"
TEMPLATES = Path(__file__).parent / "templates"


@dataclass(frozen=True)
class OptimizeBundle:
    """What an optimize run adds to its package: files under ``NS/`` and at the root, and the README's lines."""

    package_files: dict[str, bytes]
    root_files: dict[str, bytes]
    readme: dict[str, Any] = field(default_factory=dict)


def shipped_source(path: Path, label: str) -> str:
    """A module of warpforge as a package ships it: self-contained, with what it imports from warpforge written
    in (export/standalone.py). The caller names the file, so export imports nothing of the packages above it."""
    return standalone_source(path.read_text(), label, roots=None)


def target_files(kind: str, spec: str) -> dict[str, bytes]:
    """The target the package's tests rebuild, by path under ``tests/target/``: a KernelBench file as it is, or
    a transformers folder's ``config.json`` (weights are never bundled: the tests draw them from the seed)."""
    path = Path(spec)
    if kind == "kernelbench":
        return {path.name: path.read_bytes()}
    if kind == "transformers":
        return {"config.json": (path / "config.json").read_bytes()}
    return {}


def optimize_bundle(
    ns: str,
    patching_source: str,
    patches_text: str,
    model_prefix: str,
    target: dict[str, bytes],
    settings: dict[str, Any],
    summary: dict[str, Any],
) -> OptimizeBundle:
    """The bundle of one optimize run. ``patches_text``: patches.json as the proof read it (optimize/patch_spec.py
    ``dump_patches``); ``settings``: kind, file, batch, seq, dtype, seed, steps, lr, train and the proof's
    tolerances; ``summary``: the README's facts (regions patched, verified, untimed ops); ``patching_source``:
    the patcher the proof ran (optimize/patching.py), made self-contained by :func:`shipped_source`."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    doc = json.loads(patches_text)
    doc = doc if isinstance(doc, dict) else {"format": "warpforge-patches", "version": 1, "patches": doc}
    doc["model_prefix"] = model_prefix
    package = {
        "patches.json": (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode(),
        "_patching.py": patching_source.encode(),
        "_patch.py": (RUNTIME / "_patch.py").read_bytes(),
    }
    root = {f"tests/target/{name}": data for name, data in target.items()}
    if target:
        root["tests/target.json"] = (json.dumps(settings, indent=2, sort_keys=True) + "\n").encode()
        root["tests/test_patched_model.py"] = env.get_template("test_patched_model.py.j2").render(ns=ns).encode()
    return OptimizeBundle(package, root, {**summary, "tested": bool(target)})
