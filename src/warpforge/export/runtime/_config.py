"""Tuned-configuration lookup for the exported ops (written by warpforge export; needs only torch).

Each op has one JSON file per GPU under ``configs/<op>/``: the general configuration (the campaign's
accepted winner on that GPU) and per measured (shape, dtype) the fastest configuration verified correct.
At run time the op asks :meth:`ConfigTable.select` with the call's shape, dtype and GPU name:

- on a GPU with a table: the nearest measured shape (Euclidean distance of log sizes, same dtype first)
  whose configuration the kernel's ``constraints`` accept, else that GPU's general configuration;
- on a GPU without a table: the general configuration of the GPU the winner was chosen on, with a
  one-time warning;
- ``None`` when no verified configuration fits the shape: the op then runs its PyTorch reference.

Example::

    >>> table = ConfigTable("rmsnorm", [{"gpu": "NVIDIA H100", "general": {"num_warps": 8}, "shapes": []}])
    >>> table.select({"M": 4096, "N": 4096}, "float16", "NVIDIA H100")
    {'num_warps': 8}
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_warned: set[str] = set()


def interpreting() -> bool:
    """True when Triton's interpreter runs the kernels on the CPU (``TRITON_INTERPRET=1`` before import)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def kernel_info(op: str) -> dict[str, Any]:
    return json.loads((HERE / "kernel_info.json").read_text())[op]


def shape_of(inputs: Sequence[Any], dims: Mapping[str, Sequence[int]]) -> dict[str, int]:
    """The task's named shape of one call: ``dims[name] = (input index, dim, rank when measured)``.

    A tensor with more dimensions than when it was measured folds its extra leading dimensions into the
    first one (``[batch, seq, hidden]`` counts ``batch * seq`` rows), as the launchers do with ``view(-1, n)``.
    """
    shape = {}
    for name, (index, dim, rank) in dims.items():
        if index < 0:  # a constant of the op (the same in every task shape), stored as its value
            shape[name] = int(dim)
            continue
        t = inputs[index]
        extra = t.dim() - rank
        if dim == 0 and extra > 0:
            shape[name] = int(math.prod(int(s) for s in t.shape[: extra + 1]))
        else:
            shape[name] = int(t.shape[dim + max(extra, 0)])
    return shape


def dtype_of(inputs: Sequence[Any]) -> str:
    for t in inputs:
        if hasattr(t, "is_floating_point") and t.is_floating_point():
            return str(t.dtype).removeprefix("torch.")
    return ""


def device_name(device: Any) -> str | None:
    """The GPU's name as the tables key it; ``None`` for the CPU (the interpreter or the reference)."""
    if getattr(device, "type", "cpu") != "cuda":
        return None
    import torch

    return str(torch.cuda.get_device_name(device))


# The constraint keys a GPU reports itself (torch's device properties).
_DEVICE_LIMITS = (("SMEM_BYTES", "shared_memory_per_block_optin"), ("REGISTERS_PER_SM", "regs_per_multiprocessor"))
_device_limits: dict[str, dict[str, int]] = {}


def limits_of(device: Any, info: Mapping[str, Any]) -> dict[str, int]:
    """What a kernel's ``constraints`` read besides the call's shape: the device's shared memory per block and
    registers per SM. A GPU says its own (read once per device: this runs on every call); on the CPU (the
    interpreter) they are the compile target's the op was exported for (``kernel_info.json``'s ``limits``)."""
    limits = {k: int(v) for k, v in dict(info.get("limits") or {}).items()}
    if getattr(device, "type", "cpu") != "cuda":
        return limits
    key = str(device)
    if key not in _device_limits:
        import torch

        props = torch.cuda.get_device_properties(device)
        _device_limits[key] = {k: int(getattr(props, a)) for k, a in _DEVICE_LIMITS if getattr(props, a, None)}
    return {**limits, **_device_limits[key]}


