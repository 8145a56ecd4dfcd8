"""Cross-entropy loss over a large vocabulary: fused log-softmax + negative log-likelihood per row.

``logits`` is ``[M, V]`` (tokens x vocabulary) in fp16, bf16 or fp32; ``targets`` is int64 ``[M]`` with
values in ``[0, V)``. The output is the per-row loss ``logsumexp(logits[i]) - logits[i, targets[i]]``
as an fp32 tensor ``[M]`` (``reduction='none'``, no ignore_index), computed in fp32.
"""

from __future__ import annotations

import torch

NAME = "cross_entropy"
KIND = "loss"
DESCRIPTION = (
    "per-row cross-entropy loss = logsumexp(logits[i]) - logits[i, targets[i]]; logits [M, V] fp16/bf16/fp32, "
    "int64 targets [M]; fp32 output [M] (reduction='none')"
)

SHAPES: list[dict[str, int]] = [
    {"M": 4096, "V": 32000},  # Llama-2 / Mistral vocabulary
    {"M": 4096, "V": 128256},  # Llama-3 vocabulary
    {"M": 8192, "V": 128256},
    {"M": 128, "V": 128256},  # few rows (small micro-batch / chunked loss): a row per program starves the GPU
]

# M = 1, prime and non-power-of-two vocabularies; at most ~20k logits each.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "V": 1009},
    {"M": 2, "V": 9973},
    {"M": 5, "V": 3989},
    {"M": 33, "V": 257},
]

SMALL_SHAPES: list[dict[str, int]] = [{"M": 16, "V": 32000}]

DTYPES: list[torch.dtype] = [torch.float16, torch.bfloat16, torch.float32]

# Training: the gradient of the logits only (targets are integer indices).
GRAD_INPUTS = (0,)
# d logits is written in the logits' dtype: one rounding of softmax - onehot, a relative 2**-11 (fp16) or
# 2**-8 (bf16) at worst; the forward's 1e-4 (set for an fp32 loss) would refuse that rounding itself.
GRAD_TOLERANCES = {
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (8e-3, 8e-3),
    torch.float32: (1e-4, 1e-4),
}

# The output is fp32 computed in fp32 from logits that fp32 represents exactly, so the only error is
# fp32 rounding in the exp-sum and log (relative ~1e-6 for V = 128k with blocked sums); the half-precision
# defaults (4e-3 / 3e-2) would accept a kernel that did its math in fp16/bf16 (error ~ 12 * 4e-3 = 5e-2).
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-4, 1e-4),
    torch.bfloat16: (1e-4, 1e-4),
    torch.float32: (1e-4, 1e-4),
}


def reference(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    ct = torch.promote_types(logits.dtype, torch.float32)
    x = logits.to(ct)
    lse = torch.logsumexp(x, dim=-1)
    target_logit = x.gather(-1, targets.long().unsqueeze(-1)).squeeze(-1)
    return lse - target_logit


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    m, v = shape["M"], shape["V"]
    gen = torch.Generator().manual_seed(seed)
    # LM-head logits: a few units of spread
    logits = 2.0 * torch.randn(m, v, generator=gen, dtype=torch.float32)
    targets = torch.randint(0, v, (m,), generator=gen, dtype=torch.int64)
    return logits.to(dtype).to(device), targets.to(device)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """Inputs that break fragile kernels, checked besides random ones (evaluator/judge/judge.py).

    - ``large_offset``: every logit + 1000 (exp(1000) overflows every float format: a log-sum-exp without
      max subtraction gives inf and a NaN loss);
    - ``large_magnitude``: logits x 20 (a spread of about +-160, past exp's float32 range at 88.7).
    """
    logits, targets = make_inputs(shape, dtype, seed, "cpu")
    x = logits.float()
    sets = {"large_offset": x + 1000.0, "large_magnitude": x * 20.0}
    return {name: (t.to(dtype=dtype, device=device), targets.to(device)) for name, t in sets.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # per logit: max compare, subtract, exp, add
    return 4.0 * shape["M"] * shape["V"]


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    m, v = shape["M"], shape["V"]
    size = torch.tensor([], dtype=dtype).element_size()
    return float(m * v * size + m * 8 + m * 4)  # logits, int64 targets, fp32 loss
