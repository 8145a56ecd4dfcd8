"""Rotary position embedding (RoPE), Llama/NeoX ``rotate_half`` convention, forward and backward.

``x`` is [B, H, S, D] (queries or keys), ``cos`` and ``sin`` are [S, D] (Llama builds them as two copies of
the per-frequency angles, ``cat(f, f)``); ``out = x * cos + rotate_half(x) * sin`` with
``rotate_half(x) = cat(-x2, x1)`` (x1, x2 the two halves of the last dim), computed in fp32 and rounded once
to x's dtype. The gradient of x is the transposed rotation ``g * cos + rotate_half^T(g * sin)`` with
``rotate_half^T(y) = cat(y2, -y1)``: for Llama's duplicated angles, the rotation by -sin.

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import rotary
    >>> x, cos, sin = rotary.make_inputs({"B": 1, "H": 2, "S": 3, "D": 8}, torch.float32, seed=0, device="cpu")
    >>> rotary.reference(x, cos, sin).shape
    torch.Size([1, 2, 3, 8])
"""

from __future__ import annotations

import random

import torch

NAME = "rotary"
KIND = "rotary"
DESCRIPTION = (
    "rotary embedding out = x*cos + rotate_half(x)*sin (Llama/NeoX); x [B, H, S, D], cos/sin [S, D]; "
    "forward and backward (dx)"
)

GRAD_INPUTS = (0,)

# Llama-3-8B queries (32 heads, D 128) and keys (8 KV heads) at 4k and 8k context; a 64-dim head model.
SHAPES: list[dict[str, int]] = [
    {"B": 1, "H": 32, "S": 4096, "D": 128},
    {"B": 1, "H": 8, "S": 8192, "D": 128},
    {"B": 4, "H": 16, "S": 2048, "D": 64},
]

# One token; an odd sequence (67, prime) and head count (3); D 64 and 128 (the head dims used) and a small
# D of 2 (one pair); B*H*S not a multiple of any rows-per-program count.
CHECK_SHAPES: list[dict[str, int]] = [
    {"B": 1, "H": 1, "S": 1, "D": 2},
    {"B": 2, "H": 3, "S": 67, "D": 64},
    {"B": 1, "H": 3, "S": 13, "D": 128},
]

SMALL_SHAPES: list[dict[str, int]] = [{"B": 1, "H": 4, "S": 128, "D": 128}]

DTYPES: list[torch.dtype] = [torch.bfloat16, torch.float16, torch.float32]

ROPE_THETA = 500000.0  # Llama-3


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    ct = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(ct)
    return (xf * cos.to(ct) + rotate_half(xf) * sin.to(ct)).to(x.dtype)


def angles(s: int, d: int, theta: float = ROPE_THETA) -> torch.Tensor:
    """[S, D] angles as Llama builds them: positions x inverse frequencies, the half repeated."""
    inv_freq = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    freqs = torch.outer(torch.arange(s, dtype=torch.float64), inv_freq)
    return torch.cat((freqs, freqs), dim=-1)


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    b, h, s, d = shape["B"], shape["H"], shape["S"], shape["D"]
    if d % 2:
        raise ValueError(f"D={d}: rotary rotates pairs, the head dim must be even")
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, h, s, d, generator=gen)
    # Positions start at a random offset (a continued sequence): every seed sees other angles. Drawn with
    # Python's RNG: no tensor is read on the host, so make_inputs also runs on fake tensors (compile stage).
    offset = random.Random(seed).randrange(4096)
    ang = angles(s + offset, d)[offset:]
    return (
        x.to(dtype=dtype, device=device),
        ang.cos().to(dtype=dtype, device=device),
        ang.sin().to(dtype=dtype, device=device),
    )


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """Inputs that break fragile kernels, checked besides random ones (evaluator/judge/judge.py).

    - ``large_magnitude``: x scaled to ~1e4 (fp16 holds it; a kernel that sums x*cos + x*sin in fp16 before
      rounding loses the low bits);
    - ``general_angles``: cos and sin with unrelated halves (not Llama's duplicated angles): a backward
      that applies rotation by -sin instead of the exact transpose is wrong here.
    """
    x, cos, sin = make_inputs(shape, dtype, seed, "cpu")
    gen = torch.Generator().manual_seed(seed + 1)
    ang = torch.rand(cos.shape, generator=gen, dtype=torch.float64) * 6.283
    sets = {"large_magnitude": (x.float() * 1e4, cos, sin), "general_angles": (x, ang.cos(), ang.sin())}
    return {name: tuple(t.to(dtype=dtype, device=device) for t in ts) for name, ts in sets.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # Per element: two multiplies and an add (x*cos + rot*sin).
    return 3.0 * shape["B"] * shape["H"] * shape["S"] * shape["D"]


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # x read and out written once; cos and sin read once (shared by every batch and head).
    b, h, s, d = shape["B"], shape["H"], shape["S"], shape["D"]
    return float((2 * b * h * s * d + 2 * s * d) * dtype.itemsize)
