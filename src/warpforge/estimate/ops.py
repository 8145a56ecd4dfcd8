"""The ops the cost model prices: one aten op of a forward with its FLOPs, bytes and argument shapes.

optimize's trace (optimize/trace.py) records each op's FLOPs and bytes; :class:`ShapeRecorder`, a dispatch mode
around it, records each op's argument shapes in the same order, and :func:`with_shapes` joins the two. The
walk itself (a target on meta tensors) is optimize/estimate_target.py's.

Example::

    >>> with ShapeRecorder() as shapes:                                         # doctest: +SKIP
    ...     trace = trace_step(model, inputs, None, peaks)
    >>> ops = with_shapes([WalkedOp(o.op, o.flops, o.bytes, o.dtype, o.module, o.call) for o in trace.ops],
    ...                   shapes.seen)                                            # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

# Ops a fake or meta walk records that launch no kernel (metadata reads, allocation, in-place shape changes).
METADATA = {
    "device",
    "dim",
    "size",
    "stride",
    "numel",
    "is_contiguous",
    "resize_",
    "lift_fresh_copy",
    "zeros_like",
    "empty_like",
    "new_empty",
    "new_empty_strided",
    "_to_copy_meta",
}


@dataclass(frozen=True)
class WalkedOp:
    """One aten op of the forward, as the cost model sees it."""

    op: str
    flops: float
    bytes: float
    dtype: torch.dtype
    module: str  # the innermost module's path ("" for the root)
    call: str  # the functional call it runs in, e.g. "conv::conv_transpose2d#0" ("" for none)
    shapes: tuple[tuple[int, ...], ...] = ()  # its tensor arguments' shapes, in order
    flags: tuple[Any, ...] = ()  # its non-tensor arguments (a convolution's transposed flag and groups)
    out_numel: int = 0  # elements of its first output (a reduction's rows)


class ShapeRecorder(TorchDispatchMode):
    """Each aten op's argument shapes, in dispatch order (trace_step's records carry FLOPs and bytes only)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, tuple[tuple[int, ...], ...], tuple[Any, ...], int]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        flat = tree_flatten((args, kwargs or {}))[0]
        shapes = tuple(tuple(int(d) for d in t.shape) for t in flat if isinstance(t, torch.Tensor))
        flags = tuple(v for v in flat if isinstance(v, (bool, int)) and not isinstance(v, torch.Tensor))
        out = func(*args, **(kwargs or {}))
        first = next((t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)), None)
        self.seen.append((func._overloadpacket.__name__, shapes, flags, int(first.numel()) if first is not None else 0))
        return out


def with_shapes(
    ops: list[WalkedOp], seen: list[tuple[str, tuple[tuple[int, ...], ...], tuple[Any, ...], int]]
) -> list[WalkedOp]:
    # both modes see every op in the same order; trace_step keeps a subset (no views, no allocation)
    out, at = [], 0
    for o in ops:
        while at < len(seen) and seen[at][0] != o.op:
            at += 1
        if at == len(seen):
            out.append(o)
            continue
        _, shapes, flags, numel = seen[at]
        out.append(WalkedOp(o.op, o.flops, o.bytes, o.dtype, o.module, o.call, shapes, flags, numel))
        at += 1
    return out
