"""Dense matrix multiply ``C = A @ B`` with fp32 accumulation (the GEMM inside every linear layer).

``A`` is ``[M, K]`` (activations: tokens x hidden), ``B`` is ``[K, N]`` (a weight), both in the same
half-precision dtype; ``C`` is ``[M, N]`` in that dtype, rounded once from an fp32 accumulator.

A family of three members (:data:`MEMBERS`, selected in the templates by the module constant ``TRI``): the
plain product, ``triu(A @ B)`` and ``tril(A @ B)`` (KernelBench's products of triangular matrices). The
triangular members keep one triangle of the output and zero the other; a template skips the K loop of every
output tile wholly inside the zeroed triangle, half the tiles of a square product. It reads all of A and B:
the inputs' own zeros are not assumed (the judge's adversarial inputs, such as ``2x - max``, are dense).
"""

from __future__ import annotations

import math

import torch

NAME = "matmul"
KIND = "gemm"
DESCRIPTION = "C = A @ B, A [M, K], B [K, N]; fp16/bf16 inputs, fp32 accumulation, output in the input dtype"

SHAPES: list[dict[str, int]] = [
    {"M": 4096, "N": 4096, "K": 4096},
    {"M": 8192, "N": 8192, "K": 8192},
    {"M": 16384, "N": 4096, "K": 4096},  # LLM projection: 16k tokens through a 4096x4096 weight
    {"M": 4096, "N": 14336, "K": 4096},  # Llama-3-8B FFN up/gate projection
]

# Every dimension hits 1, a prime or a non-multiple of each tile size (16..256); all <= 130 so the
# Triton interpreter stays fast.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "N": 1, "K": 1},
    {"M": 17, "N": 31, "K": 67},
    {"M": 129, "N": 65, "K": 127},
    {"M": 1, "N": 130, "K": 97},
    {"M": 67, "N": 3, "K": 129},
]

SMALL_SHAPES: list[dict[str, int]] = [{"M": 256, "N": 512, "K": 256}]

DTYPES: list[torch.dtype] = [torch.float16, torch.bfloat16]

# The contract: fp32 accumulation. On random inputs an fp16 accumulator passes even at K=4096 (errors
# grow ~sqrt(K/BLOCK_K) ulps of an O(1) partial sum), so the judge checks one long-K case whose partial
# sums grow to K/2 and cancel back to ~9: an fp16 accumulator is then off by 4-8 (ulp 2 at 2048), an
# fp32 one by 0.008 (the output's own rounding), against an allowed ~0.07 (measured, M=N=16, K=4096,
# BLOCK_K 32-128). M = N = 16 keeps the interpreter at one program of 32-128 K steps.
ACCUMULATION = torch.float32
PRECISION_SHAPES: list[dict[str, int]] = [{"M": 16, "N": 16, "K": 4096}]


def _product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    ct = torch.promote_types(a.dtype, torch.float32)
    return (a.to(ct) @ b.to(ct)).to(a.dtype)


def _upper(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.triu(_product(a, b))


def _lower(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.tril(_product(a, b))


# name -> reference, TRI constant of the templates ("upper": C[i, j] = 0 where i > j; "lower": where i < j).
MEMBERS = [("full", _product, {"TRI": "none"}), ("triu", _upper, {"TRI": "upper"}), ("tril", _lower, {"TRI": "lower"})]
DEFAULT_MEMBER = "full"
reference = _product


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    m, n, k = shape["M"], shape["N"], shape["K"]
    gen = torch.Generator().manual_seed(seed)
    # activations ~ N(0, 1); weights ~ N(0, 1/K) (fan-in scaled init) so C is O(1) for any K
    a = torch.randn(m, k, generator=gen, dtype=torch.float32)
    b = torch.randn(k, n, generator=gen, dtype=torch.float32) / math.sqrt(k)
    return a.to(dtype).to(device), b.to(dtype).to(device)


def precision_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    """A ~ 1 + N(0, 0.1); B ~ +-(1 + N(0, 0.1)), + on the first half of K and - on the second: every
    partial sum reaches ~K/2 before cancelling to a result of order sqrt(K) * 0.14."""
    m, n, k = shape["M"], shape["N"], shape["K"]
    gen = torch.Generator().manual_seed(seed)
    sign = torch.ones(k, 1)
    sign[k // 2 :] = -1.0
    a = 1.0 + 0.1 * torch.randn(m, k, generator=gen)
    b = sign * (1.0 + 0.1 * torch.randn(k, n, generator=gen))
    return a.to(dtype).to(device), b.to(dtype).to(device)


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    return 2.0 * shape["M"] * shape["N"] * shape["K"]


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    m, n, k = shape["M"], shape["N"], shape["K"]
    size = torch.tensor([], dtype=dtype).element_size()
    return float((m * k + k * n + m * n) * size)
