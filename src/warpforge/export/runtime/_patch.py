"""``patch(model)``: the regions ``warpforge optimize`` verified, applied to a model built from the same code.

Written by ``warpforge optimize`` / ``warpforge export --optimize-run`` beside ``patches.json`` (the regions, as
data) and ``_patching.py`` (the patcher, generated from warpforge's own; needs only torch). Each region is
patched exactly as the proof patched it: a module's ``forward``, a functional call inside a module, a helper
function of the model's source file rebound while the module that calls it runs, or a run of a module's own
tensor ops. A call whose dtype the kernel was not verified for, or whose sizes no exported configuration fits,
runs the original code; ``patch_report(model)`` counts both.

Example::

    >>> import mypkg                                  # doctest: +SKIP
    >>> mypkg.patch(model)                            # doctest: +SKIP
    ['model.layers.0.input_layernorm', ...]
    >>> mypkg.unpatch(model)                          # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from ._patching import (  # type: ignore[import-not-found]  # generated at export beside this file
    PatchSpec,
    apply_patches,
    load_patches,
    remove_patches,
)

PATCHES = Path(__file__).with_name("patches.json")
_STATE = "_warpforge_patch"


def _document() -> dict[str, Any]:
    doc = json.loads(PATCHES.read_text())
    return doc if isinstance(doc, dict) else {"patches": doc}


def specs() -> list[PatchSpec]:
    """Every verified region's patch, as ``patches.json`` stores it."""
    return load_patches(PATCHES.read_text())


def regions() -> list[str]:
    """The names of the verified regions (module paths; ``path::function#i`` for a call inside a module)."""
    return sorted({s.region for s in specs()})


def _for_model(model: torch.nn.Module, chosen: list[PatchSpec]) -> list[PatchSpec]:
    """The specs with module paths of ``model``: the proof patched a wrapper of a causal LM (its module
    ``lm``), a user patches the LM itself."""
    prefix = str(_document().get("model_prefix", ""))
    names = dict(model.named_modules())
    if not prefix or any(s.module in names and s.module.startswith(prefix) for s in chosen if s.module):
        return chosen
    root = prefix.rstrip(".")
    return [dataclasses.replace(s, module="" if s.module == root else s.module.removeprefix(prefix)) for s in chosen]


def patch(model: torch.nn.Module, *, regions: Iterable[str] | None = None) -> list[str]:
    """Patch ``model`` in place with every verified region (or those named); returns the region names patched.

    ValueError for a region name that is not one of :func:`regions`, or a model that lacks a module a region
    patches (it is not the model these kernels were verified on); RuntimeError when it is patched already."""
    if model.__dict__.get(_STATE) is not None:
        raise RuntimeError("this model is patched already: unpatch(model) first")
    chosen = specs()
    if regions is not None:
        wanted = set(regions)
        unknown = sorted(wanted - {s.region for s in chosen})
        if unknown:
            raise ValueError(
                f"no verified region named {', '.join(unknown)}; the regions are: "
                f"{', '.join(sorted({s.region for s in chosen}))}"
            )
        chosen = [s for s in chosen if s.region in wanted]
    chosen = _for_model(model, chosen)
    names = dict(model.named_modules())
    missing = sorted({s.module for s in chosen if s.module not in names})
    if missing:
        raise ValueError(
            f"the model has no module {', '.join(missing[:3])}: patch() applies to a model built from "
            "the code these kernels were verified on"
        )
    package = importlib.import_module(__name__.rpartition(".")[0])
    model.__dict__[_STATE] = apply_patches(model, chosen, package)
    return sorted({s.region for s in chosen})


def unpatch(model: torch.nn.Module) -> None:
    """Undo :func:`patch`: forwards, hooks and rebound helpers as they were (nothing for an unpatched model)."""
    counters = model.__dict__.pop(_STATE, None)
    if counters is not None:
        remove_patches(counters)


def patch_report(model: torch.nn.Module) -> dict[str, dict[str, Any]]:
    """Since :func:`patch`: ``kernel`` (region -> calls that ran the exported kernel) and ``fallback`` (region ->
    why a call of it ran the original code, the latest reason)."""
    counters = model.__dict__.get(_STATE)
    if counters is None:
        return {"kernel": {}, "fallback": {}}
    return {"kernel": dict(counters.kernel), "fallback": dict(counters.fallback)}
