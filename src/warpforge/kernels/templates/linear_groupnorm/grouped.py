"""Linear + GroupNorm with programs that own whole groups: a program takes BLOCK_M rows and BLOCK_N // GP whole
groups of features (GP: a group's N / G features padded to a power of two), multiplies their columns of w
(gathered group by group, the padded lanes masked), and normalizes each (row, group) in registers: the
statistics never leave the program and the [M, N] product is stored once. A group wider than the widest tile
(512 features) is the `rows` template's. KernelBench's groups are 16 to 512 features wide.
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


def _padded_group(n):
    """A group's features padded to a power of two: the lanes a program gives each group."""
    return triton.next_power_of_2(max(1, n // GROUPS))


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
    "BLOCK_N": [32, 64, 128, 256, 512],
    "BLOCK_K": [32, 64],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4],
}


def constraints(params, shape):
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    smem = params["num_stages"] * (bm * bk + bk * bn) * shape.get("ELEM_BYTES", 4)
    # whole groups per tile; the fp32 tile and its centered copy live together: at most 64 of each per thread
    return smem <= shape["SMEM_BYTES"] and bn >= _padded_group(shape["N"]) and bm * bn <= 2048 * params["num_warps"]


@triton.jit
def _linear_groupnorm_kernel(
    a_ptr,
    b_ptr,
    bias_ptr,
    g_ptr,
    be_ptr,
    p_ptr,
    c_ptr,
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
    GP: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_g = tl.program_id(1)
    NG: tl.constexpr = BLOCK_N // GP
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row = offs_cm < M
    # rows past the edge wrap around (loads stay in bounds); stores are masked
    offs_am = offs_cm % M
    # lane j of the tile is feature j % GP of group pid_g * NG + j // GP; padded lanes and groups past G read
    # feature 0 and are masked out of the statistics and the store
    lane = tl.arange(0, BLOCK_N)
    grp = pid_g * NG + lane // GP
    within = lane % GP
    col = (grp < G) & (within < GS)
    offs_n = tl.where(col, grp * GS + within, 0)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    bias = tl.load(bias_ptr + offs_n * stride_bias).to(tl.float32)
    p = tl.load(p_ptr + offs_n * stride_p).to(tl.float32)[None, :]
    z = acc + bias[None, :]
    y = _steps(z, z, p, 1, NORM_AT - 1, OP1, A1, B1, OP2, A2, B2, OP3, A3, B3, OP4, A4, B4, OP5, A5, B5, OP6, A6, B6)
    # statistics per (row, group): the mean, then the mean square of the centered values (E[y^2] - E[y]^2
    # cancels in fp32 where |mean| >> std: 6e-4 of a unit variance at a mean of 100)
    keep = tl.reshape(tl.where(col, 1.0, 0.0), (1, NG, GP))
    y3 = tl.reshape(y, (BLOCK_M, NG, GP)) * keep
    mean = tl.sum(y3, axis=2) / GS
    d = (y3 - mean[:, :, None]) * keep
    var = tl.sum(d * d, axis=2) / GS
    rstd = 1.0 / tl.sqrt(var + EPS)
    yn = tl.reshape(d * rstd[:, :, None], (BLOCK_M, BLOCK_N))
    gamma = tl.load(g_ptr + offs_n * stride_g).to(tl.float32)
    beta = tl.load(be_ptr + offs_n * stride_be).to(tl.float32)
    yn = yn * gamma[None, :] + beta[None, :]
    out = _steps(yn, z, p, NORM_AT + 1, 6, OP1, A1, B1, OP2, A2, B2, OP3, A3, B3, OP4, A4, B4, OP5, A5, B5, OP6, A6, B6)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, out.to(c_ptr.dtype.element_ty), mask=row[:, None] & col[None, :])


def launch(x, w, b, gamma, beta, p, **params):
    M, K = x.shape
    N, K2 = w.shape
    assert K == K2, f"in_features differ: x is {tuple(x.shape)}, w is {tuple(w.shape)}"
    assert N % GROUPS == 0, f"{GROUPS} groups do not divide {N} features"
    # fp32 inputs: torch multiplies them in IEEE fp32; TF32 alone is 1e-3 off, tf32x3 within ~1e-6
    precision = "tf32x3" if x.dtype == torch.float32 else "tf32"
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    bm, bn = params["BLOCK_M"], params["BLOCK_N"]
    gp = _padded_group(N)
    _linear_groupnorm_kernel[(triton.cdiv(M, bm), triton.cdiv(GROUPS, bn // gp))](
        x,
        w,
        b,
        gamma,
        beta,
        p,
        y,
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
        GP=gp,
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=params["BLOCK_K"],
        DOT_PRECISION=precision,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
