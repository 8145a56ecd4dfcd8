"""Convolution as an implicit GEMM on the tensor cores: output positions (N * OD * OH * OW) x output channels of
one group, reduced over that group's input channels x kernel taps, the [BLOCK_M, BLOCK_K] x tile gathered from
the input with its padding masked (no im2col copy in memory).

A transposed convolution is the same GEMM with a gather: output position o takes input i where
o + pad - k * dil = i * stride. Without dilation a program owns outputs of one phase (o % stride per dim), and
its K runs over the taps on their stride grid only (k = k0 + j * stride: a quarter of them at stride 2 in 2-D,
an eighth in 3-D); with dilation every tap runs, the ones off the grid masked.
The grid's third axis is the group; a group's weight panel is read through w's strides in either layout
([C_out, C_in / G, k...] or, transposed, [C_in, C_out / G, k...]).
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
# The steps this template computes (kernels/chain_regions.py GROUPS): its `_step`'s.
CHAIN_STEPS = ("elementwise", "param")
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

# No tile below 64 x 64 outputs: smaller ones underfill an H100's tensor cores, and the interpreter (one numpy
# call per tile op) took 150 s on a 29M-MAC check shape at 32 x 16 x 16 against 3.5 s at 128 x 64 x 64.
SPACE = {
    "BLOCK_M": [128, 256, 64],
    "BLOCK_N": [64, 128, 32],
    "BLOCK_K": [32, 64],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4],
}

# The pipeline holds num_stages x and w tiles in shared memory: at most the target's
# shape["SMEM_BYTES"] per block (the harness adds it: kernels/targets.py).


def constraints(params, shape):
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    warps, stages = params["num_warps"], params["num_stages"]
    smem = stages * (bm * bk + bk * bn) * shape.get("ELEM_BYTES", 4)
    if smem > shape["SMEM_BYTES"] or bm * bn < 4096:
        return False
    # the fp32 accumulator and the gather's [BLOCK_M, BLOCK_K] index tiles share 255 registers a thread:
    # 64 accumulator values a thread at most (128x128 needs 8 warps), 32 index values
    if bm * bn > 2048 * warps or bm * bk > 1024 * warps:
        return False
    return True


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
def _conv_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    p_ptr,
    y_ptr,
    D,
    H,
    W,
    OD,
    OH,
    OW,
    QD,
    QH,
    QW,
    KD,
    KH,
    KW,
    JD,
    JH,
    JW,
    CIN_G,
    COUT_G,
    M,
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
    PHASED: tl.constexpr,
    PH_D: tl.constexpr,
    PH_H: tl.constexpr,
    PH_W: tl.constexpr,
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
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    g = tl.program_id(2)

    # Phased (the module's note): QD, QH, QW positions per phase (ceil(O / stride)), M = N * QD * QH * QW; else
    # one phase, Q = O.
    phase = pid_m % (PH_D * PH_H * PH_W)
    r_w = phase % PH_W
    r_h = (phase // PH_W) % PH_H
    r_d = phase // (PH_W * PH_H)
    offs_m = (pid_m // (PH_D * PH_H * PH_W)) * BLOCK_M + tl.arange(0, BLOCK_M)
    q_w = offs_m % QW
    t = offs_m // QW
    q_h = t % QH
    t = t // QH
    q_d = t % QD
    # int64 for the batch offset: KernelBench's 16 x 128 x 1024^2 output passes 2^31 elements
    n = (t // QD).to(tl.int64)
    ow = q_w * PH_W + r_w
    oh = q_h * PH_H + r_h
    od = q_d * PH_D + r_d
    m_ok = (offs_m < M) & (ow < OW) & (oh < OH) & (od < OD)

    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # output channel within the group
    n_ok = offs_n < COUT_G
    co = g * COUT_G + offs_n

    # Per output position, its window's first input index in each dim (the gather's origin); per K index
    # below, the tap's offset from it: the gather is then one [BLOCK_M, BLOCK_K] sum per dim (the interpreter
    # runs each tile op as a numpy call, the GPU as registers: both pay per tile op)
    if TRANSPOSED:
        o_d = od + PAD_D
        o_h = oh + PAD_H
        o_w = ow + PAD_W
    else:
        o_d = od * STRIDE_D - PAD_D
        o_h = oh * STRIDE_H - PAD_H
        o_w = ow * STRIDE_W - PAD_W
    x_row = n * sxn + g * CIN_G * sxc
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if PHASED:
        # the phase's first tap on the stride grid in each dim, and its input offset: output q * S + r takes,
        # at tap k0 + j * S, input q + (r + pad - k0) / S - j (a whole number by the choice of k0)
        k0_d = (r_d + PAD_D) % STRIDE_D
        k0_h = (r_h + PAD_H) % STRIDE_H
        k0_w = (r_w + PAD_W) % STRIDE_W
        c_d = (r_d + PAD_D - k0_d) // STRIDE_D
        c_h = (r_h + PAD_H - k0_h) // STRIDE_H
        c_w = (r_w + PAD_W - k0_w) // STRIDE_W
        for k0 in range(0, K, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)  # (input channel of the group, jd, jh, jw), jw fastest
            jw = offs_k % JW
            r = offs_k // JW
            jh = r % JH
            r = r // JH
            jd = r % JD
            ci = r // JD
            kd = k0_d + jd * STRIDE_D
            kh = k0_h + jh * STRIDE_H
            kw = k0_w + jw * STRIDE_W
            # JD = ceil(KD / S): a phase whose first tap is late has one fewer, masked here
            tap_ok = (offs_k < K) & (kd < KD) & (kh < KH) & (kw < KW)
            i_d = q_d[:, None] + (c_d - jd)[None, :]
            i_h = q_h[:, None] + (c_h - jh)[None, :]
            i_w = q_w[:, None] + (c_w - jw)[None, :]
            ok = (i_d >= 0) & (i_d < D) & (i_h >= 0) & (i_h < H) & (i_w >= 0) & (i_w < W)
            a_ptrs = x_ptr + x_row[:, None] + (ci * sxc)[None, :] + i_d * sxd + i_h * sxh + i_w * sxw
            a = tl.load(a_ptrs, mask=ok & m_ok[:, None] & tap_ok[None, :], other=0.0)
            tap = kd * swd + kh * swh + kw * sww  # w [C_in, C_out / G, k...]
            w_ptrs = w_ptr + (g * CIN_G + ci)[:, None] * sw0 + offs_n[None, :] * sw1 + tap[:, None]
            wt = tl.load(w_ptrs, mask=tap_ok[:, None] & n_ok[None, :], other=0.0)
            acc = tl.dot(a, wt, acc, input_precision=DOT_PRECISION)
    else:
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

    # the bias and the chain in fp32, before the one rounding; p is read per tile like the bias (BLOCK_N values
    # against BLOCK_M x BLOCK_N outputs) and 1 past the channels, so a div_p step's masked lanes stay finite
    bias = tl.load(b_ptr + co * sb, mask=n_ok, other=0.0)
    z = acc + bias.to(tl.float32)[None, :]
    pv = tl.load(p_ptr + co * sp, mask=n_ok, other=1.0).to(tl.float32)
    out = _steps(z, z, pv[None, :], 1, 6, OP1, A1, B1, OP2, A2, B2, OP3, A3, B3, OP4, A4, B4, OP5, A5, B5, OP6, A6, B6)
    y_ptrs = y_ptr + n[:, None] * syn + co[None, :] * syc + od[:, None] * syd + oh[:, None] * syh + ow[:, None] * syw
    tl.store(y_ptrs, out.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def _out_size(size, k, stride, pad, dil, out_pad):
    # torch's output size of one dim (nn.Conv3d and nn.ConvTranspose3d docs)
    if TRANSPOSED:
        return (size - 1) * stride - 2 * pad + dil * (k - 1) + out_pad + 1
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


def launch(x, w, b, p, **params):
    N, C_in, D, H, W = x.shape
    KD, KH, KW = w.shape[2], w.shape[3], w.shape[4]
    # The group count from the shapes, not a constant: a depthwise problem's groups are its channel count,
    # which its hidden shapes change (w is [C_out, C_in / G, ...], or transposed [C_in, C_out / G, ...] with
    # b [C_out])
    C_out = b.shape[0] if TRANSPOSED else w.shape[0]
    groups = C_out // w.shape[1] if TRANSPOSED else C_in // w.shape[1]
    assert groups * w.shape[1] == (C_out if TRANSPOSED else C_in), f"w {tuple(w.shape)} fits no group count"
    assert C_in % groups == 0 and C_out % groups == 0, f"{groups} groups do not divide {C_in} -> {C_out} channels"
    OD = _out_size(D, KD, STRIDE_D, PAD_D, DIL_D, OUT_PAD_D)
    OH = _out_size(H, KH, STRIDE_H, PAD_H, DIL_H, OUT_PAD_H)
    OW = _out_size(W, KW, STRIDE_W, PAD_W, DIL_W, OUT_PAD_W)
    y = torch.empty((N, C_out, OD, OH, OW), device=x.device, dtype=x.dtype)
    CIN_G = C_in // groups
    COUT_G = C_out // groups
    # a transposed convolution without dilation runs by phase (the module's note): per phase ceil(O / S) output
    # positions and ceil(k / S) taps in each dim
    phased = TRANSPOSED and DIL_D == 1 and DIL_H == 1 and DIL_W == 1
    ph = (STRIDE_D, STRIDE_H, STRIDE_W) if phased else (1, 1, 1)
    QD, QH, QW = triton.cdiv(OD, ph[0]), triton.cdiv(OH, ph[1]), triton.cdiv(OW, ph[2])
    JD, JH, JW = triton.cdiv(KD, ph[0]), triton.cdiv(KH, ph[1]), triton.cdiv(KW, ph[2])
    M = N * QD * QH * QW
    K = CIN_G * JD * JH * JW
    # fp32 inputs: torch's fp32 convolution is IEEE fp32; TF32 alone is ~1e-3 off, tf32x3 within ~1e-6.
    precision = "tf32x3" if x.dtype == torch.float32 else "tf32"
    bm, bn = params["BLOCK_M"], params["BLOCK_N"]
    grid = (triton.cdiv(M, bm) * ph[0] * ph[1] * ph[2], triton.cdiv(COUT_G, bn), groups)
    _conv_kernel[grid](
        x,
        w,
        b,
        p,
        y,
        D,
        H,
        W,
        OD,
        OH,
        OW,
        QD,
        QH,
        QW,
        KD,
        KH,
        KW,
        JD,
        JH,
        JW,
        CIN_G,
        COUT_G,
        M,
        K,
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
        PHASED=phased,
        PH_D=ph[0],
        PH_H=ph[1],
        PH_W=ph[2],
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
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=params["BLOCK_K"],
        DOT_PRECISION=precision,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
