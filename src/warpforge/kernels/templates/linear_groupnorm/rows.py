"""Linear + GroupNorm with programs that own whole rows, for groups of any width: each program takes BLOCK_M rows,
sweeps every column tile of them (a GEMM tile, the bias and the steps before the norm, in fp32) and parks the
row in fp32 scratch; then, group by group, it reads the group's features back three times from L2 (their sum
for the mean, the centered squares for the variance, then the normalized values, the affine and the steps after
the norm, stored). No constraint on the group's width, at the price of a second read of the [M, N] product; the
`grouped` template keeps groups of up to 512 features in registers instead.
"""

import torch
import triton
import triton.language as tl

TASK = "linear_groupnorm"
# The steps this template computes (kernels/chain_regions.py GROUPS): its `_step`'s and the GroupNorm (NORM_AT).
CHAIN_STEPS = ("elementwise", "param", "group_norm")
# ---- generated: constants (python -m warpforge.kernels.chain_regions) ----
# The chain: each step's op and scalars, "none" past its end (a member's constants replace these
# lines; the default is the task's default member).
OP1 = "group_norm"
A1 = 16.0
B1 = 1e-05
OP2 = "none"
A2 = 0.0
B2 = 0.0
OP3 = "none"
A3 = 0.0
B3 = 0.0
OP4 = "none"
A4 = 0.0
B4 = 0.0
OP5 = "none"
A5 = 0.0
B5 = 0.0
OP6 = "none"
A6 = 0.0
B6 = 0.0
# ---- end generated: constants ----
NORM_AT = 1
GROUPS = 16
EPS = 1e-05

# The pipeline holds num_stages x and w tiles in shared memory: at most the target's
# shape["SMEM_BYTES"] per block (the harness adds it: kernels/targets.py).


# ---- generated: vocabulary (python -m warpforge.kernels.chain_regions) ----
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
def _softplus(x):
    # log(1 + exp(x)) overflows for x > 88; max(x, 0) + log1p(exp(-|x|)) does not, with log1p by its series
    # where 1 + u rounds u away (u < 1e-3: u - u^2/2 + u^3/3, next term below 3e-13).
    u = tl.exp(-tl.abs(x))
    log1p = tl.where(u < 1e-3, u * (1.0 - u * (0.5 - u * (1.0 / 3.0))), tl.log(1.0 + u))
    return tl.maximum(x, 0.0) + log1p


@triton.jit
def _step(y, z, p, OP: tl.constexpr, A: tl.constexpr, B: tl.constexpr):
    # One step of the chain on the fp32 tile: y the running value, z the head's output with its bias, p the
    # parameter per output column or channel ([1, BLOCK_N], fp32).
    if OP == "none":
        out = y
    elif OP == "mul":
        out = y * A
    elif OP == "div":
        out = y / A
    elif OP == "add":
        out = y + A
    elif OP == "rsub":
        out = A - y
    elif OP == "add_z":
        out = y + z
    elif OP == "sub_z":
        out = y - z
    elif OP == "mul_z":
        out = y * z
    elif OP == "relu":
        out = tl.maximum(y, 0.0)
    elif OP == "leaky_relu":
        out = tl.where(y >= 0, y, y * A)
    elif OP == "gelu":
        out = 0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476))
    elif OP == "gelu_tanh":
        # 0.5 (1 + tanh(u)) is sigmoid(2u); 1 + tanh(u) cancels for y < -3 (2% off at y = -4.46, torch's fp32 0.6%)
        out = y / (1.0 + tl.exp(-1.5957691216057308 * (y + 0.044715 * y * y * y)))
    elif OP == "sigmoid":
        out = 1.0 / (1.0 + tl.exp(-y))
    elif OP == "tanh":
        out = _tanh(y)
    elif OP == "silu":
        out = y / (1.0 + tl.exp(-y))
    elif OP == "mish":
        out = y * _tanh(_softplus(y))
    elif OP == "clamp":
        out = tl.minimum(tl.maximum(y, A), B)
    elif OP == "max":
        out = tl.maximum(y, A)
    elif OP == "min":
        out = tl.minimum(y, A)
    elif OP == "hardswish":
        out = y * tl.minimum(tl.maximum(y + 3.0, 0.0), 6.0) / 6.0
    elif OP == "mul_mish":
        out = y * (y * _tanh(_softplus(y)))
    elif OP == "add_p":
        out = y + p
    elif OP == "sub_p":
        out = y - p
    elif OP == "mul_p":
        out = y * p
    elif OP == "div_p":
        out = y / p
    else:
        tl.static_assert(False, "a step this template does not declare in CHAIN_STEPS")
    return out


