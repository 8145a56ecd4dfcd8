"""A convolution's chain that reduces or normalizes over the output channels (KernelBench level 2's
``torch.min(conv(x), dim=1, keepdim=True)[0]``, ``torch.softmax(conv(x), dim=1)``) or pools globally
(``AdaptiveAvgPool2d(1)``, ``torch.mean(x, dim=(2, 3), keepdim=True)``): which chains the conv family computes
that way, the template constants that say where, and the reference.

kernels/fx_chain.py reads ``dim=1`` reductions and softmaxes as its ``row_*`` steps (a Linear's output row is a
conv output pixel's channels); here they act on dim 1 of the [N, C, D, H, W] output. Only the conv template
`channel_rows` (kernels/templates/conv/channel_rows.py), whose programs own every channel of their output
pixels, computes them and a global average pooling (``spatial_mean``), through the constants ``RED_AT``,
``SOFTMAX_AT`` and ``POOL_AT`` that every such member sets (the other conv templates lack them, so they are no
templates of these members).

Example::

    >>> channel_constants((("mul", 2.0, 0.0), ("row_min", 1.0, 0.0)))
    {'RED_AT': 2, 'SOFTMAX_AT': 0, 'POOL_AT': 0}
    >>> channel_constants((("spatial_mean", 0.0, 0.0), ("add_p", 0.0, 0.0), ("row_logsumexp", 1.0, 0.0)))
    {'RED_AT': 3, 'SOFTMAX_AT': 0, 'POOL_AT': 1}
    >>> channel_constants((("relu", 0.0, 0.0),))
    {}
"""

from __future__ import annotations

import torch

from warpforge.kernels.fx_chain import PARAM_OPS, REDUCE_OPS, ROW_OPS, Step, apply_steps


def channel_constants(steps: tuple[Step, ...]) -> dict[str, int]:
    """The template constants of a chain with a reduction or softmax over the channels or a global average
    pooling (the 1-based step, 0: none); {} for an elementwise chain. ValueError for one no template computes."""
    if any(op == "spatial_mean" for op, _, _ in steps):
        return _pooled(steps)
    return _rows(steps)


def _rows(steps: tuple[Step, ...]) -> dict[str, int]:
    """``RED_AT`` and ``SOFTMAX_AT`` (``POOL_AT`` 0) of a chain with one reduction or softmax over the
    channels. Refused: a pooling, two row steps, a reduction without keepdim (the problem's
    [N, H, W] has no unit dim where the task's output has its channel), a step after the row step that reads z,
    or p after a reduction (a per-channel parameter would broadcast the one value back over the channels)."""
    spots = [i for i, (op, _, _) in enumerate(steps) if op in ROW_OPS]
    if not spots:
        return {}
    at = spots[0]
    op, keep, _ = steps[at]
    after = steps[at + 1 :]
    reduce = op in REDUCE_OPS
    if len(spots) > 1 or not (reduce or op == "row_softmax") or (reduce and keep != 1.0):
        raise ValueError(
            f"a convolution's chain reduces (keepdim) or takes a softmax over its channels once, "
            f"and pools nothing: {steps}"
        )
    if any(s.endswith("_z") or (reduce and s in PARAM_OPS) for s, _, _ in after):
        raise ValueError(f"no step after a reduction over the channels reads z or a parameter: {steps}")
    return {"RED_AT": at + 1 if reduce else 0, "SOFTMAX_AT": 0 if reduce else at + 1, "POOL_AT": 0}


def _pooled(steps: tuple[Step, ...]) -> dict[str, int]:
    """``RED_AT``, ``SOFTMAX_AT`` (always 0) and ``POOL_AT`` of a chain with one global average pooling:
    elementwise steps before it, and after it elementwise steps on the [N, C]
    means with at most one reduction over the channels (KernelBench 42's logsumexp), no z."""
    at = next(i for i, (op, _, _) in enumerate(steps) if op == "spatial_mean")
    before, after = steps[:at], steps[at + 1 :]
    rows = _rows(tuple((op, a, b) for op, a, b in after if op != "spatial_mean"))
    if (
        any(op in ROW_OPS for op, _, _ in before)
        or any(op == "spatial_mean" or op.endswith("_z") for op, _, _ in after)
        or rows.get("SOFTMAX_AT")
    ):
        raise ValueError(
            f"a convolution's chain pools globally once, after elementwise steps, and then reads no "
            f"z and takes no softmax: {steps}"
        )
    red = rows.get("RED_AT", 0)
    return {"RED_AT": red and at + 1 + red, "SOFTMAX_AT": 0, "POOL_AT": at + 1}


def apply_channel_steps(y: torch.Tensor, steps: tuple[Step, ...], p: torch.Tensor | None) -> torch.Tensor:
    """The chain on a convolution's output y [N, C, D, H, W], its row steps over dim 1 (C), a global pooling
    over the others, and p [C, 1, 1, 1] per channel: the channels moved last, where fx_chain's steps reduce."""
    flat = None if p is None else p.reshape(-1)
    moved = y.movedim(1, -1)
    at = next((i for i, (op, _, _) in enumerate(steps) if op == "spatial_mean"), None)
    if at is not None:
        pooled = apply_steps(moved, steps[:at], flat) if at else moved
        moved = pooled.mean(tuple(range(1, pooled.dim() - 1)), keepdim=True)
        steps = steps[at + 1 :]
    return (apply_steps(moved, steps, flat) if steps else moved).movedim(-1, 1)
