"""A transposed convolution, 1-D to 3-D, strided, padded, dilated, output-padded and grouped:
``y = conv_transpose(x, w) + b``.

``x`` is [N, C_in, D, H, W], ``w`` the ``nn.ConvTranspose3d`` weight [C_in, C_out / G, KD, KH, KW], ``b`` is
[C_out]; ``y`` is [N, C_out, OD, OH, OW] with OD = (D - 1) * stride - 2 * pad + dil * (KD - 1) + out_pad + 1, in
the inputs' dtype. The task ``conv`` (kernels/tasks/conv.py) with the other weight layout: its helpers, its
epilogue chain and parameter ``p``, its templates with ``TRANSPOSED = True`` (kernels/members.py
``DERIVED_TEMPLATES``); a 1-D or 2-D problem is the 3-D task with unit dims there too.

Example::

    >>> from warpforge.kernels.tasks import conv
    >>> conv.member(conv.Hyper(transposed=True, stride=(2, 2, 2), output_padding=(1, 1, 1), groups=2))[0]
    'conv_transpose3d(s=2,2,2 op=1,1,1)'
"""

from __future__ import annotations

import torch
from torch import nn

from warpforge.kernels.taskdef import Member
from warpforge.kernels.tasks import conv

NAME = "conv_transpose"
KIND = "convolution"
DESCRIPTION = (
    "y = chain(conv_transpose(x, w) + b, p): a transposed convolution (1-D, 2-D or 3-D as 3-D with unit "
    "dims; stride, padding, dilation, output padding and groups as a member's constants) and up to 6 "
    "elementwise steps, p a per-channel parameter, a reduction or softmax over the channels or a global "
    "average pooling among them; fp32 accumulation, output in the input dtype"
)

# KernelBench level 1's 3-D transposed problems (16 x 32 -> 16 channels at 16 x 32 x 64) and a 2-D decoder
# layer as unit depth.
SHAPES: list[dict[str, int]] = [
    {"N": 16, "C_IN": 32, "C_OUT": 16, "D": 16, "H": 32, "W": 64, "G": 1},
    {"N": 16, "C_IN": 64, "C_OUT": 32, "D": 1, "H": 128, "W": 128, "G": 1},
]
CHECK_SHAPES = conv.CHECK_SHAPES
SMALL_SHAPES = conv.SMALL_SHAPES
# One group, unlike conv's probe: w's dim 1 is then C_OUT, the dim a bias-free problem's zero bias is sized from
# (matching.py's fills; C_OUT sits in no other passed input). A grouped transposed problem without a bias (w's
# dim 1 is C_OUT / G) or with one (C_OUT / G there, C_OUT in b) is then no match.
MATCH_PROBES: list[dict[str, int]] = [{"N": 2, "C_IN": 24, "C_OUT": 44, "D": 5, "H": 7, "W": 9, "G": 1}]
DTYPES = conv.DTYPES
UNIT_DIMS_AT = conv.UNIT_DIMS_AT
FILL_INPUTS = conv.FILL_INPUTS

MEMBERS = [conv.member(conv.Hyper(transposed=True))]
DEFAULT_MEMBER = "conv_transpose3d()"
reference = MEMBERS[0][1]


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    return conv.inputs(shape, dtype, seed, device, transposed=True)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    return conv.scaled_inputs(make_inputs, shape, dtype, seed, device)


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    return conv.flops_of(shape, transposed=True)


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    return conv.bytes_of(shape, dtype, transposed=True)


def propose_members(model: nn.Module) -> list[Member]:
    return conv.proposals(model, transposed=True)
