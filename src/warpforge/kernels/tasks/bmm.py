"""Batched matrix multiply ``C[b] = A[b] @ B[b]`` with fp32 accumulation (``torch.bmm``).

``A`` is ``[B, M, K]``, ``B`` is ``[B, K, N]``, same dtype; ``C`` is ``[B, M, N]`` in that dtype, rounded once
from an fp32 accumulator. fp32 inputs multiply as tf32x3 on tensor cores (torch's fp32 bmm is IEEE fp32; one
TF32 product is ~1e-3 off, ten times the fp32 tolerance). The batch is one more grid axis (or one more loop
level of a persistent kernel) over the matmul task's tiles: every batch shares no operand, so nothing is
reused across it.

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import bmm
    >>> a, b = bmm.make_inputs({"B": 2, "M": 3, "N": 5, "K": 4}, torch.float32, seed=0, device="cpu")
    >>> bmm.reference(a, b).shape
    torch.Size([2, 3, 5])
"""

from __future__ import annotations

import math

import torch

NAME = "bmm"
KIND = "gemm"
DESCRIPTION = "C[b] = A[b] @ B[b], A [B, M, K], B [B, K, N]; fp32 accumulation, output in the input dtype"

# KernelBench level 1's 3_Batched_matrix_multiplication (128 x 512x1024 @ 1024x2048), a square batch, and
# attention-score sized products (32 x 32 heads of 512 queries x 64 dims against 512 keys).
SHAPES: list[dict[str, int]] = [
    {"B": 128, "M": 512, "N": 2048, "K": 1024},
    {"B": 16, "M": 1024, "N": 1024, "K": 1024},
    {"B": 1024, "M": 512, "N": 512, "K": 64},
]

# A batch of 1 and one of several; every size 1, a prime or a non-multiple of each tile (16..256); the
# largest input 34.6k elements so the interpreter stays fast.
CHECK_SHAPES: list[dict[str, int]] = [
    {"B": 1, "M": 1, "N": 1, "K": 1},
    {"B": 3, "M": 17, "N": 31, "K": 67},
    {"B": 2, "M": 129, "N": 65, "K": 127},
    {"B": 4, "M": 67, "N": 3, "K": 129},
]

SMALL_SHAPES: list[dict[str, int]] = [{"B": 4, "M": 256, "N": 256, "K": 256}]

# fp32 first: KernelBench's problem runs in fp32 (tf32x3 in the templates).
DTYPES: list[torch.dtype] = [torch.float32, torch.float16, torch.bfloat16]


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    ct = torch.promote_types(a.dtype, torch.float32)
    return torch.bmm(a.to(ct), b.to(ct)).to(a.dtype)


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    bsz, m, n, k = shape["B"], shape["M"], shape["N"], shape["K"]
    gen = torch.Generator().manual_seed(seed)
    # A ~ N(0, 1), B ~ N(0, 1/K): C is O(1) for any K; each batch its own draw, so a kernel that reads
    # batch 0 for every batch is wrong everywhere but there
    a = torch.randn(bsz, m, k, generator=gen, dtype=torch.float32)
    b = torch.randn(bsz, k, n, generator=gen, dtype=torch.float32) / math.sqrt(k)
    return a.to(dtype).to(device), b.to(dtype).to(device)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """``offset``: A + 8 (every product the same sign: partial sums grow to ~8 sqrt(K), where an fp16 accumulator
    loses the O(1) result's low bits); ``sparse_batch``: every batch zero but the last (a kernel that reads one
    batch's tiles for another, or skips the last, is off there by O(1))."""
    a, b = make_inputs(shape, torch.float32, seed, "cpu")
    last = torch.zeros_like(a)
    last[-1] = a[-1]
    sets = {"offset": (a + 8.0, b), "sparse_batch": (last, b)}
    return {name: tuple(t.to(dtype=dtype, device=device) for t in inputs) for name, inputs in sets.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    return 2.0 * shape["B"] * shape["M"] * shape["N"] * shape["K"]


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    bsz, m, n, k = shape["B"], shape["M"], shape["N"], shape["K"]
    size = torch.tensor([], dtype=dtype).element_size()
    return float(bsz * (m * k + k * n + m * n) * size)
