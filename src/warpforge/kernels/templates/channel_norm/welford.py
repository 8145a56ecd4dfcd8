"""Channel-group normalization of x [N, C, H, W] in one kernel: one program per group (an (n, group) pair for
group and instance norm, a channel for batch norm) streams the group once with a per-lane Welford accumulator
(count, mean and M2 per lane, merged with Chan's formula: M2 = sum(M2_i) + sum(n_i (mean_i - mean)^2)), then
streams it again writing (x - mean) * rstd * w + b, each element with its channel's weight and bias. The
eval-mode batch norm skips the first pass (the running statistics). No statistics round-trip through memory;
a batch-norm group is N segments of H x W, C x H x W apart, a group-norm group one span of C/G x H x W."""

import torch
import triton
import triton.language as tl

TASK = "channel_norm"
# The family member (kernels/tasks/channel_norm.py member()): the matcher rewrites these lines.
KIND = "batch"
GROUPS = 1
EPS = 1e-05

SPACE = {
    "BLOCK": [256, 512, 1024, 2048, 4096],
    "num_warps": [2, 4, 8, 16],
    "num_stages": [1, 2],
}

# The chunk and three fp32 Welford accumulators per lane: above 32 chunk values a thread, registers spill.
MAX_ELEMS_PER_THREAD = 32


def constraints(params, shape):
    return params["BLOCK"] // (32 * params["num_warps"]) <= MAX_ELEMS_PER_THREAD


def _groups(c):
    # Statistics groups per sample: C channels for instance norm, GROUPS for group norm
    if KIND == "instance":
        return c
    return GROUPS


@triton.jit
def _channel_norm_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    rm_ptr,
    rv_ptr,
    y_ptr,
    S,
    SEG,
    REP,
    RSTRIDE,
    G,
    CPG,
    eps,
    KIND: tl.constexpr,
    BLOCK: tl.constexpr,
):
    q = tl.program_id(0).to(tl.int64)
    if KIND == "batch" or KIND == "batch_train":
        base = q * S
        c0 = q
    else:
        base = q * SEG
        c0 = (q % G) * CPG
    offs = tl.arange(0, BLOCK)
    if KIND == "batch":
        mean = tl.load(rm_ptr + q).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.load(rv_ptr + q).to(tl.float32) + eps)
    else:
        count = tl.zeros([BLOCK], dtype=tl.float32)
        mean_acc = tl.zeros([BLOCK], dtype=tl.float32)
        m2_acc = tl.zeros([BLOCK], dtype=tl.float32)
        for r in range(0, REP):
            seg = x_ptr + base + r * RSTRIDE
            for start in range(0, SEG, BLOCK):
                idx = start + offs
                m = idx < SEG
                x = tl.load(seg + idx, mask=m, other=0.0).to(tl.float32)
                count += tl.where(m, 1.0, 0.0)
                delta = tl.where(m, x - mean_acc, 0.0)
                mean_acc += delta / tl.maximum(count, 1.0)
                m2_acc += delta * (x - mean_acc)
        total = (SEG * REP).to(tl.float32)
        mean = tl.sum(count * mean_acc, axis=0) / total
        dev = mean_acc - mean
        m2 = tl.sum(m2_acc, axis=0) + tl.sum(count * dev * dev, axis=0)
        rstd = 1.0 / tl.sqrt(m2 / total + eps)
    for r in range(0, REP):
        seg = base + r * RSTRIDE
        for start in range(0, SEG, BLOCK):
            idx = start + offs
            m = idx < SEG
            ch = c0 + idx // S
            scale = rstd * tl.load(w_ptr + ch, mask=m, other=0.0).to(tl.float32)
            shift = tl.load(b_ptr + ch, mask=m, other=0.0).to(tl.float32)
            x = tl.load(x_ptr + seg + idx, mask=m, other=0.0).to(tl.float32)
            # centred first: x * scale + (b - mean * scale) cancels terms 100x the result at a mean of 100 stds
            tl.store(y_ptr + seg + idx, ((x - mean) * scale + shift).to(y_ptr.dtype.element_ty), mask=m)


def launch(x, w, b, running_mean, running_var, num_batches_tracked, **params):
    n, c, h, wd = x.shape
    s = h * wd
    x = x.contiguous()
    g = _groups(c)
    cpg = c // g
    if KIND == "batch" or KIND == "batch_train":
        groups = c
        seg = s
        rep = n
    else:
        groups = n * g
        seg = cpg * s
        rep = 1
    y = torch.empty_like(x)
    _channel_norm_kernel[(groups,)](
        x,
        w,
        b,
        running_mean,
        running_var,
        y,
        s,
        seg,
        rep,
        c * s,
        g,
        cpg,
        EPS,
        KIND=KIND,
        BLOCK=params["BLOCK"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
