"""Block-scaled FP8 GEMM as DeepSeek-V3 trains: ``out = dequant(A) @ dequant(B)^T`` in bfloat16.

``a`` is float8_e4m3fn [M, K] (activations) with float32 ``a_scales`` [M, ceil(K/128)] (one per 1 x 128
group of a row); ``b`` is float8_e4m3fn [N, K] (a weight, nn.Linear's layout) with float32 ``b_scales``
[ceil(N/128), ceil(K/128)] (one per 128 x 128 block). dequant multiplies each element by its group's or
block's scale. The ground truth is the float64 product of the dequantised values; the output is rounded
once to bfloat16.

The Triton interpreter does not compute in float8 as the GPU does, so correctness of this task waits for a
GPU; on the CPU its templates are compiled for sm_90 only (fp8 tensor cores start at sm_89/sm_90).
"""

from __future__ import annotations

import math

import torch

NAME = "fp8_gemm"
KIND = "gemm"
DESCRIPTION = (
    "block-scaled FP8 GEMM out = dequant(A) @ dequant(B)^T, A fp8 [M, K] with 1x128 scales, B fp8 [N, K] "
    "with 128x128 scales; bfloat16 output"
)

GROUP = 128
FP8_MAX = 448.0

# DeepSeek-V3 projections over 4k tokens (hidden 7168; the MLA q-down 1536; the dense FFN 18432) and
# Llama-3-8B's FFN up projection.
SHAPES: list[dict[str, int]] = [
    {"M": 4096, "N": 7168, "K": 18432},
    {"M": 4096, "N": 18432, "K": 7168},
    {"M": 4096, "N": 1536, "K": 7168},
    {"M": 4096, "N": 14336, "K": 4096},
]

# M = 1 (decode); N and K not multiples of 128 (a partial scale block; K = 257 prime: three K groups,
# the last of one element); the largest operand under 40k elements.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "N": 64, "K": 128},
    {"M": 67, "N": 96, "K": 257},
    {"M": 37, "N": 160, "K": 200},
]

SMALL_SHAPES: list[dict[str, int]] = [{"M": 256, "N": 512, "K": 1024}]

# The inputs' dtype (the output is bfloat16).
DTYPES: list[torch.dtype] = [torch.float8_e4m3fn]

# Products of fp8 values are exact in fp32 and the tensor cores accumulate in fp32 (Hopper's fp8 MMA keeps
# ~22 bits, hence DeepSeek's promotion to fp32 every 128 along K, which a per-block scale also forces);
# the only other error is the final bfloat16 rounding (2^-8 relative).
ACCUMULATION = torch.float32
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {torch.float8_e4m3fn: (1e-2, 1e-2)}


def _expand(scales: torch.Tensor, rows: int, cols: int, row_group: int) -> torch.Tensor:
    s = scales.repeat_interleave(row_group, dim=0)[:rows] if row_group > 1 else scales
    return s.repeat_interleave(GROUP, dim=1)[:, :cols]


def dequantize(
    a: torch.Tensor, a_scales: torch.Tensor, b: torch.Tensor, b_scales: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The float64 operands: each fp8 element times its group's (A) or block's (B) scale."""
    (m, k), n = a.shape, b.shape[0]
    a64 = a.to(torch.float64) * _expand(a_scales.to(torch.float64), m, k, 1)
    b64 = b.to(torch.float64) * _expand(b_scales.to(torch.float64), n, k, GROUP)
    return a64, b64


def reference(a: torch.Tensor, a_scales: torch.Tensor, b: torch.Tensor, b_scales: torch.Tensor) -> torch.Tensor:
    a64, b64 = dequantize(a, a_scales, b, b_scales)
    # bfloat16 when given fp8 operands; the evaluator's float64 pass (operands upcast) keeps float64
    out_dtype = torch.float64 if a.dtype == torch.float64 else torch.bfloat16
    return (a64 @ b64.T).to(out_dtype)


def _quantize(x: torch.Tensor, row_group: int) -> tuple[torch.Tensor, torch.Tensor]:
    rows, cols = x.shape
    rg, cg = math.ceil(rows / row_group), math.ceil(cols / GROUP)
    padded = torch.zeros(rg * row_group, cg * GROUP, dtype=torch.float32)
    padded[:rows, :cols] = x
    blocks = padded.view(rg, row_group, cg, GROUP)
    scales = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-4) / FP8_MAX
    q = (blocks / scales[:, None, :, None]).view(rg * row_group, cg * GROUP)[:rows, :cols]
    return q.to(torch.float8_e4m3fn), scales


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    m, n, k = shape["M"], shape["N"], shape["K"]
    gen = torch.Generator().manual_seed(seed)
    # Activations with per-token magnitudes over two orders; fan-in-scaled weights; both quantised the way
    # the fp8_quant_block task (1 x 128) and DeepSeek-V3's weights (128 x 128) are.
    x = torch.randn(m, k, generator=gen) * torch.exp(torch.randn(m, 1, generator=gen))
    w = torch.randn(n, k, generator=gen) / math.sqrt(k)
    a, a_scales = _quantize(x, 1)
    b, b_scales = _quantize(w, GROUP)
    return a.to(device), a_scales.to(device), b.to(device), b_scales.to(device)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """Inputs that break fragile kernels, checked besides random ones (evaluator/judge/judge.py).

    - ``skewed_groups``: A's scales alternate by 2^+-8 from one K group to the next (a kernel that sums the
      fp8 products of several groups before scaling, or scales by one group's factor, is far off);
    - ``large_scales``: every scale x 2^20 (products near 1e10 are fine in fp32 and bf16; a kernel that
      accumulates unscaled products in fp16 overflows).
    """
    a, a_s, b, b_s = make_inputs(shape, dtype, seed, "cpu")
    skew = torch.tensor([2.0**8, 2.0**-8]).repeat(a_s.shape[1] // 2 + 1)[: a_s.shape[1]]
    sets = {"skewed_groups": (a, a_s * skew, b, b_s), "large_scales": (a, a_s * 2.0**20, b, b_s * 2.0**20)}
    return {name: tuple(t.to(device) for t in ts) for name, ts in sets.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    return 2.0 * shape["M"] * shape["N"] * shape["K"]


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # 1-byte operands read once, their float32 scales, the bfloat16 output written once.
    m, n, k = shape["M"], shape["N"], shape["K"]
    kg = math.ceil(k / GROUP)
    return float(m * k + n * k + 4 * (m * kg + math.ceil(n / GROUP) * kg) + 2 * m * n)
