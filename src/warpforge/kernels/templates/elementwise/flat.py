"""Unary elementwise op, the tensor as one flat range: each program maps BLOCK contiguous elements through
``_op`` (the family's operation, selected by the constants OP, OP_A and OP_B at compile time, so the other
branches cost nothing). Computes in fp32 and rounds once to the output dtype."""

import torch
import triton
import triton.language as tl

TASK = "elementwise"
# The family member (kernels/tasks/elementwise.py MEMBERS): the matcher rewrites these three lines.
OP = "gelu"
OP_A = 0.0
OP_B = 0.0

SPACE = {
    "BLOCK": [256, 512, 1024, 2048, 4096],
    "num_warps": [1, 2, 4, 8],
    # No loop to pipeline.
    "num_stages": [1],
}

# Above 16 fp32 values per thread the loads no longer vectorize into 128-bit accesses better than they do
# at 4-8, and registers grow with the op's temporaries (mish keeps ~6 live).
MAX_ELEMS_PER_THREAD = 16


def constraints(params, shape):
    return params["BLOCK"] // (32 * params["num_warps"]) <= MAX_ELEMS_PER_THREAD


@triton.jit
def _tanh(x):
    # 1 - exp(-2|x|) cancels below |x| ~ 0.1 (3e-4 relative at 1e-4): there the odd series to x^5, whose
    # next term 17x^7/315 is below 6e-8 relative.
    ax = tl.abs(x)
    t = tl.exp(-2.0 * ax)
    big = (1.0 - t) / (1.0 + t)
    x2 = x * x
    small = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0)))
    return tl.where(ax < 0.1, small, tl.where(x < 0, -big, big))


@triton.jit
def _expm1(x):
    # exp(x) - 1 cancels for small |x|; the series to x^5 is within 2e-8 relative below 0.1.
    small = x * (1.0 + x * (0.5 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x * (1.0 / 120.0)))))
    return tl.where(tl.abs(x) < 0.1, small, tl.exp(x) - 1.0)


@triton.jit
def _softplus(x):
    # log(1 + exp(x)) overflows for x > 88; max(x, 0) + log1p(exp(-|x|)) does not, with log1p by its series
    # where 1 + u rounds u away (u < 1e-3: u - u^2/2 + u^3/3, next term below 3e-13).
    u = tl.exp(-tl.abs(x))
    log1p = tl.where(u < 1e-3, u * (1.0 - u * (0.5 - u * (1.0 / 3.0))), tl.log(1.0 + u))
    return tl.maximum(x, 0.0) + log1p


@triton.jit
def _op(x, OP: tl.constexpr, OP_A: tl.constexpr, OP_B: tl.constexpr):
    if OP == "relu":
        y = tl.maximum(x, 0.0)
    elif OP == "leaky_relu":
        y = tl.where(x >= 0, x, x * OP_A)
    elif OP == "sigmoid":
        y = 1.0 / (1.0 + tl.exp(-x))
    elif OP == "tanh":
        y = _tanh(x)
    elif OP == "gelu":
        y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    elif OP == "gelu_tanh":
        # 0.5 * (1 + tanh(u)) is sigmoid(2u): written as 1 + tanh(u), it cancels for x < -3 (1 - (1-t)/(1+t)
        # with t ~ 1e-6 keeps one ulp of 1 over ~3e-6: 2% off at x = -4.46, beyond the 0.6% torch's own fp32
        # is off there, so a one-element check failed 9 of 400 seeds); 1 + exp(-2u) does not cancel
        y = x / (1.0 + tl.exp(-1.5957691216057308 * (x + 0.044715 * x * x * x)))
    elif OP == "selu":
        y = 1.0507009873554805 * tl.where(x > 0, x, 1.6732632423543772 * _expm1(tl.minimum(x, 0.0)))
    elif OP == "elu":
        y = tl.where(x > 0, x, OP_A * _expm1(tl.minimum(x, 0.0)))
    elif OP == "hardsigmoid":
        y = tl.minimum(tl.maximum(x / 6.0 + 0.5, 0.0), 1.0)
    elif OP == "hardswish":
        y = x * tl.minimum(tl.maximum(x + 3.0, 0.0), 6.0) / 6.0
    elif OP == "hardtanh":
        y = tl.minimum(tl.maximum(x, OP_A), OP_B)
    elif OP == "softplus":
        y = _softplus(x)
    elif OP == "softsign":
        y = x / (1.0 + tl.abs(x))
    elif OP == "silu":
        y = x / (1.0 + tl.exp(-x))
    elif OP == "mish":
        y = x * _tanh(_softplus(x))
    elif OP == "abs":
        y = tl.abs(x)
    else:
        tl.static_assert(False, "unknown elementwise OP")
    return y


@triton.jit
def _flat_kernel(x_ptr, y_ptr, n, OP: tl.constexpr, OP_A: tl.constexpr, OP_B: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = _op(x, OP, OP_A, OP_B)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, **params):
    xc = x.contiguous()
    y = torch.empty_like(xc)
    n = xc.numel()
    grid = (triton.cdiv(n, params["BLOCK"]),)
    _flat_kernel[grid](
        xc,
        y,
        n,
        OP=OP,
        OP_A=OP_A,
        OP_B=OP_B,
        BLOCK=params["BLOCK"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
