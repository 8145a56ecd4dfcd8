"""A linear layer ``y = x @ w.T + b``, exactly ``torch.nn.functional.linear`` with a bias, forward and backward.

``x`` is [M, K] (activations: tokens x in_features), ``w`` is [N, K] (an ``nn.Linear`` weight: out_features x
in_features), ``b`` is [N]; ``y`` is [M, N] in the inputs' dtype, rounded once from an fp32 accumulator with
the bias added before that rounding. Gradients of all three: ``dx = dy @ w``, ``dw = dy.T @ x`` and ``db`` the
column sums of ``dy``, each accumulated in fp32 and rounded once to the input's dtype.

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import linear
    >>> x, w, b = linear.make_inputs({"M": 2, "N": 3, "K": 8}, torch.float32, seed=0, device="cpu")
    >>> linear.reference(x, w, b).shape
    torch.Size([2, 3])
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

NAME = "linear"
KIND = "gemm"
DESCRIPTION = (
    "y = x @ w.T + b (torch.nn.functional.linear with bias), x [M, K], w [N, K], b [N]; fp16/bf16 "
    "inputs, fp32 accumulation, output in the input dtype; forward and backward (dx, dw, db)"
)

# Llama-3-8B's projections over 4096 tokens (a batch of 4 x 1024 or one 4k sequence): attention output
# 4096 -> 4096, FFN up/gate 4096 -> 14336, FFN down 14336 -> 4096, and its GQA key/value projection 4096 -> 1024
# (8 heads of 128) at 8192 tokens, the skinny-N case; Qwen2-style models put a bias on exactly these.
SHAPES: list[dict[str, int]] = [
    {"M": 4096, "N": 4096, "K": 4096},
    {"M": 4096, "N": 14336, "K": 4096},
    {"M": 4096, "N": 4096, "K": 14336},
    {"M": 8192, "N": 1024, "K": 4096},
]

# Every dimension hits 1, a prime or a non-multiple of each tile size (16..256); all <= 130 so the Triton
# interpreter stays fast. The backward's GEMMs permute the roles (dx: inner N; dw: [N, K] with inner M), so each
# dimension is also the inner one of some GEMM at a size that leaves a partial K tile.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "N": 1, "K": 1},
    {"M": 17, "N": 31, "K": 67},
    {"M": 129, "N": 65, "K": 127},
    {"M": 1, "N": 130, "K": 97},
    {"M": 67, "N": 3, "K": 129},
]

SMALL_SHAPES: list[dict[str, int]] = [{"M": 256, "N": 512, "K": 256}]

# fp32 is left out, as for matmul and the other GEMM tasks: tl.dot on fp32 runs as TF32 on the GPU (10-bit
# mantissa), which an fp32 tolerance refuses.
DTYPES: list[torch.dtype] = [torch.float16, torch.bfloat16]

# Training: gradients of x, w and b (the reference differentiated by torch autograd in float64 is their truth).
# Each gradient is one fp32-accumulated reduction rounded once, like the forward, so the forward's tolerances
# (the defaults, taskdef.DEFAULT_TOLERANCES) hold for them too: no GRAD_TOLERANCES.
GRAD_INPUTS = (0, 1, 2)

# The bias may be absent in a caller (an nn.Linear built with bias=False): such a caller passes zeros of
# shape [N] in its place, which this task computes exactly (y = x @ w.T + 0) and whose gradient it may drop.
OPTIONAL_INPUTS = (2,)

# The contract: fp32 accumulation, checked as matmul checks it (random inputs do not tell an fp16 accumulator
# apart even at K = 4096). Every partial sum of one long-K output grows to ~K/2 = 2048 and cancels back to
# ~9: an fp16 accumulator (ulp 2 at 2048) is off by 4-8 there, an fp32 one by the output's own rounding
# (0.008), against an allowed ~0.07 (4e-3 x RMS ~9 + 4e-3 x |y|). M = N = 16 keeps the interpreter at one
# forward program of 32-128 K steps.
ACCUMULATION = torch.float32
PRECISION_SHAPES: list[dict[str, int]] = [{"M": 16, "N": 16, "K": 4096}]


def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    ct = torch.promote_types(x.dtype, torch.float32)
    return F.linear(x.to(ct), w.to(ct), b.to(ct)).to(x.dtype)


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    m, n, k = shape["M"], shape["N"], shape["K"]
    gen = torch.Generator().manual_seed(seed)
    # activations ~ N(0, 1); weights ~ N(0, 1/K) (fan-in scaled init) so x @ w.T is O(1) for any K; a bias of
    # std 0.5, large enough that a kernel dropping it (or adding it on the wrong axis) is off by ~50% of y's RMS
    x = torch.randn(m, k, generator=gen, dtype=torch.float32)
    w = torch.randn(n, k, generator=gen, dtype=torch.float32) / math.sqrt(k)
    b = 0.5 * torch.randn(n, generator=gen, dtype=torch.float32)
    return x.to(dtype).to(device), w.to(dtype).to(device), b.to(dtype).to(device)


def precision_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    """x ~ 1 + N(0, 0.1); w ~ +-(1 + N(0, 0.1)), + on the first half of K and - on the second: every partial
    sum reaches ~K/2 before cancelling to a result of order sqrt(K) * 0.14; b ~ N(0, 0.5) as usual."""
    m, n, k = shape["M"], shape["N"], shape["K"]
    gen = torch.Generator().manual_seed(seed)
    sign = torch.ones(1, k)
    sign[:, k // 2 :] = -1.0
    x = 1.0 + 0.1 * torch.randn(m, k, generator=gen)
    w = sign * (1.0 + 0.1 * torch.randn(n, k, generator=gen))
    b = 0.5 * torch.randn(n, generator=gen)
    return x.to(dtype).to(device), w.to(dtype).to(device), b.to(dtype).to(device)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """Inputs that break fragile kernels, checked besides random ones (evaluator/judge/judge.py).

    - ``bias_cancels_overflow``: x ~ 500 x U(0.9, 1.1) and w ~ +-(140 / K) x U(0.9, 1.1) (sign per output
      column), so x @ w.T ~ +-70000 (56700..84700 at K = 1), past fp16's 65504, and b = -+62000 brings y back
      to -5300..22700: a kernel that rounds the product to the output dtype before adding the bias gets inf
      in fp16 where the reference, adding in fp32, is finite. The gradients stay finite at the check shapes
      (dw sums M <= 130 terms of dy x ~500: std ~5700, 65504 is 11 sigma away);
    - ``no_bias``: b = 0, what a caller of a Linear without bias passes (OPTIONAL_INPUTS).
    """
    m, n, k = shape["M"], shape["N"], shape["K"]
    gen = torch.Generator().manual_seed(seed)
    sign = torch.where(torch.arange(n) % 2 == 0, 1.0, -1.0)
    x = 500.0 * (0.9 + 0.2 * torch.rand(m, k, generator=gen))
    w = sign[:, None] * (140.0 / k) * (0.9 + 0.2 * torch.rand(n, k, generator=gen))
    b = -62000.0 * sign
    x0, w0, b0 = make_inputs(shape, dtype, seed, "cpu")
    sets = {"bias_cancels_overflow": (x, w, b), "no_bias": (x0, w0, torch.zeros_like(b0))}
    return {name: tuple(t.to(dtype=dtype, device=device) for t in inputs) for name, inputs in sets.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # the forward's GEMM (a multiply and an add per term) plus one bias add per output; the backward does
    # two GEMMs of the same size (dx, dw) and M x N adds for db
    m, n, k = shape["M"], shape["N"], shape["K"]
    return 2.0 * m * n * k + m * n


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # x, w and b read once, y written once
    m, n, k = shape["M"], shape["N"], shape["K"]
    size = torch.tensor([], dtype=dtype).element_size()
    return float((m * k + n * k + n + m * n) * size)
