"""LayerNorm over the last dimension: ``y = (x - mean) / sqrt(var + eps) * w + b`` with eps = 1e-5.

``x`` is [M, N] activations, ``w`` and ``b`` have shape [N]; ``var`` is the biased (population)
variance, as in ``torch.nn.LayerNorm``. The output has the input's dtype; the whole expression is
computed in fp32 and rounded once.

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import layernorm
    >>> x, w, b = layernorm.make_inputs({"M": 2, "N": 8}, torch.float32, seed=0, device="cpu")
    >>> layernorm.reference(x, w, b).shape
    torch.Size([2, 8])
"""

from __future__ import annotations

import torch

NAME = "layernorm"
KIND = "normalization"
DESCRIPTION = "LayerNorm y = (x - mean) / sqrt(var + 1e-5) * w + b over the last dim of [M, N]; w, b [N]."

EPS = 1e-5

# A LayerNorm without affine parameters (elementwise_affine=False) is this task with w = 1 and b = 0.
FILL_INPUTS = {1: 1.0, 2: 0.0}

# Hidden sizes of 4096 and 8192 over several thousand tokens.
SHAPES: list[dict[str, int]] = [
    {"M": 4096, "N": 4096},
    {"M": 8192, "N": 8192},
    {"M": 16384, "N": 4096},
]

# Correctness-only boundary shapes (<= ~17.5k elements): one element (variance 0, y = b); primes
# below, just above (1031 = 1024 + 7) and well above (5003 > 4096) common block sizes so looped kernels
# run several partial chunks; M = 130 and 13 are not multiples of any rows-per-program count.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "N": 1},
    {"M": 13, "N": 67},
    {"M": 17, "N": 1031},
    {"M": 3, "N": 5003},
    {"M": 130, "N": 127},
]

SMALL_SHAPES: list[dict[str, int]] = [{"M": 64, "N": 4096}, {"M": 16, "N": 8192}]

DTYPES: list[torch.dtype] = [torch.float16, torch.bfloat16, torch.float32]

# Training: gradients of x, w and b. dw and db sum over all M rows, so their rounding grows with M; the
# comparator's allowance for the error torch itself makes in the input dtype covers that.
GRAD_INPUTS = (0, 1, 2)


def grad_scales(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, g: torch.Tensor) -> tuple[float, float, float]:
    """The magnitude of the terms dx, dw and db are computed from (the judge scales atol by it where it exceeds
    the gradient's own RMS; as rmsnorm's): dx = rstd * (w*g - mean(w*g) - xhat * mean(w*g*xhat)) has terms of
    size rstd*|w*g|; dw sums xhat*g and db sums g over rows. At N = 2, xhat is +-d/sqrt(d^2 + eps) for the
    half-difference d, so dx is rstd * (w*g's half-difference) * eps / (d^2 + eps): its terms cancel to ~1e-5
    of their size, one fp32 ulp of xhat (6e-8) is ~1% of dx there, torch's own fp32 is 0.5-3% off, and an
    honest kernel failed 87 of 200 seeds at M=1, N=2 against the gradient's own RMS (a hidden shape the
    judge draws from M=1, N=1 one time in four). Elsewhere the floor changes little: at N = 3-4 the terms'
    RMS is up to 2.5x dx's own (over 20 seeds at M = 13), at N = 67 within 3%; dw's and db's within 1.25x."""
    n = x.shape[-1]
    mean = x.mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt((x - mean).pow(2).mean(dim=-1, keepdim=True) + EPS)
    xhat = (x - mean) * rstd
    dx_terms = rstd * (w * g).abs()
    dw_terms = (xhat * g).pow(2).reshape(-1, n).sum(dim=0).sqrt()
    db_terms = g.pow(2).reshape(-1, n).sum(dim=0).sqrt()
    return tuple(float(t.pow(2).mean().sqrt()) for t in (dx_terms, dw_terms, db_terms))  # type: ignore[return-value]


def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    ct = torch.promote_types(x.dtype, torch.float32)
    y = torch.nn.functional.layer_norm(x.to(ct), (x.shape[-1],), w.to(ct), b.to(ct), eps=EPS)
    return y.to(x.dtype)


def make_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    m, n = shape["M"], shape["N"]
    # Activations: standard normal with a per-row scale in [0.5, 2] and a per-row offset of about
    # +-1 (a non-zero mean is what LayerNorm removes, and it exposes E[x^2] - E[x]^2 cancellation).
    row_scale = 0.5 + 1.5 * torch.rand(m, 1, generator=gen)
    row_shift = torch.randn(m, 1, generator=gen)
    x = torch.randn(m, n, generator=gen) * row_scale + row_shift
    w = 1.0 + 0.1 * torch.randn(n, generator=gen)
    b = 0.1 * torch.randn(n, generator=gen)
    return x.to(dtype=dtype, device=device), w.to(dtype=dtype, device=device), b.to(dtype=dtype, device=device)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Inputs that break fragile kernels, checked besides random ones (evaluator/judge/judge.py).

    - ``large_offset``: activations + 1000 (E[x^2] - E[x]^2 in float32 loses the variance of about 1 to
      cancellation: a one-pass variance is percent-wrong);
    - ``large_magnitude``: activations x 300 (squares near 1e5: fp16 accumulation overflows).
    """
    x, w, b = make_inputs(shape, dtype, seed, "cpu")
    sets = {"large_offset": x.float() + 1000.0, "large_magnitude": x.float() * 300.0}
    return {name: (t.to(dtype=dtype, device=device), w.to(device), b.to(device)) for name, t in sets.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # Per element: accumulate for the mean, subtract it, square, accumulate for the variance, scale by
    # rstd, scale by w, add b = 7 operations.
    return 7.0 * shape["M"] * shape["N"]


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # x read once, y written once, w and b read once.
    m, n = shape["M"], shape["N"]
    return (2.0 * m * n + 2.0 * n) * dtype.itemsize
