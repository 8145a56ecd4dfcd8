"""A convolution, 1-D to 3-D, strided, padded, dilated and grouped, and an elementwise chain after it:
``y = chain(conv(x, w) + b, p)``.

Every convolution is the 3-D one: ``x`` is [N, C_in, D, H, W], ``w`` the ``nn.Conv3d`` weight [C_out, C_in / G,
KD, KH, KW], ``b`` is [C_out]; ``y`` is [N, C_out, OD, OH, OW] in the inputs' dtype. A 1-D or 2-D problem is this
task with unit depth (and height): :data:`UNIT_DIMS_AT` lets the matcher view [N, C, L] as [N, C, 1, 1, L] and
the output back. The kernel sizes and the group count come from ``w``'s shape; the rest of the
hyperparameters are a member's template constants (``STRIDE_D``... ``PAD_*``, ``DIL_*``), read by
:func:`propose_members` from the problem's own ``nn.ConvNd`` module; the numbers decide, as for every member.

Transposed convolutions are the task ``conv_transpose`` (kernels/tasks/conv_transpose.py, this module's
helpers), the same templates with ``TRANSPOSED = True``: its weight is [C_in, C_out / G, k...], so its shape keys
sit elsewhere (with a bias, C_out is w's dim 0 here and b's there; one task cannot name both).

A problem without a bias (KernelBench's level-1 convolutions pass ``bias=False``) is this task with ``b`` zero
(:data:`FILL_INPUTS`).

The chain (KernelBench level 2's convolution + activations) is linear_chain's: up to 6 steps of
kernels/fx_chain.py ``STEP_OPS`` applied to the fp32 ``z = conv(x, w) + b`` before the one rounding, the template
constants ``OP1, A1, B1, ...`` (``"none"``: no step). A step may also read ``p`` [C_out, 1, 1, 1], a parameter
per output channel (``PARAM_OPS``: ``x + self.bias`` with the bias [C_out, 1, 1]); a problem without one is this
task with ``p`` zero, which a chain without such a step never reads. :func:`propose_members` reads the chain
from the problem's forward after its one ``nn.ConvNd`` (kernels/fx_chain.py ``read_chain``).

A chain may also reduce over the channels (min, max, sum, mean, logsumexp with keepdim: y is [N, 1, OD, OH,
OW]) or take their softmax, or pool globally (``spatial_mean``: y is [N, C_out, 1, 1, 1], then [N, 1, 1, 1, 1]
after a reduction over the channels): kernels/channel_steps.py, computed by the template `channel_rows` alone
(its constants ``RED_AT``, ``SOFTMAX_AT``, ``POOL_AT``).

Example::

    >>> from warpforge.kernels.tasks import conv
    >>> name, ref, constants = conv.member(conv.Hyper(stride=(1, 2, 2), padding=(0, 1, 1), groups=4))
    >>> name, constants["STRIDE_H"], constants["TRANSPOSED"]
    ('conv3d(s=1,2,2 p=0,1,1)', 2, False)
    >>> name, ref, constants = conv.member(conv.Hyper(), (("relu", 0.0, 0.0), ("add_p", 0.0, 0.0)))
    >>> name, constants["OP2"], constants["OP3"]
    ('conv3d()>relu>add_p', 'add_p', 'none')
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from warpforge.kernels.channel_steps import apply_channel_steps, channel_constants
from warpforge.kernels.fx_chain import Step, apply_steps, checked, read_chain, step_constants, step_name
from warpforge.kernels.taskdef import Member

NAME = "conv"
KIND = "convolution"
DESCRIPTION = (
    "y = chain(conv(x, w) + b, p): a convolution (1-D, 2-D or 3-D as 3-D with unit dims; stride, "
    "padding, dilation and groups as a member's constants) and up to 6 elementwise steps, p a "
    "per-channel parameter, a reduction or softmax over the channels or a global average pooling among "
    "them; fp32 accumulation, output in the input dtype"
)

# The task's own shapes: a 3x3x3 convolution (make_inputs' kernel). G is the group count; the task's shapes use 1.
# KernelBench level 1's 3-D problems (16 x 3 -> 64 channels at 64^3) and a ResNet-like 2-D layer as unit depth.
SHAPES: list[dict[str, int]] = [
    {"N": 16, "C_IN": 3, "C_OUT": 64, "D": 64, "H": 64, "W": 64, "G": 1},
    {"N": 16, "C_IN": 64, "C_OUT": 64, "D": 3, "H": 128, "W": 128, "G": 1},
]

# 1s, primes and non-multiples of every tile (16..128), all tiny: the interpreter computes ~30 output positions
# x channels x 27 taps per program step.
CHECK_SHAPES: list[dict[str, int]] = [
    {"N": 1, "C_IN": 1, "C_OUT": 1, "D": 3, "H": 3, "W": 3, "G": 1},
    {"N": 2, "C_IN": 5, "C_OUT": 17, "D": 3, "H": 7, "W": 11, "G": 1},
    {"N": 1, "C_IN": 19, "C_OUT": 37, "D": 4, "H": 5, "W": 13, "G": 1},
]

SMALL_SHAPES: list[dict[str, int]] = [{"N": 2, "C_IN": 16, "C_OUT": 32, "D": 8, "H": 16, "W": 16, "G": 1}]

# With the group count 4, w's channel dims (C_IN / 4 = 6, C_OUT / 4 = 11) are no keys, so a grouped problem's w
# (in_channels / groups wide) agrees with the keys; distinct primes are refused (G must divide the channels).
MATCH_PROBES: list[dict[str, int]] = [{"N": 2, "C_IN": 24, "C_OUT": 44, "D": 5, "H": 7, "W": 9, "G": 4}]

DTYPES: list[torch.dtype] = [torch.float32, torch.float16, torch.bfloat16]

# [N, C, L] is [N, C, 1, 1, L] and [N, C, H, W] is [N, C, 1, H, W] (evaluator/judge/matching.py).
UNIT_DIMS_AT = 2
# A problem without the bias (input 2) is this task with a zero bias; one without a chain parameter (input 3,
# the problem's own ``self.bias`` of level 2), with a zero p that its chain never reads.
FILL_INPUTS = {2: 0.0, 3: 0.0}

_KERNEL = 3  # make_inputs' kernel size in each dim


Triple = tuple[int, int, int]


@dataclass(frozen=True)
class Hyper:
    """A member's hyperparameters, each (depth, height, width); ``groups`` as read from a module (the member's
    name and constants leave it out: the shapes imply it)."""

    transposed: bool = False
    stride: Triple = (1, 1, 1)
    padding: Triple = (0, 0, 0)
    dilation: Triple = (1, 1, 1)
    output_padding: Triple = (0, 0, 0)
    groups: int = 1

    @property
    def name(self) -> str:
        parts = [
            f"{tag}={','.join(map(str, v))}"
            for tag, v, unit in (
                ("s", self.stride, 1),
                ("p", self.padding, 0),
                ("d", self.dilation, 1),
                ("op", self.output_padding, 0),
            )
            if any(e != unit for e in v)
        ]
        head = "conv_transpose3d" if self.transposed else "conv3d"
        return f"{head}({' '.join(parts)})"

    def constants(self) -> dict[str, bool | int]:
        out: dict[str, bool | int] = {"TRANSPOSED": self.transposed}
        for tag, value in (
            ("STRIDE", self.stride),
            ("PAD", self.padding),
            ("DIL", self.dilation),
            ("OUT_PAD", self.output_padding),
        ):
            out.update({f"{tag}_{d}": int(v) for d, v in zip("DHW", value)})
        return out


def groups_of(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, transposed: bool) -> int:
    """The group count the shapes imply (w's channel dim is C_in / G, or transposed C_out / G with b [C_out])."""
    return (b.shape[0] if transposed else x.shape[1]) // w.shape[1]


def conv(
    x: torch.Tensor,
    w: torch.Tensor,
    b: torch.Tensor,
    hyper: Hyper,
    steps: tuple[Step, ...] = (),
    p: torch.Tensor | None = None,
) -> torch.Tensor:
    """``hyper``'s convolution of 5-D inputs by torch, its group count from the shapes, then ``steps`` (p the
    parameter their ``*_p`` steps read), in fp32 (float64 for float64 inputs), rounded to x's dtype."""
    ct = torch.promote_types(x.dtype, torch.float32)
    x2, w2, b2 = x.to(ct), w.to(ct), b.to(ct)
    groups = groups_of(x, w, b, hyper.transposed)
    if hyper.transposed:
        y = F.conv_transpose3d(x2, w2, b2, hyper.stride, hyper.padding, hyper.output_padding, groups, hyper.dilation)
    else:
        y = F.conv3d(x2, w2, b2, hyper.stride, hyper.padding, hyper.dilation, groups)
    if steps:
        apply = apply_channel_steps if channel_constants(steps) else apply_steps
        y = apply(y, steps, None if p is None else p.to(ct))
    return y.to(x.dtype)


def member(
    hyper: Hyper, steps: tuple[Step, ...] = ()
) -> tuple[str, Callable[..., torch.Tensor], dict[str, str | float | bool | int]]:
    """The family member computing ``hyper``'s convolution and then ``steps``: (name, reference, template
    constants). The group count is no constant: the shapes imply it, and a depthwise problem's changes with its
    channel count."""
    if hyper.groups < 1 or min(hyper.stride) < 1 or min(hyper.dilation) < 1 or min(hyper.padding) < 0:
        raise ValueError(f"not a convolution's hyperparameters: {hyper}")
    if steps:
        steps = checked(steps)
    # a reduction or softmax over the channels: constants only the `channel_rows` template has
    rows = channel_constants(steps)

    def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return conv(x, w, b, hyper, steps, p)

    constants: dict[str, str | float | bool | int] = {**hyper.constants(), **step_constants(steps), **rows}
    return ">".join([hyper.name, *map(step_name, steps)]), reference, constants


MEMBERS = [member(Hyper())]
DEFAULT_MEMBER = "conv3d()"
reference = MEMBERS[0][1]


def inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str, transposed: bool
) -> tuple[torch.Tensor, ...]:
    """x, w (in the transposed layout [C_in, C_out / G, k...] when ``transposed``), b and p for ``shape``."""
    n, c_in, c_out, g = shape["N"], shape["C_IN"], shape["C_OUT"], shape["G"]
    if c_in % g or c_out % g:
        raise ValueError(f"the group count {g} must divide C_IN {c_in} and C_OUT {c_out}")
    gen = torch.Generator().manual_seed(seed)
    # each output sums C_in / G channels x 27 taps (the stride-1 transposed member too)
    fan_in = c_in // g * _KERNEL**3
    # x ~ N(0, 1), w ~ N(0, 1/fan_in), b ~ N(0, 0.5): every output ~N(0, 1.25) whatever the sizes, and a dropped
    # bias is off by ~45% of the output's RMS
    x = torch.randn(n, c_in, shape["D"], shape["H"], shape["W"], generator=gen)
    rows, cols = (c_in, c_out // g) if transposed else (c_out, c_in // g)
    w = torch.randn(rows, cols, _KERNEL, _KERNEL, _KERNEL, generator=gen) / math.sqrt(fan_in)
    b = 0.5 * torch.randn(c_out, generator=gen)
    # p of either sign and 0.5 to 1.5 in size: a step adding it moves z by ~its RMS, one multiplying flips signs,
    # and one dividing by it stays finite
    p = (0.5 + torch.rand(c_out, 1, 1, 1, generator=gen)) * torch.randn(c_out, 1, 1, 1, generator=gen).sign()
    return tuple(t.to(dtype).to(device) for t in (x, w, b, p))


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    return inputs(shape, dtype, seed, device, transposed=False)


def scaled_inputs(
    make: Callable[..., tuple[torch.Tensor, ...]], shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """``large`` and ``tiny``: x and b times 1e4 and 1e-4 (times 100 in half precision, 65504 being fp16's
    largest): products and sums far from 1, where a kernel rounding its terms to tf32 shows ~1e-3 errors (and a
    chain's sigmoid or softplus written without its stable form overflows)."""
    x, w, b, p = make(shape, torch.float32, seed, "cpu")
    big = 1e4 if dtype == torch.float32 else 100.0
    sets = {"large": (x * big, w, b * big, p), "tiny": (x * 1e-4, w, b * 1e-4, p)}
    return {name: tuple(t.to(dtype=dtype, device=device) for t in inputs) for name, inputs in sets.items()}


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    return scaled_inputs(make_inputs, shape, dtype, seed, device)


def out_positions(shape: dict[str, int], transposed: bool) -> int:
    """Output positions of the task's own member (stride 1, no padding, a 3x3x3 kernel) per image and channel."""
    grow = _KERNEL - 1 if transposed else 1 - _KERNEL
    return math.prod(max(shape[k] + grow, 0) for k in "DHW")


def flops_of(shape: dict[str, int], transposed: bool) -> float:
    # a multiply and an add per tap and input channel of a group, per output element (the transposed one
    # counted as the gather computes it: every tap)
    outputs = shape["N"] * shape["C_OUT"] * out_positions(shape, transposed)
    return 2.0 * outputs * (shape["C_IN"] // shape["G"]) * _KERNEL**3


def bytes_of(shape: dict[str, int], dtype: torch.dtype, transposed: bool) -> float:
    # x, w, b and p read once, y written once
    size = torch.tensor([], dtype=dtype).element_size()
    x = shape["N"] * shape["C_IN"] * shape["D"] * shape["H"] * shape["W"]
    w = shape["C_OUT"] * (shape["C_IN"] // shape["G"]) * _KERNEL**3
    y = shape["N"] * shape["C_OUT"] * out_positions(shape, transposed)
    return float((x + w + 2 * shape["C_OUT"] + y) * size)


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    return flops_of(shape, transposed=False)


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    return bytes_of(shape, dtype, transposed=False)


_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)


def _as_3d(value: tuple[int, ...] | int, rank: int, unit: int) -> Triple:
    """A 1-D or 2-D module's per-dim value as (depth, height, width), the missing leading dims ``unit``."""
    values = (value,) * rank if isinstance(value, int) else tuple(int(v) for v in value)
    full = (unit,) * (3 - rank) + values
    return (full[0], full[1], full[2])


def hyper_of(module: nn.Module) -> Hyper | None:
    """The hyperparameters of one ``nn.ConvNd`` or ``nn.ConvTransposeNd``; None for another module, a padding
    mode other than zeros, or a padding this task cannot express (``"same"`` with an odd total)."""
    if not isinstance(module, _CONVS) or module.padding_mode != "zeros":
        return None
    rank = len(module.kernel_size)
    padding = module.padding
    if isinstance(padding, str):  # "valid" is none; "same" pads (k - 1) * dil / 2 on each side where that is whole
        totals = [0 if padding == "valid" else d * (k - 1) for k, d in zip(module.kernel_size, module.dilation)]
        if any(t % 2 for t in totals):
            return None
        padding = tuple(t // 2 for t in totals)
    transposed = isinstance(module, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d))
    return Hyper(
        transposed=transposed,
        stride=_as_3d(module.stride, rank, 1),
        padding=_as_3d(padding, rank, 0),
        dilation=_as_3d(module.dilation, rank, 1),
        output_padding=_as_3d(module.output_padding, rank, 0) if transposed else (0, 0, 0),
        groups=int(module.groups),
    )


def proposals(model: nn.Module, transposed: bool) -> list[Member]:
    """The member of the model's one convolution module when it is (or is not) transposed, with the elementwise
    chain its forward applies after it (kernels/fx_chain.py); none when it has no convolution or several, or a
    chain this task cannot compute. That its forward applies the module to the input is for the numbers to
    confirm (a forward fx cannot trace proposes the convolution alone)."""
    convs = [m for m in model.modules() if isinstance(m, _CONVS)]
    if len(convs) != 1:
        return []
    hyper = hyper_of(convs[0])
    if hyper is None or hyper.transposed != transposed:
        return []
    try:
        chain = read_chain(model, _CONVS)
    except Exception:  # noqa: BLE001 - a forward torch.fx cannot trace (data-dependent control flow)
        chain = None
    if chain is None or chain.head is not convs[0]:
        return [Member(*member(hyper))]
    try:
        return [Member(*member(hyper, chain.steps))]
    except ValueError:  # a pooling or a second reduction over the channels, a chain past 6 steps
        return []


def propose_members(model: nn.Module) -> list[Member]:
    return proposals(model, transposed=False)
