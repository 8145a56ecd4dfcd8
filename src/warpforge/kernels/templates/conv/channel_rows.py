"""Convolution + chain with programs that own every output channel of their output positions: a program takes
BLOCK_M output positions of one image and sweeps each group's channel tiles of BLOCK_N (an implicit-GEMM tile on
the tensor cores, its bias and the chain's steps in fp32), so the chain may act across the channels or the
image, and the [N, C_out, ...] convolution is never stored:

- ``RED_AT``: a reduction over the channels (min, max, sum, mean, logsumexp; keepdim), folded across the tiles
  in registers; [N, 1, OD, OH, OW] stored (KernelBench's conv + min/max/logsumexp over dim 1);
- ``SOFTMAX_AT``: a softmax over the channels, in registers when one tile holds every channel (one group,
  C_out <= BLOCK_N: KernelBench's 16 to 128 channels); otherwise a first pass folds each position's max and
  rescaled sum and parks its values in fp32 scratch, and a second normalizes them;
- ``POOL_AT``: a global average pooling: each program adds its positions' per-channel sums into the image's fp32
  totals with atomics, and the image's last program to finish (an atomic count) takes the means and applies the
  steps after the pooling to them, a reduction over the channels among them (``RED_AT`` past ``POOL_AT``:
  KernelBench 42's logsumexp); [N, C_out, 1, 1, 1] or [N, 1, 1, 1, 1] stored. The totals' order of addition
  varies from run to run (fp32 atomics: ~1e-7 relative).

Without any of them (the task's plain member) the tiles are stored as they come: the implicit GEMM's work with
a group's channel tiles in one program.
"""

import torch
import triton
import triton.language as tl

TASK = "conv"
# The member (kernels/tasks/conv.py): rewritten by the matcher with the problem's hyperparameters. The task
# conv_transpose runs this file with TASK and TRANSPOSED rewritten (kernels/members.py DERIVED_TEMPLATES).
TRANSPOSED = False
STRIDE_D = 1
STRIDE_H = 1
STRIDE_W = 1
PAD_D = 0
PAD_H = 0
PAD_W = 0
DIL_D = 1
DIL_H = 1
DIL_W = 1
OUT_PAD_D = 0
OUT_PAD_H = 0
OUT_PAD_W = 0
# The steps this template computes (kernels/chain_regions.py GROUPS): its `_step`'s, a reduction or softmax
# over the channels and a global average pooling (RED_AT, SOFTMAX_AT, POOL_AT).
CHAIN_STEPS = ("elementwise", "param", "row", "spatial_mean")
# ---- generated: constants (python -m warpforge.kernels.chain_regions) ----
# The chain: each step's op and scalars, "none" past its end (a member's constants replace these
# lines; the default is the task's default member).
OP1 = "none"
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
# The step (1-6) that reduces over the channels (keepdim), the one that takes their softmax, the one that pools
# globally; 0: none (kernels/channel_steps.py: a member sets all three, or none for an elementwise chain).
RED_AT = 0
SOFTMAX_AT = 0
POOL_AT = 0

# No tile below 4096 outputs (the implicit GEMM's reason: the interpreter pays per tile op); BLOCK_N 16 for
# KernelBench's 16-channel problems (58, 78, 96), where a 64-wide tile would compute 3/4 padding.
SPACE = {
    "BLOCK_M": [128, 256, 64],
    "BLOCK_N": [64, 128, 32, 16],
    "BLOCK_K": [32, 64],
    "num_warps": [4, 8],
    "num_stages": [2, 3],
}

# The pipeline holds num_stages x and w tiles in shared memory: at most the target's
# shape["SMEM_BYTES"] per block (the harness adds it: kernels/targets.py).


def constraints(params, shape):
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    warps, stages = params["num_warps"], params["num_stages"]
    smem = stages * (bm * bk + bk * bn) * shape.get("ELEM_BYTES", 4)
    if smem > shape["SMEM_BYTES"] or bm * bn < 4096:
        return False
    # the fp32 accumulator and the gather's index tiles share 255 registers a thread: 64 accumulator values a
    # thread at most (as the implicit GEMM), 32 index values
    return bm * bn <= 2048 * warps and bm * bk <= 1024 * warps


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


