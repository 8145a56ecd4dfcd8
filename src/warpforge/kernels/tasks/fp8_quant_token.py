"""Per-token FP8 quantisation (the activation side of FP8 training and inference): each row of ``x`` [M, H]
is scaled by its own float32 scale ``s = max(amax(|row|), 1e-4) / 448`` and rounded to float8_e4m3fn
(448 is e4m3's largest finite value); outputs ``(q, scales)``: q [M, H] float8_e4m3fn, scales [M] float32,
so that ``q * scales[:, None]`` approximates ``x``. The 1e-4 floor keeps an all-zero row finite (DeepSeek-V3's
kernels clamp amax the same way).

The Triton interpreter does not round to float8 as the GPU does (it truncates some values), so
correctness of this task waits for a GPU; on the CPU its templates are compiled for sm_90 only.
"""

from __future__ import annotations

import torch

NAME = "fp8_quant_token"
KIND = "quantization"
DESCRIPTION = (
    "per-token (1 x H) quantisation of x [M, H] to float8_e4m3fn with float32 scales amax/448; "
    "outputs (q [M, H], scales [M])"
)

FP8_MAX = 448.0
AMAX_FLOOR = 1e-4

SHAPES: list[dict[str, int]] = [
    {"M": 8192, "H": 4096},  # Llama-3-8B activations over 8k tokens
    {"M": 4096, "H": 7168},  # DeepSeek-V3 hidden size
    {"M": 16384, "H": 14336},  # Llama-3-8B FFN intermediate (the down projection's input)
]

# One element; a prime row length (67, 1031) and a row count no block divides.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "H": 1},
    {"M": 13, "H": 1031},
    {"M": 67, "H": 67},
]

SMALL_SHAPES: list[dict[str, int]] = [{"M": 64, "H": 4096}]

DTYPES: list[torch.dtype] = [torch.bfloat16, torch.float16, torch.float32]

# One tolerance serves both outputs (the contract's): rtol 1/8 is one e4m3 step (3 mantissa bits: steps are
# 1/16 to 1/8 of the value), the most a kernel rounding x / s (or x * (1/s)) correctly can differ from the
# float64 reference at a rounding boundary; atol 2e-3 of the RMS covers e4m3's subnormal steps near zero.
# Scales are held to that 1/8 too (per-output tolerances would make them tighter).
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {d: (2e-3, 0.125) for d in DTYPES}


def reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    ct = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(ct)
    scales = xf.abs().amax(dim=-1).clamp(min=AMAX_FLOOR) / FP8_MAX
    q = (xf / scales[:, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scales


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    m, h = shape["M"], shape["H"]
    gen = torch.Generator().manual_seed(seed)
    # Activations with per-token scales over three orders of magnitude and a few outlier channels (the
    # reason per-token and per-block scales exist).
    x = torch.randn(m, h, generator=gen) * torch.exp(torch.randn(m, 1, generator=gen) * 2.0)
    outliers = torch.randint(0, h, (max(h // 256, 1),), generator=gen)
    x[:, outliers] *= 20.0
    return (x.to(dtype=dtype, device=device),)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """- ``zeros``: all-zero rows (amax 0: the floor keeps scales finite and q zero);
    - ``huge``: values near the dtype's largest (x / s must not be formed as x * 448 first: fp16 overflows)."""
    (x,) = make_inputs(shape, dtype, seed, "cpu")
    big = torch.finfo(dtype).max / 4
    sets = {
        "zeros": torch.zeros_like(x, dtype=torch.float32),
        "huge": x.float() / x.float().abs().amax().clamp(min=1e-30) * big,
    }
    return {name: (t.to(dtype=dtype, device=device),) for name, t in sets.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # Per element: abs-max, scale, round.
    return 3.0 * shape["M"] * shape["H"]


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # x read once, 1-byte q written, one float32 scale per row.
    m, h = shape["M"], shape["H"]
    return float(m * h * (torch.empty((), dtype=dtype).element_size() + 1) + 4 * m)
