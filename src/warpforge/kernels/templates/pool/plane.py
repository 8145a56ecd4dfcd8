"""Pooling over [N, C, D, H, W] in 2-D output tiles: one program per [BLOCK_H, BLOCK_W] tile of one output
plane (n, c, od), so rows and columns come from the tile's position (no per-element division), and the window
is walked with loops over its depth and height taps at run time and its width taps unrolled: each step loads a
[BLOCK_H, BLOCK_W] slab whose columns are SW apart (a tap outside the input is -inf for max, 0 for average:
torch's padding). The average's divisor is the product of a per-row and a per-column count. The member (OP,
window, CEIL, COUNT_PAD, DIVISOR) is fixed at compile time; sums accumulate in fp32."""

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
    "BLOCK_H": [1, 2, 4, 8, 16],
    "BLOCK_W": [16, 32, 64, 128, 256],
    "num_warps": [1, 2, 4, 8],
    "num_stages": [1],
}

# As the flat template: at most 16 fp32 outputs a thread (the tile's accumulator and its row/column indices).
MAX_OUTPUTS_PER_THREAD = 16


def constraints(params, shape):
    tile = params["BLOCK_H"] * params["BLOCK_W"]
    if tile // (32 * params["num_warps"]) > MAX_OUTPUTS_PER_THREAD:
        return False
    # A tile taller than the plane (a 1-D pooling's H = 1) only idles its rows
    return params["BLOCK_H"] <= max(1, shape.get("H", 1))


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
def _pool_plane_kernel(
    x_ptr,
    y_ptr,
    D,
    H,
    W,
    OD,
    OH,
    OW,
    tiles_w,
    tiles,
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
    BLOCK_H: tl.constexpr,
    BLOCK_W: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    out_plane = pid // tiles  # n * C * OD + c * OD + od
    tile = pid % tiles
    od = out_plane % OD
    plane = out_plane // OD  # n * C + c
    oh = (tile // tiles_w) * BLOCK_H + tl.arange(0, BLOCK_H)
    ow = (tile % tiles_w) * BLOCK_W + tl.arange(0, BLOCK_W)
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    d0 = od * SD - PD
    out_ok = (oh < OH)[:, None] & (ow < OW)[None, :]
    base = x_ptr + plane * D * H * W
    if OP == "max":
        acc = tl.full([BLOCK_H, BLOCK_W], float("-inf"), tl.float32)
    else:
        acc = tl.zeros([BLOCK_H, BLOCK_W], dtype=tl.float32)
    for kd in range(KD):
        # the depth as a [BLOCK_H] vector: a scalar's comparison combined with a block's is refused as a mask
        # by the Triton interpreter (numpy bool against int1)
        d = tl.zeros([BLOCK_H], dtype=tl.int64) + (d0 + kd * DLD)
        d_ok = (d >= 0) & (d < D)
        for kh in range(KH):
            h = h0 + kh * DLH
            rows_ok = d_ok & (h >= 0) & (h < H)
            rows = base + (d * H + h) * W
            for kw in tl.static_range(KW):
                w = w0 + kw * DLW
                m = out_ok & rows_ok[:, None] & ((w >= 0) & (w < W))[None, :]
                ptrs = rows[:, None] + w[None, :]
                if OP == "max":
                    v = tl.load(ptrs, mask=m, other=float("-inf")).to(tl.float32)
                    # NaN wins, as in torch's max pooling (tl.maximum may drop it)
                    acc = tl.where((v > acc) | (v != v), v, acc)
                else:
                    acc += tl.load(ptrs, mask=m, other=0.0).to(tl.float32)
    if OP == "avg":
        if DIVISOR > 0:
            acc = acc / DIVISOR
        else:
            n_d = _count(d0, D, KD, PD, COUNT_PAD)
            n_h = _count(h0, H, KH, PH, COUNT_PAD)
            n_w = _count(w0, W, KW, PW, COUNT_PAD)
            # at least 1: lanes past the plane count 0 taps (their store is masked)
            acc = acc / tl.maximum(n_d * n_h[:, None] * n_w[None, :], 1).to(tl.float32)
    y_rows = y_ptr + (out_plane * OH + oh) * OW
    tl.store(y_rows[:, None] + ow[None, :], acc.to(y_ptr.dtype.element_ty), mask=out_ok)


def launch(x, **params):
    n, c, d, h, w = x.shape
    od = _out_size(d, KD, SD, PD, DLD)
    oh = _out_size(h, KH, SH, PH, DLH)
    ow = _out_size(w, KW, SW, PW, DLW)
    x = x.contiguous()
    y = torch.empty((n, c, od, oh, ow), dtype=x.dtype, device=x.device)
    tiles_w = triton.cdiv(ow, params["BLOCK_W"])
    tiles = triton.cdiv(oh, params["BLOCK_H"]) * tiles_w
    grid = (n * c * od * tiles,)
    _pool_plane_kernel[grid](
        x,
        y,
        d,
        h,
        w,
        od,
        oh,
        ow,
        tiles_w,
        tiles,
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
        BLOCK_H=params["BLOCK_H"],
        BLOCK_W=params["BLOCK_W"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
