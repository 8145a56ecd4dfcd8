"""Per-block FP8 quantisation as DeepSeek-V3 trains: each row of ``x`` [M, K] is cut into groups of 128
consecutive elements (1 x 128 tiles; the last group of a row may be shorter), each group scaled by its own
float32 ``s = max(amax(|group|), 1e-4) / 448`` and rounded to float8_e4m3fn; outputs ``(q, scales)``: q
[M, K] float8_e4m3fn, scales [M, ceil(K / 128)] float32 (the activation operand of :mod:`fp8_gemm`).

The Triton interpreter does not round to float8 as the GPU does, so correctness of this task waits for a
GPU; on the CPU its templates are compiled for sm_90 only.
"""

from __future__ import annotations

import math

import torch

NAME = "fp8_quant_block"
KIND = "quantization"
DESCRIPTION = (
    "per-block (1 x 128) quantisation of x [M, K] to float8_e4m3fn with float32 scales amax/448 per "
    "group; outputs (q [M, K], scales [M, ceil(K/128)])"
)

FP8_MAX = 448.0
AMAX_FLOOR = 1e-4
GROUP = 128

SHAPES: list[dict[str, int]] = [
    {"M": 8192, "K": 4096},
    {"M": 4096, "K": 7168},  # DeepSeek-V3 hidden size
    {"M": 4096, "K": 18432},  # DeepSeek-V3 dense FFN intermediate
]

# One element; K below, just above and well past one group (1, 129 = 128 + 1, 1031 prime: 9 groups, the
# last of 7 elements); row counts no block divides.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "K": 1},
    {"M": 13, "K": 1031},
    {"M": 67, "K": 129},
]

SMALL_SHAPES: list[dict[str, int]] = [{"M": 64, "K": 4096}]

DTYPES: list[torch.dtype] = [torch.bfloat16, torch.float16, torch.float32]

# As fp8_quant_token: one e4m3 step relative, e4m3's subnormal steps absolute (one tolerance for q and scales).
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {d: (2e-3, 0.125) for d in DTYPES}


def reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    ct = torch.promote_types(x.dtype, torch.float32)
    m, k = x.shape
    groups = math.ceil(k / GROUP)
    padded = torch.zeros(m, groups * GROUP, dtype=ct, device=x.device)
    padded[:, :k] = x.to(ct)
    tiles = padded.view(m, groups, GROUP)
    scales = tiles.abs().amax(dim=-1).clamp(min=AMAX_FLOOR) / FP8_MAX
    q = (tiles / scales[..., None]).clamp(-FP8_MAX, FP8_MAX).view(m, groups * GROUP)[:, :k]
    return q.to(torch.float8_e4m3fn), scales


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    m, k = shape["M"], shape["K"]
    gen = torch.Generator().manual_seed(seed)
    # Per-token scales over three orders of magnitude and outlier channels: groups differ within a row.
    x = torch.randn(m, k, generator=gen) * torch.exp(torch.randn(m, 1, generator=gen) * 2.0)
    outliers = torch.randint(0, k, (max(k // 256, 1),), generator=gen)
    x[:, outliers] *= 20.0
    return (x.to(dtype=dtype, device=device),)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """- ``zero_groups``: every other group all zero (the floor keeps its scale finite, q zero);
    - ``huge``: values near the dtype's largest (x / s must not be formed as x * 448 first)."""
    (x,) = make_inputs(shape, dtype, seed, "cpu")
    zeroed = x.float().clone()
    for start in range(0, shape["K"], 2 * GROUP):
        zeroed[:, start : start + GROUP] = 0.0
    big = torch.finfo(dtype).max / 4
    sets = {"zero_groups": zeroed, "huge": x.float() / x.float().abs().amax().clamp(min=1e-30) * big}
    return {name: (t.to(dtype=dtype, device=device),) for name, t in sets.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    return 3.0 * shape["M"] * shape["K"]


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    m, k = shape["M"], shape["K"]
    return float(m * k * (torch.empty((), dtype=dtype).element_size() + 1) + 4 * m * math.ceil(k / GROUP))