@triton.jit
def _steps(
    y,
    z,
    p,
    FIRST: tl.constexpr,
    LAST: tl.constexpr,
    OP1: tl.constexpr,
    A1: tl.constexpr,
    B1: tl.constexpr,
    OP2: tl.constexpr,
    A2: tl.constexpr,
    B2: tl.constexpr,
    OP3: tl.constexpr,
    A3: tl.constexpr,
    B3: tl.constexpr,
    OP4: tl.constexpr,
    A4: tl.constexpr,
    B4: tl.constexpr,
    OP5: tl.constexpr,
    A5: tl.constexpr,
    B5: tl.constexpr,
    OP6: tl.constexpr,
    A6: tl.constexpr,
    B6: tl.constexpr,
):
    # Steps FIRST..LAST of the chain, resolved at compile time (a step past its end is "none" and costs
    # nothing): a kernel with a row step or a norm runs those before it on tiles, those after it on the
    # reduced or normalized values.
    if FIRST <= 1 and 1 <= LAST:
        y = _step(y, z, p, OP1, A1, B1)
    if FIRST <= 2 and 2 <= LAST:
        y = _step(y, z, p, OP2, A2, B2)
    if FIRST <= 3 and 3 <= LAST:
        y = _step(y, z, p, OP3, A3, B3)
    if FIRST <= 4 and 4 <= LAST:
        y = _step(y, z, p, OP4, A4, B4)
    if FIRST <= 5 and 5 <= LAST:
        y = _step(y, z, p, OP5, A5, B5)
    if FIRST <= 6 and 6 <= LAST:
        y = _step(y, z, p, OP6, A6, B6)
    return y


# ---- end generated: vocabulary ----

SPACE = {
    "BLOCK_M": [16, 32, 64, 128],
    "BLOCK_N": [32, 64, 128, 256],
    "BLOCK_K": [32, 64, 128],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4],
}


def constraints(params, shape):
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    smem = params["num_stages"] * (bm * bk + bk * bn) * shape.get("ELEM_BYTES", 4)
    # fp32 accumulator per thread: more than 128 registers spills; the steps keep z and y live besides it
    return smem <= shape["SMEM_BYTES"] and bm * bn <= 4096 * params["num_warps"]


