"""What patching one region means, as stored beside an exported package: the region, the op and how the call's
tensors map onto the task's inputs. Its own module: the patcher of ordinary calls (optimize/patching.py) and
that of loose tensor ops (optimize/loose_patch.py) both read it, and so does the exported package, which gets
this module written into its ``_patching.py`` (export/optimize_package.py): a plain dataclass, nothing but the
standard library, so the package needs no pydantic.

``patches.json`` is versioned data: ``{"format": "warpforge-patches", "version": 1, "patches": [...]}``
(:func:`dump_patches`, :func:`load_patches`; a bare list, the first form, still loads).

Example::

    >>> spec = PatchSpec(region="ln", module="ln", op="layernorm", shape={"M": 4, "N": 8}, order=[0, 1, 2],
    ...                  flatten=[True, False, False], ranks=[2, 1, 1], dtypes=["float32"])
    >>> load_patches(dump_patches([spec])) == [spec]
    True
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

PATCHES_FORMAT = "warpforge-patches"
PATCHES_VERSION = 1


@dataclass(kw_only=True)
class PatchSpec:
    """One region's patch (stored as JSON beside the exported package)."""

    region: str  # module path, or "path::function#i"
    module: str  # the module path the call runs in
    function: str = ""  # the torch.nn.functional name for a functional region
    op: str  # the exported op: the package's attribute (the task's name, elementwise_gelu_tanh for a member)
    task: str = ""  # the task it computes (elementwise[gelu_tanh]; "": op)
    shape: dict[str, int]  # the task's shape at the region's sizes (checked there before patching)
    order: list[int]  # task input i is the call's tensor order[i]; -1 absent (zeros of zero_shapes)
    flatten: list[bool]
    ranks: list[int]  # the task inputs' ranks (a flattened tensor merges its leading dimensions into one)
    zero_shapes: list[list[int]] = field(default_factory=list)
    reduce: str = ""
    ignore_index: int | None = None
    dtypes: list[str]  # the dtypes the task verified
    helper: bool = False  # ``function`` is a helper of the model's code, not a torch.nn.functional name
    output: int = -1  # which element of the helper's returned tuple the op computes (-1: its whole return)
    per_item: bool = False  # the op computes each item of the call's leading (batch) dimension on its own
    helper_file: str = ""  # the helper's source file: only a function of that name defined there is rebound
    # the op has no backward kernel: its backward is torch autograd of the task's reference (the package's
    # ``_reference`` module), recomputed from the saved inputs (a training step)
    reference_backward: bool = False
    # A loose region (optimize/loose_patch.py): the module's own tensor-returning torch calls at positions
    # loose_start..loose_end run as the op; the op's call tensors are read where loose_reads says
    # ([position, index among that call's tensors]).
    loose_start: int = -1
    loose_end: int = -1
    loose_names: list[str] = field(default_factory=list)  # the names of the module's calls at 0..loose_end, as traced
    loose_reads: list[list[int]] = field(default_factory=list)
    loose_input_shapes: list[list[int]] = field(default_factory=list)
    loose_input_dtypes: list[str] = field(default_factory=list)
    loose_input_floating: list[bool] = field(default_factory=list)  # in the call's own floating dtype
    loose_output_shape: list[int] = field(default_factory=list)
    # per position start..end-1: its tensors as (shape, stride, dtype)
    loose_placeholders: list[list[Any]] = field(default_factory=list)
    loose_tuples: list[bool] = field(default_factory=list)  # per position start..end-1: it returned a tuple of them
    loose_guard: list[list[int]] = field(default_factory=list)  # the shapes of the module's tensor arguments

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PatchSpec:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"a patch entry has fields this version does not know: {', '.join(unknown)}")
        return cls(**data)


def dump_patches(specs: list[PatchSpec]) -> str:
    """``patches.json``'s text: the format, its version and every region's patch."""
    doc = {"format": PATCHES_FORMAT, "version": PATCHES_VERSION, "patches": [s.to_json() for s in specs]}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def load_patches(text: str) -> list[PatchSpec]:
    """The patches of a ``patches.json`` text; ValueError for another format or a newer version."""
    doc = json.loads(text)
    if isinstance(doc, list):  # the first form: the entries alone
        return [PatchSpec.from_json(d) for d in doc]
    if not isinstance(doc, dict) or doc.get("format") != PATCHES_FORMAT:
        raise ValueError(f"not a {PATCHES_FORMAT} document")
    if int(doc.get("version", 0)) > PATCHES_VERSION:
        raise ValueError(
            f"patches version {doc['version']} is newer than this reader's ({PATCHES_VERSION}): "
            "export the package again with this warpforge"
        )
    return [PatchSpec.from_json(d) for d in doc["patches"]]
