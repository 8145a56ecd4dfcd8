"""Row softmax over the last dimension: ``y[m, :] = exp(x[m, :] - max) / sum(exp(x[m, :] - max))``.

The output has the input's dtype. Typical uses: attention probabilities (rows of a few thousand keys)
and sampling over a vocabulary (rows of 32k and more).

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import softmax
    >>> (x,) = softmax.make_inputs({"M": 2, "N": 8}, torch.float32, seed=0, device="cpu")
    >>> softmax.reference(x).sum(dim=-1)  # doctest: +SKIP
    tensor([1.0000, 1.0000])
"""

from __future__ import annotations

import torch

NAME = "softmax"
KIND = "reduction"
DESCRIPTION = "Row softmax over the last dim of an [M, N] tensor; output in the input dtype."

# Benchmark shapes: attention-sized rows (4096/8192 keys) for many tokens, and a long row (32k) that
# a single-block kernel can only just hold. Every N stays <= 65536 so whole-row templates are valid on
# every benchmark shape.
SHAPES: list[dict[str, int]] = [
    {"M": 4096, "N": 4096},
    {"M": 8192, "N": 8192},
    {"M": 16384, "N": 4096},
    {"M": 1024, "N": 32768},
]

# Correctness-only boundary shapes, kept small for the interpreter (<= ~17.5k elements each): a
# single element; primes below, just above (1031 = 1024 + 7) and well above (5003 > 4096) common block
# sizes so looped kernels run several partial chunks; M = 130 and 13 are not multiples of any
# rows-per-program count.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "N": 1},
    {"M": 13, "N": 67},
    {"M": 17, "N": 1031},
    {"M": 3, "N": 5003},
    {"M": 130, "N": 127},
]

SMALL_SHAPES: list[dict[str, int]] = [{"M": 64, "N": 4096}, {"M": 8, "N": 32768}]

DTYPES: list[torch.dtype] = [torch.float32, torch.float16, torch.bfloat16]

# Training: the gradient of x (dx = y * (dy - sum(dy * y)) per row), judged with the forward's tolerances.
GRAD_INPUTS = (0,)

# Logits of a few units: standard normal times 3 gives row maxima around 10 and a long exponential
# tail, close to attention scores after scaling by 1/sqrt(d).
LOGIT_SCALE = 3.0


def reference(x: torch.Tensor) -> torch.Tensor:
    xf = x.to(torch.promote_types(x.dtype, torch.float32))
    return torch.softmax(xf, dim=-1).to(x.dtype)


def grad_scales(x: torch.Tensor, g: torch.Tensor) -> tuple[float]:
    """The magnitude of the terms dx is computed from (the judge scales atol by it where it exceeds the gradient's
    own RMS): dx = y * (g - sum(g * y)) subtracts terms of size y*|g| and y*|sum(g * y)|, which cancel where a row
    is near one-hot (large-magnitude logits): there an fp32 kernel is about an ulp of |g| off whatever it does
    (1.04 ulp at M=17, N=1031 against an allowance of 1.17e-7 from the gradient's RMS), and the terms' RMS is 67x
    the gradient's."""
    y = torch.softmax(x, dim=-1)
    terms = y * (g.abs() + (g * y).sum(dim=-1, keepdim=True).abs())
    return (float(terms.pow(2).mean().sqrt()),)


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape["M"], shape["N"], generator=gen, dtype=torch.float32) * LOGIT_SCALE
    return (x.to(dtype=dtype, device=device),)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor]]:
    """Inputs that break fragile softmaxes, checked besides random ones (evaluator/judge/judge.py).

    - ``large_offset``: every logit + 1000 (exp(1000) overflows every float format: a kernel without
      max subtraction gives inf/inf = NaN; fp16 still holds 1000 + 3 randn to 0.5);
    - ``large_magnitude``: logits x 10 (a spread of about +-90, past exp's float32 range at 88.7);
    - ``masked``: about half of each row -inf (attention masks), the row's first element kept finite
      so the reference stays finite.
    """
    (x,) = make_inputs(shape, dtype, seed, "cpu")
    x32 = x.float()
    gen = torch.Generator().manual_seed(seed + 1)
    mask = torch.rand(x.shape, generator=gen) < 0.5
    mask[:, 0] = False
    masked = x32.masked_fill(mask, float("-inf"))
    sets = {"large_offset": x32 + 1000.0, "large_magnitude": x32 * 10.0, "masked": masked}
    return {name: (t.to(dtype=dtype, device=device),) for name, t in sets.items()}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # Per element: max, subtract, exp, sum, scale by 1/sum = 5 operations.
    return 5.0 * shape["M"] * shape["N"]


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # x read once, y written once.
    return 2.0 * shape["M"] * shape["N"] * dtype.itemsize