@triton.jit
def _linear_groupnorm_rows_kernel(
    a_ptr,
    b_ptr,
    bias_ptr,
    g_ptr,
    be_ptr,
    p_ptr,
    c_ptr,
    s_ptr,
    M,
    N,
    K,
    GS,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_bias,
    stride_g,
    stride_be,
    stride_p,
    stride_cm,
    stride_cn,
    stride_sm,
    # ---- generated: parameters (python -m warpforge.kernels.chain_regions) ----
    OP1: tl.constexpr,
    A1: tl.constexpr,
    B1: tl.constexpr,
    OP2: tl.constexpr,
    A2: tl.constexpr,
    B2: tl.constexpr,
    OP3: tl.constexpr,
    A3: tl.constexpr,
    B3: tl.constexpr,
    OP4: tl.constexpr,
    A4: tl.constexpr,
    B4: tl.constexpr,
    OP5: tl.constexpr,
    A5: tl.constexpr,
    B5: tl.constexpr,
    OP6: tl.constexpr,
    A6: tl.constexpr,
    B6: tl.constexpr,
    # ---- end generated: parameters ----
    NORM_AT: tl.constexpr,
    G: tl.constexpr,
    EPS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    pid_m = tl.program_id(0)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row = offs_cm < M
    # rows past the edge wrap around (loads stay in bounds); stores are masked
    offs_am = offs_cm % M
    offs_k = tl.arange(0, BLOCK_K)
    # pass 1: the GEMM and the steps before the norm, tile by tile, parked in fp32
    for n0 in range(0, N, BLOCK_N):
        offs_cn = n0 + tl.arange(0, BLOCK_N)
        offs_bn = offs_cn % N
        a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        bias = tl.load(bias_ptr + offs_bn * stride_bias).to(tl.float32)
        p = tl.load(p_ptr + offs_bn * stride_p).to(tl.float32)[None, :]
        z = acc + bias[None, :]
        y = _steps(
            z, z, p, 1, NORM_AT - 1, OP1, A1, B1, OP2, A2, B2, OP3, A3, B3, OP4, A4, B4, OP5, A5, B5, OP6, A6, B6
        )
        tl.store(s_ptr + offs_cm[:, None] * stride_sm + offs_cn[None, :], y, mask=row[:, None] & (offs_cn < N)[None, :])
    # the barrier makes every thread's scratch stores visible to the others'
    tl.debug_barrier()
    # pass 2, group by group: the mean, the variance of the centered values (E[y^2] - E[y]^2 cancels in fp32
    # where |mean| >> std), then the normalized values
    for g in range(0, G):
        g0 = g * GS
        total = tl.zeros((BLOCK_M,), dtype=tl.float32)
        for c0 in range(0, GS, BLOCK_N):
            offs = c0 + tl.arange(0, BLOCK_N)
            mask = row[:, None] & (offs < GS)[None, :]
            total += tl.sum(
                tl.load(s_ptr + offs_cm[:, None] * stride_sm + (g0 + offs)[None, :], mask=mask, other=0.0), axis=1
            )
        mean = total / GS
        squares = tl.zeros((BLOCK_M,), dtype=tl.float32)
        for c0 in range(0, GS, BLOCK_N):
            offs = c0 + tl.arange(0, BLOCK_N)
            mask = row[:, None] & (offs < GS)[None, :]
            y = tl.load(s_ptr + offs_cm[:, None] * stride_sm + (g0 + offs)[None, :], mask=mask, other=0.0)
            d = tl.where(mask, y - mean[:, None], 0.0)
            squares += tl.sum(d * d, axis=1)
        rstd = 1.0 / tl.sqrt(squares / GS + EPS)
        for c0 in range(0, GS, BLOCK_N):
            offs = c0 + tl.arange(0, BLOCK_N)
            inside = offs < GS
            mask = row[:, None] & inside[None, :]
            feat = tl.where(inside, g0 + offs, 0)
            y = tl.load(s_ptr + offs_cm[:, None] * stride_sm + feat[None, :], mask=mask, other=0.0)
            gamma = tl.load(g_ptr + feat * stride_g).to(tl.float32)
            beta = tl.load(be_ptr + feat * stride_be).to(tl.float32)
            p = tl.load(p_ptr + feat * stride_p).to(tl.float32)[None, :]
            yn = (y - mean[:, None]) * rstd[:, None] * gamma[None, :] + beta[None, :]
            out = _steps(
                yn, yn, p, NORM_AT + 1, 6, OP1, A1, B1, OP2, A2, B2, OP3, A3, B3, OP4, A4, B4, OP5, A5, B5, OP6, A6, B6
            )
            tl.store(
                c_ptr + offs_cm[:, None] * stride_cm + feat[None, :] * stride_cn,
                out.to(c_ptr.dtype.element_ty),
                mask=mask,
            )


def launch(x, w, b, gamma, beta, p, **params):
    M, K = x.shape
    N, K2 = w.shape
    assert K == K2, f"in_features differ: x is {tuple(x.shape)}, w is {tuple(w.shape)}"
    assert N % GROUPS == 0, f"{GROUPS} groups do not divide {N} features"
    # fp32 inputs: torch multiplies them in IEEE fp32; TF32 alone is 1e-3 off, tf32x3 within ~1e-6
    precision = "tf32x3" if x.dtype == torch.float32 else "tf32"
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    # the rows wait in fp32 whatever the output's dtype: statistics of rounded values would be off by the rounding
    scratch = torch.empty((M, N), device=x.device, dtype=torch.float32)
    bm = params["BLOCK_M"]
    _linear_groupnorm_rows_kernel[(triton.cdiv(M, bm),)](
        x,
        w,
        b,
        gamma,
        beta,
        p,
        y,
        scratch,
        M,
        N,
        K,
        N // GROUPS,
        x.stride(0),
        x.stride(1),
        w.stride(1),
        w.stride(0),
        b.stride(0),
        gamma.stride(0),
        beta.stride(0),
        p.stride(0),
        y.stride(0),
        y.stride(1),
        scratch.stride(0),
        # ---- generated: arguments (python -m warpforge.kernels.chain_regions) ----
        OP1=OP1,
        A1=A1,
        B1=B1,
        OP2=OP2,
        A2=A2,
        B2=B2,
        OP3=OP3,
        A3=A3,
        B3=B3,
        OP4=OP4,
        A4=A4,
        B4=B4,
        OP5=OP5,
        A5=A5,
        B5=B5,
        OP6=OP6,
        A6=A6,
        B6=B6,
        # ---- end generated: arguments ----
        NORM_AT=NORM_AT,
        G=GROUPS,
        EPS=EPS,
        BLOCK_M=bm,
        BLOCK_N=params["BLOCK_N"],
        BLOCK_K=params["BLOCK_K"],
        DOT_PRECISION=precision,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
