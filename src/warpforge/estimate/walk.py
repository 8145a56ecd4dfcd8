"""A target's forward on meta tensors, op by op: what ``warpforge estimate`` prices.

The walk is ``optimize``'s own (optimize/trace.py: every aten op with its module, FLOPs and bytes, and the
functional call it runs in), run on tensors of the real sizes on the ``meta`` device: no weights or inputs
are allocated, so a KernelBench problem whose inputs are 8 GB is walked in seconds. Ops that only read
metadata (``device``, ``size``) are dropped; so is anything a meta tensor cannot tell (a data-dependent
``item()``), which is a :class:`WalkError` saying so.

Example::

    >>> ops = walk_forward(load_target("level1/1_Square_matrix_multiplication_.py"))   # doctest: +SKIP
    >>> ops[0].op, ops[0].flops                                                         # doctest: +SKIP
    ('mm', 137438953472.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from warpforge.errors import UsageError
from warpforge.evaluator.gpus import GpuPeaks
from warpforge.optimize.target import Target
from warpforge.optimize.trace import trace_step

# Ops a fake or meta walk records that launch no kernel (metadata reads, allocation, in-place shape changes).
_METADATA = {"device", "dim", "size", "stride", "numel", "is_contiguous", "resize_", "lift_fresh_copy",
             "zeros_like", "empty_like", "new_empty", "new_empty_strided", "_to_copy_meta"}

# trace_step prices each op on a roofline as it records it; the estimate prices them itself afterwards.
_UNPRICED = GpuPeaks("unpriced", 1.0, 1.0, 1.0)


class WalkError(UsageError):
    """The target's forward cannot run on meta tensors; the message says why."""


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


class _Shapes(TorchDispatchMode):
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


def _with_shapes(ops: list[WalkedOp], seen: list[tuple[str, tuple[tuple[int, ...], ...], tuple[Any, ...], int]]
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


def walk_forward(target: Target, seed: int = 0) -> list[WalkedOp]:
    """The target's eager forward, op by op, on meta tensors of its real sizes."""
    try:
        with torch.device("meta"), torch.no_grad():
            model, inputs = target.build(seed)
            with _Shapes() as shapes:
                trace = trace_step(model, inputs, None, _UNPRICED)
    except NotImplementedError as e:  # an op with no meta kernel, or one that reads values
        raise WalkError(f"{target.spec}: its forward cannot run on meta tensors "
                        f"({str(e).splitlines()[0][:160]})") from None
    except RuntimeError as e:
        raise WalkError(f"{target.spec}: its forward failed on meta tensors ({str(e).splitlines()[0][:160]})") from None
    ops = [WalkedOp(o.op, o.flops, o.bytes, o.dtype, o.module, o.call) for o in trace.ops if not o.backward]
    return [o for o in _with_shapes(ops, shapes.seen) if o.op not in _METADATA]
