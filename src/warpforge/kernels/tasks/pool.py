"""Max and average pooling over the three trailing dims of x [N, C, D, H, W], one family: the window's size,
stride, padding and dilation per dim, ceil_mode, and (average) count_include_pad and divisor_override are the
member's; y is [N, C, OD, OH, OW] in the input's dtype.

A 1-D or 2-D pooling is this task with unit leading spatial dims (kernel 1, stride 1, no padding there): a
KernelBench ``MaxPool1d`` problem's [N, C, L] is viewed as [N, C, 1, 1, L] by the matcher's unit-dim adapter
(evaluator/judge/match_adapters.unit_layouts), its output read back off the task's. :func:`propose_members`
builds the member from the problem's ``nn.MaxPoolNd``/``nn.AvgPoolNd`` (the numbers then decide); a max pooling
that returns its indices is refused (the templates return values only). Max pooling pads with -inf (a padded
tap never wins), as torch does; average pooling divides by the window's count as torch's avg_pool3d does
(padded taps counted or not, the window cut at the padded input's end either way, or divisor_override).

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import pool
    >>> name, ref, constants = pool.member("max", kernel=(1, 1, 2), stride=(1, 1, 2))
    >>> name, constants["KW"], constants["OP"]
    ('max(k=1x1x2,s=1x1x2,p=0x0x0,d=1x1x1)', 2, 'max')
    >>> ref(torch.tensor([1.0, 3.0, 2.0, 0.0]).view(1, 1, 1, 1, 4)).flatten().tolist()
    [3.0, 2.0]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from warpforge.kernels.taskdef import Member

NAME = "pool"
KIND = "pooling"
DESCRIPTION = (
    "y = max_pool3d / avg_pool3d of x [N, C, D, H, W] (1-D and 2-D as unit dims): kernel, stride, "
    "padding, dilation, ceil_mode, count_include_pad and divisor_override per member; fp32 sums"
)

# KernelBench level 1's pooling benchmarks as this task sees them: 43/46 (3-D), 42/45 (2-D as D = 1) and 41/44
# (1-D as D = H = 1), plus an image network's 2x2 max pool.
SHAPES: list[dict[str, int]] = [
    {"N": 16, "C": 32, "D": 128, "H": 128, "W": 128},
    {"N": 32, "C": 64, "D": 1, "H": 512, "W": 512},
    {"N": 64, "C": 192, "D": 1, "H": 1, "W": 65536},
    {"N": 16, "C": 64, "D": 1, "H": 2048, "W": 2048},
]

# Odd and prime sizes, every spatial size at least 3 (every table member's window fits), each past a 3-wide
# window with a stride of 2 and a ragged last tile; <= 6k elements so the interpreter stays fast.
CHECK_SHAPES: list[dict[str, int]] = [
    {"N": 1, "C": 1, "D": 3, "H": 3, "W": 7},
    {"N": 2, "C": 3, "D": 5, "H": 7, "W": 11},
    {"N": 1, "C": 2, "D": 3, "H": 13, "W": 37},
    {"N": 3, "C": 1, "D": 3, "H": 5, "W": 67},
]

DTYPES: list[torch.dtype] = [torch.float32, torch.float16, torch.bfloat16]

Triple = tuple[int, int, int]
_DIMS = ("D", "H", "W")


def _triple(v: int | tuple[int, ...], rank: int, fill: int) -> Triple:
    """A module's per-dim value (an int or one per spatial dim of a ``rank``-D pooling) as (D, H, W), the
    dims the pooling has not filled with ``fill`` (a unit kernel or stride, no padding)."""
    values = (v,) * rank if isinstance(v, int) else tuple(int(e) for e in v)
    if len(values) != rank:
        raise ValueError(f"expected {rank} values, got {v!r}")
    out = (fill,) * (3 - rank) + values
    return int(out[0]), int(out[1]), int(out[2])


def member(
    op: str,
    kernel: Triple,
    stride: Triple | None = None,
    padding: Triple = (0, 0, 0),
    dilation: Triple = (1, 1, 1),
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor: int = 0,
) -> tuple[str, Callable[[torch.Tensor], torch.Tensor], dict[str, str | int | bool]]:
    """The member pooling with these hyperparameters: (name, reference, template constants). ``divisor`` 0 is
    the window's count (average pooling without divisor_override); average pooling has no dilation."""
    stride = stride or kernel
    if op not in ("max", "avg") or (op == "avg" and dilation != (1, 1, 1)):
        raise ValueError(f"op is max or avg (avg without dilation), got {op} with dilation {dilation}")
    if any(p > (d * (k - 1) + 1) // 2 for k, p, d in zip(kernel, padding, dilation)):
        raise ValueError(f"padding {padding} over half the window {kernel} (dilation {dilation})")

    def reference(x: torch.Tensor) -> torch.Tensor:
        v = x.to(torch.promote_types(x.dtype, torch.float32))
        if op == "max":
            y = F.max_pool3d(v, kernel, stride, padding, dilation, ceil_mode=ceil_mode)
        else:
            y = F.avg_pool3d(
                v,
                kernel,
                stride,
                padding,
                ceil_mode=ceil_mode,
                count_include_pad=count_include_pad,
                divisor_override=divisor or None,
            )
        return y.to(x.dtype)

    constants: dict[str, str | int | bool] = {"OP": op}
    for name, values in (("K", kernel), ("S", stride), ("P", padding), ("DL", dilation)):
        constants.update({f"{name}{d}": int(v) for d, v in zip(_DIMS, values)})
    constants.update({"CEIL": bool(ceil_mode), "COUNT_PAD": bool(count_include_pad), "DIVISOR": int(divisor)})

    def x3(t: Triple) -> str:
        return "x".join(map(str, t))

    name = f"{op}(k={x3(kernel)},s={x3(stride)},p={x3(padding)},d={x3(dilation)}"
    name += ",ceil" if ceil_mode else ""
    name += ",no_pad_count" if op == "avg" and not count_include_pad else ""
    name += f",divisor={divisor}" if divisor else ""
    return name + ")", reference, constants


# The table (a module the matcher cannot read): an image network's 2x2 max and average pools, and a 3-D 2x2x2
# max pool; every other member is proposed from the problem's own module.
MEMBERS = [
    member("max", (1, 2, 2)),
    member("avg", (1, 2, 2)),
    member("max", (2, 2, 2)),
    member("max", (1, 3, 3), (1, 2, 2), (0, 1, 1)),
]
DEFAULT_MEMBER = MEMBERS[0][0]
reference = MEMBERS[0][1]


def output_size(size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool) -> int:
    """torch's pooling output size: the last window starts inside the input or its left padding."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor]:
    # N(0, 1): both signs, so a max that pads with 0 instead of -inf is wrong wherever a window's real
    # taps are all negative.
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape["N"], shape["C"], shape["D"], shape["H"], shape["W"], generator=gen)
    return (x.to(dtype=dtype, device=device),)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor]]:
    """``negative``: every value below -1, where a max padded with 0 (not -inf) returns 0 at the borders;
    ``offset``: 1000 + randn, whose average summed in fp16 is off by its sum's spacing (0.5 at 1000 x 8)."""
    (x,) = make_inputs(shape, torch.float32, seed + 1, "cpu")
    sets = {"negative": -1.0 - x.abs(), "offset": 1000.0 + x}
    return {name: (t.to(dtype=dtype, device=device),) for name, t in sets.items()}


def _out_elems(shape: dict[str, int]) -> int:
    # The default member's output (shapes do not carry the member): a 2x2 window, stride 2, over H and W.
    return shape["N"] * shape["C"] * shape["D"] * max(1, shape["H"] // 2) * max(1, shape["W"] // 2)


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # One compare or add per window tap: 4 per output of the default 2x2 member.
    return 4.0 * _out_elems(shape)


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # x read once (windows overlap in cache, not in DRAM traffic), y written once.
    x = shape["N"] * shape["C"] * shape["D"] * shape["H"] * shape["W"]
    return float((x + _out_elems(shape)) * dtype.itemsize)


def _pool_module(model: torch.nn.Module) -> torch.nn.Module | None:
    """The model's one pooling module (MaxPool1d..3d or AvgPool1d..3d), or None."""
    kinds = (
        torch.nn.MaxPool1d,
        torch.nn.MaxPool2d,
        torch.nn.MaxPool3d,
        torch.nn.AvgPool1d,
        torch.nn.AvgPool2d,
        torch.nn.AvgPool3d,
    )
    found = [m for m in model.modules() if isinstance(m, kinds)]
    return found[0] if len(found) == 1 else None


def propose_members(model: torch.nn.Module) -> list[Member]:
    """The member the model's one pooling module computes, read from its attributes; none for any other model
    or for a max pooling that returns indices (the templates return values only)."""
    found = _pool_module(model)
    if found is None:
        return []
    mod: Any = found  # the pooling classes' attributes are ints or tuples, typed loosely by nn.Module
    rank = int(type(mod).__name__[-2])  # MaxPool2d -> 2
    kernel = _triple(mod.kernel_size, rank, 1)
    stride = _triple(mod.stride if mod.stride is not None else mod.kernel_size, rank, 1)
    padding = _triple(mod.padding, rank, 0)
    if isinstance(mod, (torch.nn.MaxPool1d, torch.nn.MaxPool2d, torch.nn.MaxPool3d)):
        if mod.return_indices:
            return []
        dilation = _triple(mod.dilation, rank, 1)
        return [Member(*member("max", kernel, stride, padding, dilation, bool(mod.ceil_mode)))]
    divisor = getattr(mod, "divisor_override", None) or 0
    return [
        Member(
            *member(
                "avg",
                kernel,
                stride,
                padding,
                (1, 1, 1),
                bool(mod.ceil_mode),
                bool(mod.count_include_pad),
                int(divisor),
            )
        )
    ]
