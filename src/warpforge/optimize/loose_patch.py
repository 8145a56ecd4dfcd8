"""A loose region's patch: a run of a module's own torch calls replaced by the exported op.

A loose region (optimize/loose.py) is the run of a module's own tensor-returning torch calls at positions
``start..end`` of its forward, as traced. While the patched module runs, :class:`LoosePatcher` sees each of
its torch calls (through optimize/patching.py's function mode) and counts them against the traced names:

- before the run, calls run as they are;
- at each position of the run, the region's inputs are taken from the call's tensors where the trace saw them
  read; the calls of the run return *placeholders* (uninitialised tensors of the traced shapes, strides and
  dtypes: nothing is computed) and metadata reads (``size``, ``shape``) run on them;
- at ``end`` the op runs on the inputs and its result is what the last call returns.

The run is entered only when the module's tensor arguments have their traced shapes, the dtype is one the
task verified and an exported configuration fits; otherwise the whole call runs as written and the fallback
is counted. A call that leaves the trace before the run (another name at a position, a tensor call the trace
did not have) also runs as written; one that leaves it inside the run (placeholders already returned) or reads
a placeholder's values (``.item()``) raises: a patch never returns numbers it did not compute.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch.utils._pytree import tree_flatten

from warpforge.optimize.trace import returns_tensors

if TYPE_CHECKING:
    from warpforge.optimize.patch_spec import PatchSpec

# Calls returning no tensor that read only metadata, the same for a placeholder as for the value it stands
# for; ``register_hook``: torch's ModuleTracker registers gradient hooks on a child's inputs while tracing.
META_CALLS = frozenset(
    {
        "size",
        "dim",
        "__get__",
        "stride",
        "numel",
        "register_hook",
        "__len__",
        "is_contiguous",
        "is_floating_point",
        "element_size",
        "get_device",
        "storage_offset",
        "ndimension",
        "nelement",
        "is_complex",
        "__hash__",
    }
)


class Runner(Protocol):
    """The op of ``spec`` on a call's tensors, its output reshaped to ``shape``; None (the fallback counted)
    when it cannot run. ``probe``: only whether it would, nothing run or counted."""

    def __call__(
        self, spec: PatchSpec, tensors: Sequence[torch.Tensor], shape: torch.Size, probe: bool = False
    ) -> Any: ...


def tensors_of(values: Any) -> list[torch.Tensor]:
    """The tensors of (args, kwargs) in the order a stream position indexes them."""
    return [t for t in tree_flatten(values)[0] if isinstance(t, torch.Tensor)]


class LooseDiverged(RuntimeError):
    """The module's forward left its trace inside a patched run."""


