"""Linear + chain with programs that own whole output rows: each program takes BLOCK_M rows and sweeps every
column tile of them (a GEMM tile, the bias and the chain's steps in fp32), so a step that reduces each row (sum,
mean, max, min, logsumexp: ``RED_AT``) is folded across the tiles in registers and only [M] values are stored,
never the [M, N] product. Without a reduction the tiles are stored as they come (row-panel order: x's panel stays
in L1/L2 while w streams).

The steps after the reduction act on one value per row (KernelBench's ``logsumexp`` then activations).
A softmax (``SOFTMAX_AT``) takes a second pass: the first folds each row's max and rescaled sum and parks the row
in fp32 scratch, the second normalizes it. A pooling (``POOL_AT``) folds runs of k columns of a tile in registers
(BLOCK_N a multiple of k), so the steps after it, and the store, see N // k columns.
"""

import torch
import triton
import triton.language as tl

TASK = "linear_chain"
# The steps this template computes (kernels/chain_regions.py GROUPS): its `_step`'s but the per-column
# parameter's (it takes no PARAM_COLS), a row reduction or softmax and a 1-D pooling (RED_AT, SOFTMAX_AT,
# POOL_AT).
CHAIN_STEPS = ("elementwise", "row", "row_pool")
# ---- generated: constants (python -m warpforge.kernels.chain_regions) ----
# The chain: each step's op and scalars, "none" past its end (a member's constants replace these
# lines; the default is the task's default member).
OP1 = "gelu"
A1 = 0.0
B1 = 0.0
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
# The step (1-6) that reduces each row, its first scalar keepdim; 0: none.
RED_AT = 0
# The step that takes each row's softmax (computed in two passes over the row); 0: none.
SOFTMAX_AT = 0
# The step that pools runs of its first scalar's columns (a power of two); 0: none.
POOL_AT = 0

SPACE = {
    "BLOCK_M": [16, 32, 64, 128],
    "BLOCK_N": [32, 64, 128, 256],
    "BLOCK_K": [32, 64, 128],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4],
}

# The pipeline holds num_stages x and w tiles in shared memory: at most the target's
# shape["SMEM_BYTES"] per block (the harness adds it: kernels/targets.py).


def constraints(params, shape):
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    smem = params["num_stages"] * (bm * bk + bk * bn) * shape.get("ELEM_BYTES", 4)
    # a pooling's runs must not straddle tiles, and a tile pools to at least 2 values
    pool = int((A1, A2, A3, A4, A5, A6)[POOL_AT - 1]) if POOL_AT else 1
    # fp32 accumulator per thread: more than 128 registers spills; the chain keeps z and y live besides it
    return smem <= shape["SMEM_BYTES"] and bm * bn <= 4096 * params["num_warps"] and bn % pool == 0 and bn >= 2 * pool


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
def _step(y, z, OP: tl.constexpr, A: tl.constexpr, B: tl.constexpr):
    # One step of the chain on the fp32 tile: y the running value, z the head's output with its bias.
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
    else:
        tl.static_assert(False, "a step this template does not declare in CHAIN_STEPS")
    return out