def _distance(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    keys = set(a) & set(b)
    return math.sqrt(sum((math.log(max(a[k], 1)) - math.log(max(b[k], 1))) ** 2 for k in keys))


class ConfigTable:
    """The tuned configurations of one op, by GPU; the first table is the GPU the winner was chosen on."""

    def __init__(self, op: str, tables: Sequence[Mapping[str, Any]], primary: str | None = None) -> None:
        self.op = op
        self.tables = {str(t["gpu"]).casefold(): t for t in tables}
        first = primary or (tables[0]["gpu"] if tables else "")
        self.primary = self.tables.get(str(first).casefold(), tables[0] if tables else {"gpu": "", "general": {}})
        self._cache: dict[tuple[Any, ...], dict[str, Any] | None] = {}

    @classmethod
    def load(cls, op: str, primary: str | None = None) -> ConfigTable:
        folder = HERE / "configs" / op
        tables = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
        return cls(op, tables, primary)

    def select(
        self,
        shape: Mapping[str, int],
        dtype: str,
        gpu: str | None,
        constraints: Callable[[dict[str, Any], dict[str, int]], bool] | None = None,
        limits: Mapping[str, int] | None = None,
    ) -> dict[str, Any] | None:
        """The configuration for one call; ``limits`` (:func:`limits_of`) join the shape ``constraints`` see."""
        key = (tuple(sorted(shape.items())), dtype, gpu, tuple(sorted((limits or {}).items())))
        if key not in self._cache:
            self._cache[key] = self._select(dict(shape), dtype, gpu, constraints, dict(limits or {}))
        return self._cache[key]

    @staticmethod
    def _nearest(table: Mapping[str, Any], shape: dict[str, int], dtype: str) -> list[dict[str, Any]]:
        entries = list(table.get("shapes", []))
        same = [e for e in entries if e["dtype"] == dtype] or entries
        order = sorted(same, key=lambda e: (_distance(shape, e["shape"]), json.dumps(e["shape"], sort_keys=True)))
        return [e["params"] for e in order]

    def _select(
        self,
        shape: dict[str, int],
        dtype: str,
        gpu: str | None,
        constraints: Callable[[dict[str, Any], dict[str, int]], bool] | None,
        limits: dict[str, int],
    ) -> dict[str, Any] | None:
        def fits(params: Mapping[str, Any]) -> bool:
            return constraints is None or bool(constraints(dict(params), {**shape, **limits}))

        table = self.primary if gpu is None else self.tables.get(gpu.casefold())
        if table is None:
            # An untimed export has no GPU table at all; its import already warned that it was never timed.
            if self.primary.get("timing_source") != "untimed":
                warn_once(
                    f"{self.op}:{gpu}",
                    f"{self.op}: no tuned configurations for {gpu} (tuned for: "
                    f"{', '.join(t['gpu'] for t in self.tables.values())}); using the general configuration "
                    f"chosen on {self.primary['gpu']}",
                )
            table = self.primary
            candidates = [table["general"]] + self._nearest(table, shape, dtype)
        else:
            candidates = self._nearest(table, shape, dtype) + [table["general"], self.primary["general"]]
        for params in candidates:
            if fits(params):
                return dict(params)
        warn_once(
            f"{self.op}:nofit:{sorted(shape.items())}",
            f"{self.op}: no verified configuration fits shape {shape}; running the PyTorch reference for it",
        )
        return None


def fresh(out: Any, inputs: Sequence[Any]) -> Any:
    """The reference's result with no output aliasing an input (a custom op must return new tensors)."""
    outs = out if isinstance(out, tuple) else (out,)
    ptrs = {t.data_ptr() for t in inputs if hasattr(t, "data_ptr")}
    fixed = tuple(o.clone() if o.data_ptr() in ptrs else o for o in outs)
    return fixed if isinstance(out, tuple) else fixed[0]


def cloned(out: Any) -> Any:
    """The reference's result copied, for the op bodies torch.compile traces (where aliasing cannot be checked)."""
    return tuple(o.clone() for o in out) if isinstance(out, tuple) else out.clone()