class LoosePatcher:
    """Every loose region of one module (see module doc); ``enter`` at each of its calls."""

    def __init__(
        self, path: str, specs: Sequence[PatchSpec], run: Runner, fallback: Callable[[str, str], None]
    ) -> None:
        self.path, self.run, self.fallback = path, run, fallback
        self.specs = sorted(specs, key=lambda s: s.loose_start)
        self.names = max((s.loose_names for s in self.specs), key=len)
        self.guard = self.specs[0].loose_guard
        self.live = False
        self.pos = 0
        self.open: PatchSpec | None = None
        self.inputs: dict[str, dict[int, torch.Tensor]] = {}

    def enter(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        shapes = [list(t.shape) for t in tensors_of((args, kwargs))]
        self.live, self.pos, self.open, self.inputs = shapes == self.guard, 0, None, {}
        if not self.live:
            self._fall_all(f"the module's arguments have shapes {shapes}, traced at {self.guard}")

    def _fall_all(self, why: str) -> None:
        for s in self.specs:
            self.fallback(s.region, why)

    def call(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], passthrough: Callable[[], Any]) -> Any:
        """This module's own torch call; ``passthrough`` runs it as the rest of the patch would."""
        if not self.live:
            return passthrough()
        name = getattr(func, "__name__", "")
        if name == "__get__":  # a property: metadata, or a view (x.T) that is a traced position
            out = func(*args, **kwargs)
            if returns_tensors(out):
                self._position(name, args, kwargs)
            return out
        if self.pos < len(self.names) and name == self.names[self.pos]:
            return self._at(self._position(name, args, kwargs), func, args, kwargs, passthrough)
        if self.open is not None:
            if name in META_CALLS:
                return func(*args, **kwargs)
            raise LooseDiverged(
                f"{self.path}: {name} inside the patched run {self.open.region} (traced: "
                f"{self.names[self.pos] if self.pos < len(self.names) else 'nothing'}); its "
                "forward reads values or takes another path than its trace"
            )
        out = passthrough()
        if returns_tensors(out):  # a tensor call the trace did not have: the rest of this call runs as written
            self.live = False
            if self.pos <= max(s.loose_end for s in self.specs):
                self._fall_all(f"the module's forward left its trace at {name} (position {self.pos})")
        return out

    def _position(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
        pos = self.pos
        if pos >= len(self.names) or self.names[pos] != name:
            if self.open is not None:
                raise LooseDiverged(f"{self.path}: {name} at position {pos} inside {self.open.region}")
            self.live = False
            if pos <= max(s.loose_end for s in self.specs):
                self._fall_all(f"the module's forward left its trace at {name} (position {pos})")
            return -1
        self.pos += 1
        flat = tensors_of((args, kwargs))
        for spec in self.specs:
            if spec.loose_start <= pos <= spec.loose_end:
                got = self.inputs.setdefault(spec.region, {})
                for k, (at, index) in enumerate(spec.loose_reads):
                    if at == pos:
                        got[k] = flat[index]
        return pos

    def _at(
        self, pos: int, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], passthrough: Callable[[], Any]
    ) -> Any:
        if pos < 0:
            return passthrough()
        if self.open is not None:
            if pos < self.open.loose_end:
                return _placeholders(self.open, pos, _device(args, kwargs))
            return self._finish(self.open)
        spec = next((s for s in self.specs if s.loose_start == pos), None)
        if spec is None or not self._can_run(spec, args, kwargs):
            return passthrough()
        if spec.loose_end == pos:
            return self._finish(spec)
        self.open = spec
        return _placeholders(spec, pos, _device(args, kwargs))

    def _can_run(self, spec: PatchSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """The op will run at the end (checked before any placeholder is returned): its inputs at the traced
        shapes in this call's dtype."""
        first = next((t for t in tensors_of((args, kwargs)) if t.is_floating_point()), None)
        if first is None:
            self.fallback(spec.region, "no floating tensor at the run's first call")
            return False
        dummies = [
            torch.empty(shape, dtype=first.dtype if floating else getattr(torch, dtype), device=first.device)
            for shape, dtype, floating in zip(
                spec.loose_input_shapes, spec.loose_input_dtypes, spec.loose_input_floating
            )
        ]
        return bool(self.run(spec, dummies, torch.Size(spec.loose_output_shape), probe=True))

    def _finish(self, spec: PatchSpec) -> Any:
        self.open = None
        got = self.inputs.pop(spec.region, {})
        tensors = [got[k] for k in range(len(spec.loose_reads))]
        out = self.run(spec, tensors, torch.Size(spec.loose_output_shape))
        if out is None:
            raise LooseDiverged(f"{spec.region}: the op refused inputs it was checked to take")
        return out


def _device(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.device:
    first = next(iter(tensors_of((args, kwargs))), None)
    return first.device if first is not None else torch.device("cpu")


def _placeholders(spec: PatchSpec, pos: int, device: torch.device) -> Any:
    """What the traced call at ``pos`` returned, as uninitialised tensors of its shapes, strides and dtypes."""
    metas = spec.loose_placeholders[pos - spec.loose_start]
    made = [
        torch.empty_strided(shape, stride, dtype=getattr(torch, dtype), device=device) for shape, stride, dtype in metas
    ]
    return made[0] if not spec.loose_tuples[pos - spec.loose_start] else tuple(made)
