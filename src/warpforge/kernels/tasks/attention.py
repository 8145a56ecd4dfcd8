"""Scaled dot-product attention (FlashAttention's problem), causal or full, with grouped-query heads.

``q`` is [B, HQ, S, D], ``k`` and ``v`` are [B, HKV, S, D] with HQ % HKV == 0 (query head h reads KV head
h // (HQ / HKV)); ``out = softmax(q k^T / sqrt(D) + mask) v`` with the causal mask (key j visible to query i
iff j <= i) when ``causal`` is true, computed in fp32 and rounded once to the input dtype. Gradients of q, k
and v (GQA: a KV head's gradient sums over its query heads).

The shape key CAUSAL names the masking of a shape (shapes are dict[str, int]). The judge calls
``reference(q, k, v)`` and ``launch(q, k, v, **params)``, which cannot see the shape, so the task's shapes all
have CAUSAL = 1 and ``causal`` defaults to True; full attention is the keyword ``causal=False``, which every
template takes too (its tests check both).

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import attention
    >>> shape = {"B": 1, "HQ": 4, "HKV": 2, "S": 5, "D": 64, "CAUSAL": 1}
    >>> q, k, v = attention.make_inputs(shape, torch.float32, seed=0, device="cpu")
    >>> attention.reference(q, k, v).shape
    torch.Size([1, 4, 5, 64])
"""

from __future__ import annotations

import math

import torch

NAME = "attention"
KIND = "attention"
DESCRIPTION = (
    "attention out = softmax(q k^T / sqrt(D), causal) v; q [B, HQ, S, D], k/v [B, HKV, S, D] (GQA); "
    "forward and backward (dq, dk, dv)"
)

GRAD_INPUTS = (0, 1, 2)

# Llama-3-8B (32 query heads, 8 KV heads, D 128) at 4k and 8k context; a D-64 model with plain multi-head
# attention (GPT-2/Llama-7B-style heads) at 2k.
SHAPES: list[dict[str, int]] = [
    {"B": 1, "HQ": 32, "HKV": 8, "S": 4096, "D": 128, "CAUSAL": 1},
    {"B": 1, "HQ": 32, "HKV": 8, "S": 8192, "D": 128, "CAUSAL": 1},
    {"B": 4, "HQ": 16, "HKV": 16, "S": 2048, "D": 64, "CAUSAL": 1},
]

# The interpreter runs every program of every check (forward, preprocess, backward): tiny sizes. S = 3 (not 1:
# with one key, dQ is exactly zero and only rounding noise is compared), a
# prime (67) and 13 (not a multiple of any block); D 64 and 128; GQA groups of 1, 2 and 3.
CHECK_SHAPES: list[dict[str, int]] = [
    {"B": 1, "HQ": 1, "HKV": 1, "S": 3, "D": 64, "CAUSAL": 1},
    {"B": 1, "HQ": 2, "HKV": 1, "S": 67, "D": 64, "CAUSAL": 1},
    {"B": 2, "HQ": 3, "HKV": 1, "S": 13, "D": 128, "CAUSAL": 1},
]

# For the matcher (evaluator/judge/matching.py): distinct sizes with HQ a multiple of HKV (distinct primes never
# are).
MATCH_PROBES: list[dict[str, int]] = [{"B": 2, "HQ": 6, "HKV": 3, "S": 11, "D": 16, "CAUSAL": 1}]

SMALL_SHAPES: list[dict[str, int]] = [{"B": 1, "HQ": 4, "HKV": 2, "S": 256, "D": 128, "CAUSAL": 1}]

# fp32 is left out: tl.dot on fp32 runs as TF32 on the GPU (10-bit mantissa), which an fp32 tolerance refuses.
DTYPES: list[torch.dtype] = [torch.bfloat16, torch.float16]

# Gradients pass through more roundings than the output: P and dS are rounded to the input dtype before
# their tensor-core products (as in FlashAttention-2), and dK/dV sum S of them; FlashAttention's own tests
# allow about twice the forward's error for them.
GRAD_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (6e-2, 6e-2),
}


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    ct = torch.promote_types(q.dtype, torch.float32)
    group = q.shape[1] // k.shape[1]
    kf = k.to(ct).repeat_interleave(group, dim=1)
    vf = v.to(ct).repeat_interleave(group, dim=1)
    scores = (q.to(ct) @ kf.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        s = q.shape[-2]
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ vf).to(q.dtype)