@triton.jit
def _steps(
    y,
    z,
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
        y = _step(y, z, OP1, A1, B1)
    if FIRST <= 2 and 2 <= LAST:
        y = _step(y, z, OP2, A2, B2)
    if FIRST <= 3 and 3 <= LAST:
        y = _step(y, z, OP3, A3, B3)
    if FIRST <= 4 and 4 <= LAST:
        y = _step(y, z, OP4, A4, B4)
    if FIRST <= 5 and 5 <= LAST:
        y = _step(y, z, OP5, A5, B5)
    if FIRST <= 6 and 6 <= LAST:
        y = _step(y, z, OP6, A6, B6)
    return y


# ---- end generated: vocabulary ----


@triton.jit
def _linear_rows_kernel(
    a_ptr,
    b_ptr,
    bias_ptr,
    c_ptr,
    s_ptr,
    M,
    N,
    K,
    NP,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_bias,
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
    RED_AT: tl.constexpr,
    RED_OP: tl.constexpr,
    SOFTMAX_AT: tl.constexpr,
    POOL_AT: tl.constexpr,
    POOL_OP: tl.constexpr,
    POOL_K: tl.constexpr,
    PRE_LAST: tl.constexpr,
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
    # The width after the pooling (POOL_K = 1: none): a tile of BLOCK_N columns pools to BLOCK_P values.
    BLOCK_P: tl.constexpr = BLOCK_N // POOL_K
    # the running reduction of each row: a sum (sum, mean), an extremum, or logsumexp's and softmax's (max,
    # scaled sum)
    online: tl.constexpr = RED_OP == "row_logsumexp" or SOFTMAX_AT != 0
    red = tl.zeros((BLOCK_M,), dtype=tl.float32)
    if RED_OP == "row_max" or online:
        red = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    if RED_OP == "row_min":
        red = tl.full((BLOCK_M,), float("inf"), tl.float32)
    scaled = tl.zeros((BLOCK_M,), dtype=tl.float32)
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
        bias = tl.load(bias_ptr + offs_bn * stride_bias)
        z = acc + bias.to(tl.float32)[None, :]
        if POOL_AT == 0:
            y = _steps(z, z, 1, PRE_LAST, OP1, A1, B1, OP2, A2, B2, OP3, A3, B3, OP4, A4, B4, OP5, A5, B5, OP6, A6, B6)
            offs_on = offs_cn
        else:
            # pool each run of POOL_K columns (tiles start at multiples of POOL_K: BLOCK_N % POOL_K == 0); the
            # pooled columns past N // POOL_K (a partial run, or wrapped columns) are masked below
            y = _steps(
                z, z, 1, POOL_AT - 1, OP1, A1, B1, OP2, A2, B2, OP3, A3, B3, OP4, A4, B4, OP5, A5, B5, OP6, A6, B6
            )
            runs = tl.reshape(y, (BLOCK_M, BLOCK_P, POOL_K))
            if POOL_OP == "row_pool_max":
                y = tl.max(runs, axis=2)
            else:
                y = tl.sum(runs, axis=2) / POOL_K
            y = _steps(
                y,
                y,
                POOL_AT + 1,
                PRE_LAST,
                OP1,
                A1,
                B1,
                OP2,
                A2,
                B2,
                OP3,
                A3,
                B3,
                OP4,
                A4,
                B4,
                OP5,
                A5,
                B5,
                OP6,
                A6,
                B6,
            )
            offs_on = n0 // POOL_K + tl.arange(0, BLOCK_P)
        col = (offs_on < NP)[None, :]
        if SOFTMAX_AT != 0:
            # the row's values wait in fp32 scratch for its max and sum (pass 2 below)
            s_ptrs = s_ptr + offs_cm[:, None] * stride_sm + offs_on[None, :]
            tl.store(s_ptrs, y, mask=row[:, None] & col)
        if RED_AT == 0 and SOFTMAX_AT == 0:
            c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_on[None, :] * stride_cn
            tl.store(c_ptrs, y.to(c_ptr.dtype.element_ty), mask=row[:, None] & col)
        elif RED_OP == "row_sum" or RED_OP == "row_mean":
            red += tl.sum(tl.where(col, y, 0.0), axis=1)
        elif RED_OP == "row_max":
            red = tl.maximum(red, tl.max(tl.where(col, y, float("-inf")), axis=1))
        elif RED_OP == "row_min":
            red = tl.minimum(red, tl.min(tl.where(col, y, float("inf")), axis=1))
        elif online:
            # online logsumexp: rescale the running sum to the new row maximum
            top = tl.maximum(red, tl.max(tl.where(col, y, float("-inf")), axis=1))
            safe = tl.where(top == float("-inf"), 0.0, top)
            scaled = scaled * tl.exp(red - safe) + tl.sum(tl.where(col, tl.exp(y - safe[:, None]), 0.0), axis=1)
            red = top
    if RED_AT != 0:
        if RED_OP == "row_mean":
            red = red / NP
        if RED_OP == "row_logsumexp":
            red = tl.where(red == float("-inf"), red, red + tl.log(scaled))
        r = _steps(
            red, red, RED_AT + 1, 6, OP1, A1, B1, OP2, A2, B2, OP3, A3, B3, OP4, A4, B4, OP5, A5, B5, OP6, A6, B6
        )
        tl.store(c_ptr + offs_cm * stride_cm, r.to(c_ptr.dtype.element_ty), mask=row)
    if SOFTMAX_AT != 0:
        # pass 2: exp(y - max) / sum from the scratch this program wrote (the barrier makes every thread's
        # stores visible to the others'), then the steps after the softmax
        tl.debug_barrier()
        top = tl.where(red == float("-inf"), 0.0, red)
        for p0 in range(0, NP, BLOCK_P):
            offs_p = p0 + tl.arange(0, BLOCK_P)
            mask = row[:, None] & (offs_p < NP)[None, :]
            y = tl.load(s_ptr + offs_cm[:, None] * stride_sm + offs_p[None, :], mask=mask, other=0.0)
            e = tl.exp(y - top[:, None]) / scaled[:, None]
            e = _steps(
                e, e, SOFTMAX_AT + 1, 6, OP1, A1, B1, OP2, A2, B2, OP3, A3, B3, OP4, A4, B4, OP5, A5, B5, OP6, A6, B6
            )
            tl.store(
                c_ptr + offs_cm[:, None] * stride_cm + offs_p[None, :] * stride_cn,
                e.to(c_ptr.dtype.element_ty),
                mask=mask,
            )


def launch(x, w, b, p, **params):  # p [N]: read by no member this template takes (no PARAM_COLS)
    M, K = x.shape
    N, K2 = w.shape
    assert K == K2, f"in_features differ: x is {tuple(x.shape)}, w is {tuple(w.shape)}"
    # fp32 inputs: torch multiplies them in IEEE fp32; TF32 alone is 1e-3 off, tf32x3 within ~1e-6
    precision = "tf32x3" if x.dtype == torch.float32 else "tf32"
    ops = (OP1, OP2, OP3, OP4, OP5, OP6)
    args = (A1, A2, A3, A4, A5, A6)
    keep = args[RED_AT - 1] if RED_AT else 1.0
    pool = int(args[POOL_AT - 1]) if POOL_AT else 1
    NP = N // pool
    y = torch.empty((M, NP) if RED_AT == 0 else ((M, 1) if keep else (M,)), device=x.device, dtype=x.dtype)
    # a softmax's row waits in fp32 (the output's dtype may be half: exp of a rounded logit is off by its
    # rounding times the logit, 0.4 at 100 in fp16)
    scratch = torch.empty((M, NP), device=x.device, dtype=torch.float32) if SOFTMAX_AT else y
    bm = params["BLOCK_M"]
    _linear_rows_kernel[(triton.cdiv(M, bm),)](
        x,
        w,
        b,
        y,
        scratch,
        M,
        N,
        K,
        NP,
        x.stride(0),
        x.stride(1),
        w.stride(1),
        w.stride(0),
        b.stride(0),
        y.stride(0),
        y.stride(-1),
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
        RED_AT=RED_AT,
        RED_OP=ops[RED_AT - 1] if RED_AT else "none",
        SOFTMAX_AT=SOFTMAX_AT,
        POOL_AT=POOL_AT,
        POOL_OP=ops[POOL_AT - 1] if POOL_AT else "none",
        POOL_K=pool,
        PRE_LAST=(RED_AT or SOFTMAX_AT or 7) - 1,
        BLOCK_M=bm,
        BLOCK_N=params["BLOCK_N"],
        BLOCK_K=params["BLOCK_K"],
        DOT_PRECISION=precision,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
