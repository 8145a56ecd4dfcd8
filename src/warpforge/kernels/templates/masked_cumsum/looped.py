"""Masked prefix sum along dim 1 of [M, L, N], chunked: each program owns BLOCK_N adjacent columns of one m and
walks L in BLOCK_L-position chunks, zeroing masked-out elements as they load, scanning each chunk with
``tl.cumsum`` and adding the carry (the fp32 total of every earlier chunk per column), which then absorbs the
chunk's own total; any L works in registers bounded by the chunk."""

import torch
import triton
import triton.language as tl

TASK = "masked_cumsum"

SPACE = {
    "BLOCK_L": [64, 128, 256, 512, 1024, 2048],
    "BLOCK_N": [1, 2, 4, 8, 16, 32, 64],
    "num_warps": [1, 2, 4, 8],
    "num_stages": [1, 2, 3],
}

# The chunk, its mask and its scanned copy: above 32 fp32 values per thread, registers spill.
MAX_ELEMS_PER_THREAD = 32


def constraints(params, shape):
    return params["BLOCK_L"] * params["BLOCK_N"] // (32 * params["num_warps"]) <= MAX_ELEMS_PER_THREAD


@triton.jit
def _masked_scan_looped_kernel(
    x_ptr, k_ptr, y_ptr, L, N, sxm, sxl, sxn, skm, skl, skn, BLOCK_L: tl.constexpr, BLOCK_N: tl.constexpr
):
    m = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    carry = tl.zeros([BLOCK_N], tl.float32)
    x_base = x_ptr + m * sxm + cols[None, :] * sxn
    k_base = k_ptr + m * skm + cols[None, :] * skn
    y_base = y_ptr + m * L * N + cols[None, :]
    for start in range(0, L, BLOCK_L):
        rows = (start + tl.arange(0, BLOCK_L)).to(tl.int64)
        ok = (rows < L)[:, None] & col_ok[None, :]
        x = tl.load(x_base + rows[:, None] * sxl, mask=ok, other=0.0).to(tl.float32)
        keep = tl.load(k_base + rows[:, None] * skl, mask=ok, other=0)
        z = tl.where(keep != 0, x, 0.0)
        s = tl.cumsum(z, axis=0)
        tl.store(y_base + rows[:, None] * N, (carry[None, :] + s).to(y_ptr.dtype.element_ty), mask=ok)
        # the chunk's total (padding holds 0), added to the carry after the store that used the old one
        carry = carry + tl.sum(z, axis=0)


def launch(x, mask, **params):
    m, length, n = x.shape
    assert mask.shape == x.shape, f"mask is {tuple(mask.shape)}, x is {tuple(x.shape)}"
    keep = mask.view(torch.uint8)  # one byte an element, 0 or 1: Triton loads it as an integer
    y = torch.empty((m, length, n), dtype=x.dtype, device=x.device)
    grid = (m, triton.cdiv(n, params["BLOCK_N"]))
    _masked_scan_looped_kernel[grid](
        x,
        keep,
        y,
        length,
        n,
        x.stride(0),
        x.stride(1),
        x.stride(2),
        keep.stride(0),
        keep.stride(1),
        keep.stride(2),
        BLOCK_L=params["BLOCK_L"],
        BLOCK_N=params["BLOCK_N"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
