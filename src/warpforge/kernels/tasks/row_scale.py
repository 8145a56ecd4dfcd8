"""Row scaling ``y = s[:, None] * x``: every row of ``x`` times its own factor, which is ``diag(s) @ x`` without the
M x M matrix (KernelBench's 12_Matmul_with_diagonal_matrices_ writes it as ``A.unsqueeze(1) * B``).

``s`` is ``[M]``, ``x`` is ``[M, N]``, same dtype; ``y`` is ``[M, N]`` in that dtype. One product per element,
computed in fp32 and rounded once (bit-exact in fp32). Memory-bound: ``x`` read once and ``y`` written once,
``s`` read once per row of tiles.

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import row_scale
    >>> s, x = row_scale.make_inputs({"M": 3, "N": 4}, torch.float32, seed=0, device="cpu")
    >>> row_scale.reference(s, x).shape
    torch.Size([3, 4])
"""

from __future__ import annotations

import torch

NAME = "row_scale"
KIND = "elementwise"
DESCRIPTION = "y = s[:, None] * x (diag(s) @ x): s [M], x [M, N]; one product per element, output in the input dtype"

# KernelBench level 1's 4096 x 4096, and a per-token scale of 16k tokens x 4096 hidden (a row-wise dequantize
# or gate); 4096 x 4096 fp32 is 64 MiB in and out, past every L2.
SHAPES: list[dict[str, int]] = [
    {"M": 4096, "N": 4096},
    {"M": 16384, "N": 4096},
    {"M": 4096, "N": 65537},
]

# One element; primes and non-multiples of every block, a single row and a single column (<= 17k elements).
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "N": 1},
    {"M": 13, "N": 67},
    {"M": 1, "N": 1031},
    {"M": 130, "N": 127},
    {"M": 257, "N": 1},
]

DTYPES: list[torch.dtype] = [torch.float32, torch.float16, torch.bfloat16]


def reference(s: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    ct = torch.promote_types(x.dtype, torch.float32)
    return (s.to(ct)[:, None] * x.to(ct)).to(x.dtype)


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    # Factors of both signs spread over two decades (a kernel that scales by the column's factor, or by s[0],
    # is wrong by O(1) almost everywhere); x ~ N(0, 1).
    gen = torch.Generator().manual_seed(seed)
    sign = torch.where(torch.rand(shape["M"], generator=gen) < 0.5, -1.0, 1.0)
    s = sign * torch.exp(torch.empty(shape["M"]).uniform_(-2.3, 2.3, generator=gen))
    x = torch.randn(shape["M"], shape["N"], generator=gen, dtype=torch.float32)
    return s.to(dtype=dtype, device=device), x.to(dtype=dtype, device=device)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """``zero_rows``: every other factor 0 (rows that must come out exactly 0); ``one_row``: the last factor alone
    non-zero (a kernel that drops the last row block, or reads s[0] for every row, is off by O(1) there)."""
    s, x = make_inputs(shape, torch.float32, seed, "cpu")
    alternate = s.clone()
    alternate[::2] = 0.0
    last = torch.zeros_like(s)
    last[-1] = s[-1]
    sets = {"zero_rows": (alternate, x), "one_row": (last, x)}
    return {name: tuple(t.to(dtype=dtype, device=device) for t in inputs) for name, inputs in sets.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    return float(shape["M"] * shape["N"])


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # s once, x read once, y written once
    return float((shape["M"] + 2 * shape["M"] * shape["N"]) * dtype.itemsize)