@triton.jit
def _conv_tile(
    x_ptr,
    w_ptr,
    b_ptr,
    x_row,
    o_d,
    o_h,
    o_w,
    m_ok,
    g,
    offs_n,
    co,
    n_ok,
    D,
    H,
    W,
    KD,
    KH,
    KW,
    CIN_G,
    K,
    sxc,
    sxd,
    sxh,
    sxw,
    sw0,
    sw1,
    swd,
    swh,
    sww,
    sb,
    TRANSPOSED: tl.constexpr,
    STRIDE_D: tl.constexpr,
    STRIDE_H: tl.constexpr,
    STRIDE_W: tl.constexpr,
    DIL_D: tl.constexpr,
    DIL_H: tl.constexpr,
    DIL_W: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    # z = conv + bias of BLOCK_M output positions x BLOCK_N channels of group g (the implicit GEMM's tile):
    # offs_n the channels within the group, co the same channels among all C_out
    x_row = x_row + g * CIN_G * sxc
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)  # (input channel of the group, kd, kh, kw), kw fastest
        k_ok = offs_k < K
        kw = offs_k % KW
        r = offs_k // KW
        kh = r % KH
        r = r // KH
        kd = r % KD
        ci = r // KD
        if TRANSPOSED:
            # output o takes input i = (o + pad - k * dil) / stride where that is whole and in range
            t_d = o_d[:, None] - (kd * DIL_D)[None, :]
            t_h = o_h[:, None] - (kh * DIL_H)[None, :]
            t_w = o_w[:, None] - (kw * DIL_W)[None, :]
            i_d = t_d // STRIDE_D
            i_h = t_h // STRIDE_H
            i_w = t_w // STRIDE_W
            ok = (
                (t_d >= 0)
                & (i_d * STRIDE_D == t_d)
                & (i_d < D)
                & (t_h >= 0)
                & (i_h * STRIDE_H == t_h)
                & (i_h < H)
                & (t_w >= 0)
                & (i_w * STRIDE_W == t_w)
                & (i_w < W)
            )
            a_ptrs = x_ptr + x_row[:, None] + (ci * sxc)[None, :] + i_d * sxd + i_h * sxh + i_w * sxw
        else:
            # input index o * stride - pad + k * dil, in [0, size) unless in the padding
            k_d = kd * DIL_D
            k_h = kh * DIL_H
            k_w = kw * DIL_W
            ok = (
                (o_d[:, None] >= -k_d[None, :])
                & (o_d[:, None] < (D - k_d)[None, :])
                & (o_h[:, None] >= -k_h[None, :])
                & (o_h[:, None] < (H - k_h)[None, :])
                & (o_w[:, None] >= -k_w[None, :])
                & (o_w[:, None] < (W - k_w)[None, :])
            )
            x_col = ci * sxc + k_d * sxd + k_h * sxh + k_w * sxw
            x_origin = x_row + o_d * sxd + o_h * sxh + o_w * sxw
            a_ptrs = x_ptr + (x_origin[:, None] + x_col[None, :])
        a = tl.load(a_ptrs, mask=ok & m_ok[:, None] & k_ok[None, :], other=0.0)
        tap = kd * swd + kh * swh + kw * sww
        if TRANSPOSED:  # w [C_in, C_out / G, k...]
            w_ptrs = w_ptr + (g * CIN_G + ci)[:, None] * sw0 + offs_n[None, :] * sw1 + tap[:, None]
        else:  # w [C_out, C_in / G, k...]
            w_ptrs = w_ptr + co[None, :] * sw0 + (ci * sw1 + tap)[:, None]
        wt = tl.load(w_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, wt, acc, input_precision=DOT_PRECISION)
    bias = tl.load(b_ptr + co * sb, mask=n_ok, other=0.0)
    return acc + bias.to(tl.float32)[None, :]


