"""Fused LM head + cross-entropy: the per-token loss of ``logits = h @ w^T`` without ever holding the
[M, V] logits (the point: at M = 8192 tokens and Llama-3's V = 128256, fp32 logits take 4.2 GB, their
gradient as much again, more than the 8B model's own bf16 weights per tensor-parallel shard).

``h`` is [M, H] (final hidden states), ``w`` is [V, H] (the LM head weight), ``target`` is int64 [M] with
-100 meaning ignored (padding, prompt tokens). The output is the float32 per-row loss
``logsumexp(logits[i]) - logits[i, target[i]]``, 0 on ignored rows (``reduction='none'``). Gradients of h
and w (ignored rows contribute none), in the inputs' dtype.

A template's extra memory is the point of this task: :func:`peak_memory` gives the reference's (what
materialising the logits costs), each template's ``peak_extra_bytes(params, shape)`` its own; an evaluator on
a GPU measures the real peak with ``torch.cuda.max_memory_allocated`` around the call.

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import fused_linear_cross_entropy as flce
    >>> h, w, t = flce.make_inputs({"M": 4, "H": 32, "V": 97}, torch.float32, seed=0, device="cpu")
    >>> flce.reference(h, w, t).shape
    torch.Size([4])
"""

from __future__ import annotations

import torch

NAME = "fused_linear_cross_entropy"
KIND = "loss"
DESCRIPTION = (
    "per-row loss of logits = h @ w^T without materialising them; h [M, H], w [V, H], int64 target [M] "
    "(-100 ignored); fp32 loss [M]; forward and backward (dh, dw)"
)

GRAD_INPUTS = (0, 1)
IGNORE_INDEX = -100

# Llama-3-8B's head (H 4096, V 128256) over 4k and 8k tokens; Qwen2.5-1.5B's (H 1536, V 151936).
SHAPES: list[dict[str, int]] = [
    {"M": 4096, "H": 4096, "V": 128256},
    {"M": 8192, "H": 4096, "V": 128256},
    {"M": 8192, "H": 1536, "V": 151936},
]

# One row; primes for every dimension (37 rows, 67 hidden, 509 vocabulary) so no block divides them; the
# largest input (w) stays under 40k elements for the interpreter.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "H": 32, "V": 97},
    {"M": 37, "H": 64, "V": 257},
    {"M": 19, "H": 67, "V": 509},
]

SMALL_SHAPES: list[dict[str, int]] = [{"M": 256, "H": 1024, "V": 32000}]

# fp32 is left out: tl.dot on fp32 runs as TF32 on the GPU (10-bit mantissa).
DTYPES: list[torch.dtype] = [torch.bfloat16, torch.float16]

# The loss is fp32 from fp32-accumulated logits of exactly representable products: only fp32 rounding
# (relative ~1e-6 at H = 4096) separates it from the float64 truth, as for cross_entropy; a kernel that
# keeps logits in bf16 (error ~ 4e-3 * |logit|) fails.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-4, 1e-4),
    torch.bfloat16: (1e-4, 1e-4),
}
# Gradients are rounded to the input dtype, and the softmax-minus-onehot tile is rounded to it before its
# tensor-core products (as Liger's kernel does): a few units of the dtype's epsilon.
GRAD_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
}


def reference(h: torch.Tensor, w: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    ct = torch.promote_types(h.dtype, torch.float32)
    logits = h.to(ct) @ w.to(ct).T
    lse = torch.logsumexp(logits, dim=-1)
    valid = target != IGNORE_INDEX
    picked = logits.gather(1, target.clamp(min=0).unsqueeze(1)).squeeze(1)
    return torch.where(valid, lse - picked, torch.zeros_like(lse))


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    m, hdim, v = shape["M"], shape["H"], shape["V"]
    gen = torch.Generator().manual_seed(seed)
    # Final hidden states after the last norm (unit scale); an LM head whose logits spread over a few
    # units (std 2), as trained heads do; about 1 target in 8 ignored (padding / prompt tokens).
    h = torch.randn(m, hdim, generator=gen)
    w = torch.randn(v, hdim, generator=gen) * (2.0 / hdim**0.5)
    target = torch.randint(0, v, (m,), generator=gen)
    target = torch.where(torch.rand(m, generator=gen) < 0.125, IGNORE_INDEX, target)  # no host read: fake-safe
    return h.to(dtype=dtype, device=device), w.to(dtype=dtype, device=device), target.to(device)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """Inputs that break fragile kernels, checked besides random ones (evaluator/judge/judge.py).

    - ``large_logits``: h x 40 (logits spread ~+-250: exp overflows without the running max);
    - ``all_ignored``: every target -100 (loss and gradients exactly zero; a kernel that averages or
      gathers target -100 reads out of bounds or divides by zero);
    - ``last_class``: every target V - 1 (the last, partial vocabulary block holds the target logit).
    """
    h, w, target = make_inputs(shape, dtype, seed, "cpu")
    sets = {
        "large_logits": (h.float() * 40.0, w, target),
        "all_ignored": (h, w, torch.full_like(target, IGNORE_INDEX)),
        "last_class": (h, w, torch.full_like(target, shape["V"] - 1)),
    }
    return {name: (a.to(dtype=dtype, device=device), b.to(device), t.to(device)) for name, (a, b, t) in sets.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # The forward's logits GEMM (2*M*V*H) plus ~4 operations per logit (max, exp, sum, target pick); the
    # backward does two GEMMs more (dh, dw) and the logits again if it recomputes them.
    m, hdim, v = shape["M"], shape["H"], shape["V"]
    return 2.0 * m * v * hdim + 4.0 * m * v


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # h and w read once, int64 targets read, fp32 loss written: never the logits.
    m, hdim, v = shape["M"], shape["H"], shape["V"]
    return float((m * hdim + v * hdim) * dtype.itemsize + 8 * m + 4 * m)


def peak_memory(shape: dict[str, int], dtype: torch.dtype) -> dict[str, float]:
    """Analytical extra bytes (beyond inputs, output and gradients) of the unfused path: ``logits`` is the
    fp32 [M, V] logits the reference holds; ``training`` adds autograd's saved softmax and the logits'
    gradient, both [M, V] fp32 (torch's cross_entropy saves its log-softmax)."""
    m, v = shape["M"], shape["V"]
    logits = 4.0 * m * v
    return {"logits": logits, "training": 3.0 * logits}
