"""Normalization over channel groups of x [N, C, H, W], one family: batch norm (running statistics, as an
``nn.BatchNorm`` module in eval mode computes; or the batch's own statistics per channel over N, H and W, as in
train mode), instance norm (per (n, c) over H and W) and group norm (per (n, group) over C/G channels and H, W);
then ``y = (x - mean) * rsqrt(var + eps) * weight + bias`` with the biased variance, in the input's dtype.

The inputs are a BatchNorm module's whole state after x: ``weight``, ``bias``, ``running_mean``,
``running_var`` [C] and ``num_batches_tracked`` (a 0-d int64, unused), in the order a by-path problem's
``state_dict`` passes them (kernels/kernelbench.py). By-path problems run their Model in eval mode, so a
KernelBench ``BatchNorm2d`` problem is the ``batch_norm`` member: the running statistics (0 and 1 at
construction), not the batch's. Group and instance norm read no running statistics: :data:`FILL_INPUTS` says a
problem without those inputs (``GroupNorm``'s x, weight, bias) or without any state at all (``InstanceNorm2d``
with affine=False) is this task with them filled with the identity values. :func:`propose_members` reads the
kind, group count and eps from the problem's module; the numbers decide. Statistics are fp32 whatever the input.

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import channel_norm
    >>> name, ref, constants = channel_norm.member("group", groups=2, eps=1e-5)
    >>> name, constants["KIND"], constants["GROUPS"]
    ('group_norm(2,eps=1e-05)', 'group', 2)
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from warpforge.kernels.taskdef import Member

NAME = "channel_norm"
KIND = "normalization"
DESCRIPTION = (
    "y = (x - mean) * rsqrt(var + eps) * w + b over channel groups of x [N, C, H, W]: batch norm "
    "(running or batch statistics), instance norm, group norm; fp32 statistics"
)

# KernelBench level 1's 33 (BatchNorm2d), 34 (InstanceNorm2d) and 35 (GroupNorm, 8 groups) benchmark shapes,
# and a diffusion U-Net's group norm (32 groups of 320 channels at 64 x 64).
SHAPES: list[dict[str, int]] = [
    {"N": 64, "C": 64, "H": 512, "W": 512},
    {"N": 112, "C": 64, "H": 512, "W": 512},
    {"N": 8, "C": 320, "H": 64, "W": 64},
]

# C a multiple of the table's group counts (2 and 4); H x W past one chunk of 64 (67, 7 x 13 = 91) and three
# pixels (torch refuses statistics of one value in train mode); <= 3k elements.
CHECK_SHAPES: list[dict[str, int]] = [
    {"N": 1, "C": 4, "H": 1, "W": 3},
    {"N": 3, "C": 4, "H": 7, "W": 13},
    {"N": 2, "C": 8, "H": 1, "W": 67},
]

DTYPES: list[torch.dtype] = [torch.float32, torch.float16, torch.bfloat16]

# A problem without weight and bias (instance norm, affine=False) and without the running statistics is this task
# with them filled: weight 1, bias 0, running mean 0, running variance 1, no batches tracked.
FILL_INPUTS: dict[int, float] = {1: 1.0, 2: 0.0, 3: 0.0, 4: 1.0, 5: 0}

KINDS = ("batch", "batch_train", "instance", "group")


def member(
    kind: str, groups: int = 1, eps: float = 1e-5
) -> tuple[str, Callable[..., torch.Tensor], dict[str, str | int | float]]:
    """The member normalizing as ``kind`` (one of :data:`KINDS`; ``groups`` for group norm): (name, reference,
    template constants)."""
    if kind not in KINDS or groups < 1:
        raise ValueError(f"kind is one of {KINDS} with groups >= 1, got {kind!r}, {groups}")
    eps = float(eps)

    def reference(
        x: torch.Tensor,
        w: torch.Tensor,
        b: torch.Tensor,
        running_mean: torch.Tensor,
        running_var: torch.Tensor,
        num_batches_tracked: torch.Tensor,
    ) -> torch.Tensor:
        ct = torch.promote_types(x.dtype, torch.float32)
        v, wc, bc = x.to(ct), w.to(ct), b.to(ct)
        if kind == "batch":
            y = F.batch_norm(v, running_mean.to(ct), running_var.to(ct), wc, bc, training=False, eps=eps)
        elif kind == "batch_train":
            y = F.batch_norm(v, None, None, wc, bc, training=True, eps=eps)
        elif kind == "instance":
            y = F.instance_norm(v, weight=wc, bias=bc, eps=eps)
        else:
            y = F.group_norm(v, groups, wc, bc, eps=eps)
        return y.to(x.dtype)

    label = {"batch": "batch_norm", "batch_train": "batch_norm_train", "instance": "instance_norm"}.get(
        kind, f"group_norm({groups},"
    )
    name = f"{label}(eps={eps!r})" if kind != "group" else f"{label}eps={eps!r})"
    return name, reference, {"KIND": kind, "GROUPS": int(groups), "EPS": eps}


MEMBERS = [member("batch"), member("batch_train"), member("instance"), member("group", 2), member("group", 4)]
DEFAULT_MEMBER = MEMBERS[0][0]
reference = MEMBERS[0][1]


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    # x ~ 0.5 + N(0, 1) (a mean the normalization must remove), weight ~ 1 + N(0, 0.1^2) and bias ~ N(0, 0.1^2)
    # (a dropped affine is ~10% off), running mean ~ N(0, 0.5^2) and variance in [0.5, 1.5): the eval-mode
    # member differs from every batch-statistics one.
    n, c, h, w = shape["N"], shape["C"], shape["H"], shape["W"]
    gen = torch.Generator().manual_seed(seed)
    x = 0.5 + torch.randn(n, c, h, w, generator=gen)
    weight = 1.0 + 0.1 * torch.randn(c, generator=gen)
    bias = 0.1 * torch.randn(c, generator=gen)
    running_mean = 0.5 * torch.randn(c, generator=gen)
    running_var = 0.5 + torch.rand(c, generator=gen)
    floats = tuple(t.to(dtype=dtype, device=device) for t in (x, weight, bias, running_mean, running_var))
    return (*floats, torch.zeros((), dtype=torch.int64, device=device))


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """``offset``: x + 100, where a variance taken as E[x^2] - E[x]^2 in fp32 cancels (1e4 against a
    variance of 1: ~6e-4 of it, 6x the tolerance) and so does ``x * rstd + (b - mean * rstd)`` (the terms are
    100x the result); ``large``: x times 1e4."""
    x, *rest = make_inputs(shape, torch.float32, seed + 1, "cpu")
    sets = {"offset": x + 100.0, "large": x * 1e4}
    return {name: (v.to(dtype=dtype, device=device), *(t.to(device) for t in rest)) for name, v in sets.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # Statistics (an add and a multiply-add per element) and the normalization (subtract, two multiplies, add).
    return 7.0 * shape["N"] * shape["C"] * shape["H"] * shape["W"]


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # x read once and y written once (the floor: a two-pass kernel reads x again, from L2 where it fits).
    return float(2 * shape["N"] * shape["C"] * shape["H"] * shape["W"] * dtype.itemsize)


def propose_members(model: torch.nn.Module) -> list[Member]:
    """The member of the model's one normalization module (BatchNorm1d..3d, InstanceNorm1d..3d, GroupNorm),
    its group count and eps read from it; none for any other model."""
    batch = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)
    instance = (torch.nn.InstanceNorm1d, torch.nn.InstanceNorm2d, torch.nn.InstanceNorm3d)
    found = [m for m in model.modules() if isinstance(m, (*batch, *instance, torch.nn.GroupNorm))]
    if len(found) != 1:
        return []
    mod = found[0]
    if isinstance(mod, batch):
        # Running statistics when the module has them and is not training (by-path problems run in eval mode)
        kind = "batch" if mod.track_running_stats and not mod.training else "batch_train"
        return [Member(*member(kind, eps=mod.eps))]
    if isinstance(mod, instance):
        if mod.track_running_stats and not mod.training:
            return []  # instance norm with running statistics: another function
        return [Member(*member("instance", eps=mod.eps))]
    return [Member(*member("group", groups=int(mod.num_groups), eps=mod.eps))]
