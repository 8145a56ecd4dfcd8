"""Masked prefix sum along dim 1 of [M, L, N] in one pass: the whole of L (padded to a power of two) times BLOCK_N
columns is one tile, its masked-out elements replaced by 0 as they load, scanned along axis 0 by one
``tl.cumsum`` (a log-depth tree in registers and, across warps, shared memory), with no loop and no carry: the
fastest form while L fits in registers. Values accumulate in fp32."""

import torch
import triton
import triton.language as tl

TASK = "masked_cumsum"

SPACE = {
    "BLOCK_N": [1, 2, 4, 8, 16, 32, 64],
    "num_warps": [1, 2, 4, 8, 16, 32],
    "num_stages": [1],
}

# The tile, its mask and its scanned copy: above 32 fp32 values per thread, registers spill. KernelBench's
# L = 32768 fits at BLOCK_N = 1 with 32 warps (32 values a thread).
MAX_ELEMS_PER_THREAD = 32


def constraints(params, shape):
    tile = triton.next_power_of_2(shape["L"]) * params["BLOCK_N"]
    return tile // (32 * params["num_warps"]) <= MAX_ELEMS_PER_THREAD


@triton.jit
def _masked_scan_kernel(
    x_ptr, k_ptr, y_ptr, L, N, sxm, sxl, sxn, skm, skl, skn, BLOCK_L: tl.constexpr, BLOCK_N: tl.constexpr
):
    m = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    pos = tl.arange(0, BLOCK_L)
    ok = (pos < L)[:, None] & (cols < N)[None, :]
    rows = pos[:, None].to(tl.int64)
    x = tl.load(x_ptr + m * sxm + rows * sxl + cols[None, :] * sxn, mask=ok, other=0.0).to(tl.float32)
    keep = tl.load(k_ptr + m * skm + rows * skl + cols[None, :] * skn, mask=ok, other=0)
    y = tl.cumsum(tl.where(keep != 0, x, 0.0), axis=0)
    tl.store(y_ptr + m * L * N + rows * N + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=ok)


def launch(x, mask, **params):
    m, length, n = x.shape
    assert mask.shape == x.shape, f"mask is {tuple(mask.shape)}, x is {tuple(x.shape)}"
    keep = mask.view(torch.uint8)  # one byte an element, 0 or 1: Triton loads it as an integer
    y = torch.empty((m, length, n), dtype=x.dtype, device=x.device)
    grid = (m, triton.cdiv(n, params["BLOCK_N"]))
    _masked_scan_kernel[grid](
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
        BLOCK_L=triton.next_power_of_2(length),
        BLOCK_N=params["BLOCK_N"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
