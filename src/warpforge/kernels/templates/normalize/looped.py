"""Normalization over dim 1 of [M, R, N], looped: each program owns BLOCK_N adjacent columns of one m, walks R
in BLOCK_R-row chunks accumulating the statistic per lane in fp32 (a [BLOCK_R, BLOCK_N] accumulator reduced
once), then walks R again writing x times the inverse statistic (the second read mostly hits L2). Any R fits.
The member (OP, EPS) is fixed at compile time."""

import torch
import triton
import triton.language as tl

TASK = "normalize"
# The family member (kernels/tasks/normalize.py MEMBERS): the matcher rewrites these two lines.
OP = "rms"
EPS = 1e-05

SPACE = {
    "BLOCK_R": [16, 64, 256, 1024],
    "BLOCK_N": [1, 4, 16, 64],
    "num_warps": [1, 2, 4, 8],
    "num_stages": [1, 2],
}

# One fp32 accumulator tile plus the loaded chunk: above 32 values per thread per tile, registers spill;
# below 1 lanes idle.
MAX_ELEMS_PER_THREAD = 32


# Columns per program: at least 16 (64 bytes of fp32 per row, two 32-byte sectors), or a quarter of N rounded
# up to a power of two where N is narrower (so every N keeps a SPACE value). A 1-column program reads R
# scattered elements and programs number M * N / BLOCK_N: on the interpreter's check shapes of an RMSNorm
# over 64 features of 512 x 512 maps BLOCK_N = 1 ran past the 480 s check budget.
MIN_BLOCK_N = 16


def constraints(params, shape):
    per_thread = params["BLOCK_R"] * params["BLOCK_N"] // (32 * params["num_warps"])
    floor = min(MIN_BLOCK_N, triton.next_power_of_2(shape["N"]) // 4)
    return 1 <= per_thread <= MAX_ELEMS_PER_THREAD and params["BLOCK_N"] >= floor


@triton.jit
def _normalize_kernel(
    x_ptr, y_ptr, R, N, sxm, sxr, sxn, OP: tl.constexpr, EPS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr
):
    m = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.arange(0, BLOCK_R)
    col_ok = cols < N
    acc = tl.zeros([BLOCK_R, BLOCK_N], tl.float32)
    base = x_ptr + m * sxm + cols[None, :] * sxn
    for start in range(0, R, BLOCK_R):
        r = (start + rows)[:, None].to(tl.int64)
        x = tl.load(base + r * sxr, mask=(r < R) & col_ok[None, :], other=0.0).to(tl.float32)
        if OP == "l1" or OP == "l1_mean":
            acc += tl.abs(x)
        else:
            acc += x * x
    total = tl.sum(acc, axis=0)
    if OP == "l2":
        inv = 1.0 / tl.sqrt(total)
    elif OP == "l1":
        inv = 1.0 / total
    elif OP == "l1_mean":
        inv = R / total
    else:
        inv = 1.0 / tl.sqrt(total / R + EPS)
    out = y_ptr + m * R * N + cols[None, :]
    for start in range(0, R, BLOCK_R):
        r = (start + rows)[:, None].to(tl.int64)
        mask = (r < R) & col_ok[None, :]
        x = tl.load(base + r * sxr, mask=mask, other=0.0).to(tl.float32)
        tl.store(out + r * N, (x * inv[None, :]).to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, **params):
    m, r, n = x.shape
    y = torch.empty((m, r, n), dtype=x.dtype, device=x.device)
    grid = (m, triton.cdiv(n, params["BLOCK_N"]))
    _normalize_kernel[grid](
        x,
        y,
        r,
        n,
        x.stride(0),
        x.stride(1),
        x.stride(2),
        OP=OP,
        EPS=EPS,
        BLOCK_R=params["BLOCK_R"],
        BLOCK_N=params["BLOCK_N"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
