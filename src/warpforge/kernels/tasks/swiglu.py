"""SwiGLU gating: ``out = silu(a) * b`` elementwise (the activation of Llama-style FFNs).

``a`` (gate projection) and ``b`` (up projection) are ``[M, N]`` (tokens x FFN width) in the same dtype;
the result is in that dtype, computed in fp32 and rounded once.
"""

from __future__ import annotations

import torch

NAME = "swiglu"
KIND = "activation"
DESCRIPTION = "out = silu(a) * b, a and b [M, N] of the same dtype; elementwise, fp32 math, output in input dtype"

SHAPES: list[dict[str, int]] = [
    {"M": 4096, "N": 14336},  # Llama-3-8B FFN, 4k tokens
    {"M": 8192, "N": 28672},  # Llama-3-70B FFN, 8k tokens
    {"M": 16384, "N": 11008},  # Llama-2-7B FFN, 16k tokens
]

# 1, primes, and sizes that are not multiples of any block; at most ~20k elements each.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "N": 1},
    {"M": 3, "N": 1009},
    {"M": 17, "N": 257},
    {"M": 7, "N": 2053},
]

SMALL_SHAPES: list[dict[str, int]] = [{"M": 128, "N": 3584}]

DTYPES: list[torch.dtype] = [torch.float16, torch.bfloat16, torch.float32]

# Training: gradients of a and b (the reference differentiated by torch autograd in float64 is their truth).
GRAD_INPUTS = (0, 1)


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    ct = torch.promote_types(a.dtype, torch.float32)
    return (torch.nn.functional.silu(a.to(ct)) * b.to(ct)).to(a.dtype)


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    m, n = shape["M"], shape["N"]
    gen = torch.Generator().manual_seed(seed)
    # gate and up projections of normalized activations: roughly N(0, 1)
    a = torch.randn(m, n, generator=gen, dtype=torch.float32)
    b = torch.randn(m, n, generator=gen, dtype=torch.float32)
    return a.to(dtype).to(device), b.to(dtype).to(device)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """Inputs that break fragile kernels, checked besides random ones (evaluator/judge/judge.py).

    - ``large_magnitude``: gate x 30 (|a| up to about 120: a sigmoid written exp(a) / (1 + exp(a)) gives
      inf / inf = NaN above 88.7 in float32).
    """
    a, b = make_inputs(shape, dtype, seed, "cpu")
    return {"large_magnitude": ((a.float() * 30.0).to(dtype=dtype, device=device), b.to(device))}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # per element: sigmoid = exp + add + divide (3), times a (1), times b (1)
    return 5.0 * shape["M"] * shape["N"]


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    size = torch.tensor([], dtype=dtype).element_size()
    return float(3 * shape["M"] * shape["N"] * size)  # read a, read b, write out