def grad_scales(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor) -> tuple[float, float, float]:
    """The magnitude of the terms dq, dk and dv sum (the judge scales atol by it where it exceeds a gradient's
    own RMS). With dP = g @ v^T, delta = rowsum(g * out) and dS = P * (dP - delta): dq = scale * dS @ k sums
    scale * P * (|dP| + |delta|) * |k|, dk likewise with |q|, dv = P^T @ g sums P * |g|. On the task's
    'peaked' inputs (scores spread +-40) P is nearly one-hot and dP - delta cancels: an honest FlashAttention-2
    backward (delta from the output rounded to fp16, as FA2 computes it) was 2e-3 off a dq of 8e-3 there,
    against 1.3e-3 allowed from the gradient's own RMS."""
    group = q.shape[1] // k.shape[1]
    kf, vf = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ kf.transpose(-1, -2)) * scale
    s = q.shape[-2]
    scores = scores.masked_fill(~torch.ones(s, s, dtype=torch.bool, device=q.device).tril(), float("-inf"))
    p = torch.softmax(scores, dim=-1)
    dp = g @ vf.transpose(-1, -2)
    delta = (g * (p @ vf)).sum(-1, keepdim=True)
    ds_terms = p * (dp.abs() + delta.abs())
    dq = scale * ds_terms @ kf.abs()
    dk = (scale * ds_terms.transpose(-1, -2) @ q.abs()).unflatten(1, (k.shape[1], group)).sum(2)
    dv = (p.transpose(-1, -2) @ g.abs()).unflatten(1, (v.shape[1], group)).sum(2)
    return tuple(float(t.pow(2).mean().sqrt()) for t in (dq, dk, dv))  # type: ignore[return-value]


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    b, hq, hkv, s, d = shape["B"], shape["HQ"], shape["HKV"], shape["S"], shape["D"]
    if hq % hkv:
        raise ValueError(f"HQ={hq} is not a multiple of HKV={hkv}")
    gen = torch.Generator().manual_seed(seed)
    # Unit-variance q and k give scores of unit variance after the 1/sqrt(D) scale, as trained models'
    # normalised queries and keys roughly do.
    q = torch.randn(b, hq, s, d, generator=gen)
    k = torch.randn(b, hkv, s, d, generator=gen)
    v = torch.randn(b, hkv, s, d, generator=gen)
    return tuple(t.to(dtype=dtype, device=device) for t in (q, k, v))


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """Inputs that break fragile kernels, checked besides random ones (evaluator/judge/judge.py).

    - ``peaked``: q x 12 (scores with a spread of ~+-40 after scaling: exp overflows fp32 past 88 without
      the running max, and each row's softmax is nearly one-hot, so a stale max after a rescale shows);
    - ``shared_offset``: every key + 4 along one direction that q also leans on (all scores of a row shifted
      by the same large amount: the softmax is unchanged, a kernel that drops the max subtraction is not).
    """
    q, k, v = make_inputs(shape, dtype, seed, "cpu")
    qf, kf = q.float(), k.float()
    lean = torch.zeros(shape["D"])
    lean[0] = 1.0
    sets = {"peaked": (qf * 12.0, kf, v.float()), "shared_offset": (qf + 8.0 * lean, kf + 4.0 * lean, v.float())}
    return {name: tuple(t.to(dtype=dtype, device=device) for t in ts) for name, ts in sets.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # Two GEMMs (q k^T and p v) of 2*S*S*D each per query head; the causal mask halves the work.
    b, hq, s, d = shape["B"], shape["HQ"], shape["S"], shape["D"]
    full = 4.0 * b * hq * s * s * d
    return full / 2 if shape.get("CAUSAL", 1) else full


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # q read and out written once, k and v read once per KV head (the ideal of a fused kernel that keeps
    # scores on chip), plus the saved fp32 logsumexp.
    b, hq, hkv, s, d = shape["B"], shape["HQ"], shape["HKV"], shape["S"], shape["D"]
    return float((2 * b * hq * s * d + 2 * b * hkv * s * d) * dtype.itemsize + 4 * b * hq * s)