@triton.jit
def _conv_rows_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    p_ptr,
    y_ptr,
    s_ptr,
    t_ptr,
    c_ptr,
    D,
    H,
    W,
    OD,
    OH,
    OW,
    KD,
    KH,
    KW,
    CIN_G,
    COUT_G,
    G,
    C_OUT,
    P,
    K,
    sxn,
    sxc,
    sxd,
    sxh,
    sxw,
    sw0,
    sw1,
    swd,
    swh,
    sww,
    sb,
    sp,
    syn,
    syc,
    syd,
    syh,
    syw,
    TRANSPOSED: tl.constexpr,
    STRIDE_D: tl.constexpr,
    STRIDE_H: tl.constexpr,
    STRIDE_W: tl.constexpr,
    PAD_D: tl.constexpr,
    PAD_H: tl.constexpr,
    PAD_W: tl.constexpr,
    DIL_D: tl.constexpr,
    DIL_H: tl.constexpr,
    DIL_W: tl.constexpr,
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
    ONE_TILE: tl.constexpr,
    PRE_LAST: tl.constexpr,
    POOL_LAST: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    pid_p = tl.program_id(0)
    img = tl.program_id(1)
    offs_m = pid_p * BLOCK_M + tl.arange(0, BLOCK_M)  # output position within the image
    m_ok = offs_m < P
    ow = offs_m % OW
    t = offs_m // OW
    oh = t % OH
    od = t // OH
    # each output position's window origin in each dim (the gather's), as in the implicit GEMM
    if TRANSPOSED:
        o_d = od + PAD_D
        o_h = oh + PAD_H
        o_w = ow + PAD_W
    else:
        o_d = od * STRIDE_D - PAD_D
        o_h = oh * STRIDE_H - PAD_H
        o_w = ow * STRIDE_W - PAD_W
    # int64 image offsets: KernelBench's 16 x 128 x 1024^2 output passes 2^31 elements
    n = img.to(tl.int64)
    x_row = n * sxn + tl.zeros((BLOCK_M,), dtype=tl.int64)  # per position, as _conv_tile takes it
    y_row = n * syn + od * syd + oh * syh + ow * syw  # channel 0 of each output position
    s_row = (n * P + offs_m) * C_OUT  # the position's row of the softmax scratch [N * P, C_out]
    # the running fold over the channels: a sum (sum, mean), an extremum, or logsumexp's and softmax's (max,
    # rescaled sum)
    red = tl.zeros((BLOCK_M,), dtype=tl.float32)
    if RED_OP == "row_max" or RED_OP == "row_logsumexp" or SOFTMAX_AT != 0:
        red = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    if RED_OP == "row_min":
        red = tl.full((BLOCK_M,), float("inf"), tl.float32)
    scaled = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for g in range(0, G):
        for n0 in range(0, COUT_G, BLOCK_N):
            offs_n = n0 + tl.arange(0, BLOCK_N)  # output channel within the group
            n_ok = offs_n < COUT_G
            co = g * COUT_G + offs_n
            z = _conv_tile(
                x_ptr,
                w_ptr,
                b_ptr,
                x_row,
                o_d,
                o_h,
                o_w,
                m_ok,
                g,
                offs_n,
                co,
                n_ok,
                D,
                H,
                W,
                KD,
                KH,
                KW,
                CIN_G,
                K,
                sxc,
                sxd,
                sxh,
                sxw,
                sw0,
                sw1,
                swd,
                swh,
                sww,
                sb,
                TRANSPOSED,
                STRIDE_D,
                STRIDE_H,
                STRIDE_W,
                DIL_D,
                DIL_H,
                DIL_W,
                BLOCK_M,
                BLOCK_N,
                BLOCK_K,
                DOT_PRECISION,
            )
            # p is read 1 past the channels, so a div_p step's masked lanes stay finite
            pv = tl.load(p_ptr + co * sp, mask=n_ok, other=1.0).to(tl.float32)[None, :]
            y = _steps(
                z, z, pv, 1, PRE_LAST, OP1, A1, B1, OP2, A2, B2, OP3, A3, B3, OP4, A4, B4, OP5, A5, B5, OP6, A6, B6
            )
            col = n_ok[None, :]
            y_ptrs = y_ptr + y_row[:, None] + (co * syc)[None, :]
            if POOL_AT != 0:
                part = tl.sum(tl.where(m_ok[:, None] & col, y, 0.0), axis=0)
                tl.atomic_add(t_ptr + img * C_OUT + co, part, mask=n_ok)
            elif RED_AT == 0 and SOFTMAX_AT == 0:
                tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & col)
            elif ONE_TILE:
                # every channel in this tile: the softmax in registers (masked channels weigh 0)
                top = tl.max(tl.where(col, y, float("-inf")), axis=1)
                e = tl.exp(tl.where(col, y - top[:, None], float("-inf")))  # (no exp of a masked lane's value)
                e = e / tl.sum(e, axis=1)[:, None]
                e = _steps(
                    e,
                    e,
                    pv,
                    SOFTMAX_AT + 1,
                    6,
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
                tl.store(y_ptrs, e.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & col)
            elif RED_OP == "row_sum" or RED_OP == "row_mean":
                red += tl.sum(tl.where(col, y, 0.0), axis=1)
            elif RED_OP == "row_max":
                red = tl.maximum(red, tl.max(tl.where(col, y, float("-inf")), axis=1))
            elif RED_OP == "row_min":
                red = tl.minimum(red, tl.min(tl.where(col, y, float("inf")), axis=1))
            else:
                if SOFTMAX_AT != 0:
                    # the position's values wait in fp32 scratch for its max and sum (pass 2 below)
                    tl.store(s_ptr + s_row[:, None] + co[None, :], y, mask=m_ok[:, None] & col)
                # online logsumexp: rescale the running sum to the new maximum
                top = tl.maximum(red, tl.max(tl.where(col, y, float("-inf")), axis=1))
                safe = tl.where(top == float("-inf"), 0.0, top)
                ex = tl.exp(tl.where(col, y - safe[:, None], float("-inf")))  # (no exp of a masked lane's value)
                scaled = scaled * tl.exp(red - safe) + tl.sum(ex, axis=1)
                red = top
    if POOL_AT != 0:
        # every thread's additions before the count (the barrier; the count's acq_rel orders them before it)
        tl.debug_barrier()
        done = tl.atomic_add(c_ptr + img, 1)
        if done == tl.num_programs(0) - 1:
            _pooled(
                p_ptr,
                y_ptr,
                t_ptr + img * C_OUT,
                y_ptr + n * syn,
                C_OUT,
                P,
                sp,
                syc,
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
                RED_AT,
                RED_OP,
                POOL_AT,
                POOL_LAST,
                BLOCK_N,
            )
    elif RED_AT != 0:
        if RED_OP == "row_mean":
            red = red / C_OUT
        if RED_OP == "row_logsumexp":
            red = tl.where(red == float("-inf"), red, red + tl.log(scaled))
        r = _steps(
            red, red, red, RED_AT + 1, 6, OP1, A1, B1, OP2, A2, B2, OP3, A3, B3, OP4, A4, B4, OP5, A5, B5, OP6, A6, B6
        )
        tl.store(y_ptr + y_row, r.to(y_ptr.dtype.element_ty), mask=m_ok)
    elif SOFTMAX_AT != 0 and not ONE_TILE:
        # pass 2: exp(y - max) / sum from the scratch this program wrote (the barrier makes every thread's
        # stores visible to the others'), then the steps after the softmax
        tl.debug_barrier()
        top = tl.where(red == float("-inf"), 0.0, red)
        for c0 in range(0, C_OUT, BLOCK_N):
            co = c0 + tl.arange(0, BLOCK_N)
            c_ok = co < C_OUT
            mask = m_ok[:, None] & c_ok[None, :]
            y = tl.load(s_ptr + s_row[:, None] + co[None, :], mask=mask, other=float("-inf"))
            pv = tl.load(p_ptr + co * sp, mask=c_ok, other=1.0).to(tl.float32)[None, :]
            e = tl.exp(y - top[:, None]) / scaled[:, None]
            e = _steps(
                e,
                e,
                pv,
                SOFTMAX_AT + 1,
                6,
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
            tl.store(y_ptr + y_row[:, None] + (co * syc)[None, :], e.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _pooled(
    p_ptr,
    y_ptr,
    totals,
    out,
    C_OUT,
    P,
    sp,
    syc,
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
    POOL_AT: tl.constexpr,
    POOL_LAST: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # An image's means (its totals read back by atomics, coherent with the other programs' additions), the steps
    # after the pooling, and a fold over the channels when one reduces them; stored at out (channel 0).
    red = tl.zeros((BLOCK_N,), dtype=tl.float32)
    if RED_OP == "row_max" or RED_OP == "row_logsumexp":
        red = tl.full((BLOCK_N,), float("-inf"), tl.float32)
    if RED_OP == "row_min":
        red = tl.full((BLOCK_N,), float("inf"), tl.float32)
    scaled = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for c0 in range(0, C_OUT, BLOCK_N):
        co = c0 + tl.arange(0, BLOCK_N)
        c_ok = co < C_OUT
        mean = tl.atomic_add(totals + co, tl.zeros((BLOCK_N,), tl.float32), mask=c_ok) / P
        pv = tl.load(p_ptr + co * sp, mask=c_ok, other=1.0).to(tl.float32)
        v = _steps(
            mean,
            mean,
            pv,
            POOL_AT + 1,
            POOL_LAST,
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
        # lane-wise folds (each lane its own channels), combined across the lanes below
        if RED_AT == 0:
            tl.store(out + co * syc, v.to(y_ptr.dtype.element_ty), mask=c_ok)
        elif RED_OP == "row_sum" or RED_OP == "row_mean":
            red += tl.where(c_ok, v, 0.0)
        elif RED_OP == "row_max":
            red = tl.maximum(red, tl.where(c_ok, v, float("-inf")))
        elif RED_OP == "row_min":
            red = tl.minimum(red, tl.where(c_ok, v, float("inf")))
        else:
            # online logsumexp per lane: rescale the lane's sum to its new maximum
            top = tl.maximum(red, tl.where(c_ok, v, float("-inf")))
            safe = tl.where(top == float("-inf"), 0.0, top)
            scaled = scaled * tl.exp(red - safe) + tl.exp(tl.where(c_ok, v - safe, float("-inf")))
            red = top
    if RED_AT != 0:
        if RED_OP == "row_sum" or RED_OP == "row_mean":
            r = tl.sum(red, axis=0)
        elif RED_OP == "row_max":
            r = tl.max(red, axis=0)
        elif RED_OP == "row_min":
            r = tl.min(red, axis=0)
        else:
            top = tl.max(red, axis=0)
            safe = tl.where(top == float("-inf"), 0.0, top)
            r = tl.where(top == float("-inf"), top, safe + tl.log(tl.sum(scaled * tl.exp(red - safe), axis=0)))
        if RED_OP == "row_mean":
            r = r / C_OUT
        r = _steps(r, r, r, RED_AT + 1, 6, OP1, A1, B1, OP2, A2, B2, OP3, A3, B3, OP4, A4, B4, OP5, A5, B5, OP6, A6, B6)
        tl.store(out, r.to(y_ptr.dtype.element_ty))


def _out_size(size, k, stride, pad, dil, out_pad):
    # torch's output size of one dim (nn.Conv3d and nn.ConvTranspose3d docs)
    if TRANSPOSED:
        return (size - 1) * stride - 2 * pad + dil * (k - 1) + out_pad + 1
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


def launch(x, w, b, p, **params):
    N, C_in, D, H, W = x.shape
    KD, KH, KW = w.shape[2], w.shape[3], w.shape[4]
    # The group count from the shapes, as in the implicit GEMM (w is [C_out, C_in / G, ...], or transposed
    # [C_in, C_out / G, ...] with b [C_out])
    C_out = b.shape[0] if TRANSPOSED else w.shape[0]
    groups = C_out // w.shape[1] if TRANSPOSED else C_in // w.shape[1]
    assert groups * w.shape[1] == (C_out if TRANSPOSED else C_in), f"w {tuple(w.shape)} fits no group count"
    assert C_in % groups == 0 and C_out % groups == 0, f"{groups} groups do not divide {C_in} -> {C_out} channels"
    OD = _out_size(D, KD, STRIDE_D, PAD_D, DIL_D, OUT_PAD_D)
    OH = _out_size(H, KH, STRIDE_H, PAD_H, DIL_H, OUT_PAD_H)
    OW = _out_size(W, KW, STRIDE_W, PAD_W, DIL_W, OUT_PAD_W)
    ops = (OP1, OP2, OP3, OP4, OP5, OP6)
    P = OD * OH * OW
    dims = (1, 1, 1) if POOL_AT else (OD, OH, OW)
    y = torch.empty((N, 1 if RED_AT else C_out, *dims), device=x.device, dtype=x.dtype)
    bm, bn = params["BLOCK_M"], params["BLOCK_N"]
    one_tile = bool(SOFTMAX_AT) and groups == 1 and C_out <= bn
    # a softmax over more channels than a tile parks its values in fp32 (the output may be half: exp of a
    # rounded value is off by its rounding times the value, 0.4 at 100 in fp16)
    scratch = torch.empty((N * P, C_out), device=x.device, dtype=torch.float32) if SOFTMAX_AT and not one_tile else y
    # a pooling's per-image channel totals (fp32 whatever the output's dtype) and counts of finished programs
    totals = torch.zeros((N, C_out) if POOL_AT else (1,), device=x.device, dtype=torch.float32)
    count = torch.zeros((N if POOL_AT else 1,), device=x.device, dtype=torch.int32)
    # fp32 inputs: torch's fp32 convolution is IEEE fp32; TF32 alone is ~1e-3 off, tf32x3 within ~1e-6.
    precision = "tf32x3" if x.dtype == torch.float32 else "tf32"
    _conv_rows_kernel[(triton.cdiv(P, bm), N)](
        x,
        w,
        b,
        p,
        y,
        scratch,
        totals,
        count,
        D,
        H,
        W,
        OD,
        OH,
        OW,
        KD,
        KH,
        KW,
        C_in // groups,
        C_out // groups,
        groups,
        C_out,
        P,
        C_in // groups * KD * KH * KW,
        x.stride(0),
        x.stride(1),
        x.stride(2),
        x.stride(3),
        x.stride(4),
        w.stride(0),
        w.stride(1),
        w.stride(2),
        w.stride(3),
        w.stride(4),
        b.stride(0),
        p.stride(0),
        y.stride(0),
        y.stride(1),
        y.stride(2),
        y.stride(3),
        y.stride(4),
        TRANSPOSED=TRANSPOSED,
        STRIDE_D=STRIDE_D,
        STRIDE_H=STRIDE_H,
        STRIDE_W=STRIDE_W,
        PAD_D=PAD_D,
        PAD_H=PAD_H,
        PAD_W=PAD_W,
        DIL_D=DIL_D,
        DIL_H=DIL_H,
        DIL_W=DIL_W,
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
        # the last step on tiles, and the last on a pooling's means before their reduction
        ONE_TILE=one_tile,
        PRE_LAST=(POOL_AT or RED_AT or SOFTMAX_AT or 7) - 1,
        POOL_LAST=(RED_AT or 7) - 1,
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=params["BLOCK_K"],
        DOT_PRECISION=precision,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
