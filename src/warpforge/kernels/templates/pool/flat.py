"""Pooling over [N, C, D, H, W], one program per BLOCK consecutive outputs of the flattened [N, C, OD, OH, OW]
output: each output's (plane, od, oh, ow) comes from its index by division, and the window's KD x KH x KW taps
are unrolled at compile time, each a masked gather of BLOCK inputs (a tap outside the input is -inf for max, 0
for average: torch's padding). Every output store is contiguous; the input reads are strided by the stride and
overlap across windows, which L1/L2 absorb (x is read from DRAM about once). The member (OP, window, CEIL,
COUNT_PAD, DIVISOR) is fixed at compile time; sums accumulate in fp32."""

import torch
import triton
import triton.language as tl

TASK = "pool"
# The family member (kernels/tasks/pool.py member()): the matcher rewrites these lines.
OP = "max"
KD = 1
KH = 2
KW = 2
SD = 1
SH = 2
SW = 2
PD = 0
PH = 0
PW = 0
DLD = 1
DLH = 1
DLW = 1
CEIL = False
COUNT_PAD = True
DIVISOR = 0

SPACE = {
    "BLOCK": [128, 256, 512, 1024, 2048],
    "num_warps": [2, 4, 8],
    "num_stages": [1],
}

# The fp32 accumulator and the index vectors per thread: above 16 outputs a thread, the unrolled taps' live
# indices spill (each output keeps its d, h, w starts besides the accumulator).
MAX_OUTPUTS_PER_THREAD = 16


def constraints(params, shape):
    return params["BLOCK"] // (32 * params["num_warps"]) <= MAX_OUTPUTS_PER_THREAD


def _out_size(size, kernel, stride, padding, dilation):
    # torch's rule: floor (or ceil) of the span over the stride, plus one; with ceil_mode the last window must
    # still start inside the input or its left padding.
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if CEIL else 0)) // stride + 1
    if CEIL and (out - 1) * stride >= size + padding:
        out = out - 1
    return out


@triton.jit
def _count(start, size, K: tl.constexpr, P: tl.constexpr, COUNT_PAD: tl.constexpr):
    # The taps of one dim torch's average divides by: the window cut at the padded input's end, then (without
    # count_include_pad) at the input's own ends.
    end = tl.minimum(start + K, size + P)
    if COUNT_PAD:
        n = end - start
    else:
        n = tl.minimum(end, size) - tl.maximum(start, 0)
    return n


@triton.jit
def _pool_flat_kernel(
    x_ptr,
    y_ptr,
    total,
    D,
    H,
    W,
    OD,
    OH,
    OW,
    OP: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    SD: tl.constexpr,
    SH: tl.constexpr,
    SW: tl.constexpr,
    PD: tl.constexpr,
    PH: tl.constexpr,
    PW: tl.constexpr,
    DLD: tl.constexpr,
    DLH: tl.constexpr,
    DLW: tl.constexpr,
    COUNT_PAD: tl.constexpr,
    DIVISOR: tl.constexpr,
    BLOCK: tl.constexpr,
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < total
    ow = offs % OW
    rest = offs // OW
    oh = rest % OH
    rest = rest // OH
    od = rest % OD
    plane = rest // OD
    d0 = od * SD - PD
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    base = x_ptr + plane * D * H * W
    if OP == "max":
        acc = tl.full([BLOCK], float("-inf"), tl.float32)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
    for kd in tl.static_range(KD):
        d = d0 + kd * DLD
        d_ok = ok & (d >= 0) & (d < D)
        for kh in tl.static_range(KH):
            h = h0 + kh * DLH
            dh_ok = d_ok & (h >= 0) & (h < H)
            row = base + (d * H + h) * W
            for kw in tl.static_range(KW):
                w = w0 + kw * DLW
                m = dh_ok & (w >= 0) & (w < W)
                if OP == "max":
                    v = tl.load(row + w, mask=m, other=float("-inf")).to(tl.float32)
                    # NaN wins, as in torch's max pooling (tl.maximum may drop it)
                    acc = tl.where((v > acc) | (v != v), v, acc)
                else:
                    acc += tl.load(row + w, mask=m, other=0.0).to(tl.float32)
    if OP == "avg":
        if DIVISOR > 0:
            acc = acc / DIVISOR
        else:
            n = _count(d0, D, KD, PD, COUNT_PAD) * _count(h0, H, KH, PH, COUNT_PAD) * _count(w0, W, KW, PW, COUNT_PAD)
            acc = acc / n.to(tl.float32)
    tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=ok)


def launch(x, **params):
    n, c, d, h, w = x.shape
    od = _out_size(d, KD, SD, PD, DLD)
    oh = _out_size(h, KH, SH, PH, DLH)
    ow = _out_size(w, KW, SW, PW, DLW)
    x = x.contiguous()
    y = torch.empty((n, c, od, oh, ow), dtype=x.dtype, device=x.device)
    total = n * c * od * oh * ow
    grid = (triton.cdiv(total, params["BLOCK"]),)
    _pool_flat_kernel[grid](
        x,
        y,
        total,
        d,
        h,
        w,
        od,
        oh,
        ow,
        OP=OP,
        KD=KD,
        KH=KH,
        KW=KW,
        SD=SD,
        SH=SH,
        SW=SW,
        PD=PD,
        PH=PH,
        PW=PW,
        DLD=DLD,
        DLH=DLH,
        DLW=DLW,
        COUNT_PAD=COUNT_PAD,
        DIVISOR=DIVISOR,
        BLOCK=params["BLOCK"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
