"""Binary elementwise op over 2-D tiles [BLOCK_M, BLOCK_N] addressed by both inputs' strides: a transposed or
sliced x or z is read in place (the flat template copies it first), a broadcast row of z is loaded once per
tile and reused by its BLOCK_M rows, and a tile of several short rows keeps every lane busy where rows are
narrower than a block. ``_op`` is the family's operation, selected by the constant OP at compile time.

z is read at (row % ZM, column % ZN): along a dim where z's size is 1 its stride is taken as 0, where it is
x's the index is x's, and only where z tiles x (Z_TILES) is the modulo compiled in, on the tile's BLOCK_M
row and BLOCK_N column indices, not per element."""

import torch
import triton
import triton.language as tl

TASK = "binary"
# The family member (kernels/tasks/binary.py MEMBERS): the matcher rewrites this line.
OP = "add"

SPACE = {
    "BLOCK_M": [1, 2, 4, 8, 16],
    "BLOCK_N": [64, 128, 256, 512, 1024],
    "num_warps": [1, 2, 4, 8],
    "num_stages": [1],
}

# As in the flat template: more than 16 fp32 values per thread buys no wider access and costs registers;
# fewer than one per thread leaves lanes idle.
MAX_ELEMS_PER_THREAD = 16


def constraints(params, shape):
    per_thread = params["BLOCK_M"] * params["BLOCK_N"] // (32 * params["num_warps"])
    return 1 <= per_thread <= MAX_ELEMS_PER_THREAD


@triton.jit
def _op(x, z, OP: tl.constexpr):
    if OP == "add":
        y = x + z
    elif OP == "sub":
        y = x - z
    elif OP == "mul":
        y = x * z
    elif OP == "div":
        y = x / z
    elif OP == "maximum":
        # torch.maximum propagates a NaN of either operand (tl.maximum's default returns the other one):
        # x where it wins or is NaN, else z (NaN when z is)
        y = tl.where((x > z) | (x != x), x, z)
    elif OP == "minimum":
        y = tl.where((x < z) | (x != x), x, z)
    elif OP == "mul_sigmoid":
        # 1 / (1 + exp(-z)): exp overflows to inf for z < -88 and the quotient is 0, never inf / inf
        y = x / (1.0 + tl.exp(-z))
    else:
        tl.static_assert(False, "unknown binary OP")
    return y


@triton.jit
def _tile_kernel(
    x_ptr,
    z_ptr,
    y_ptr,
    M,
    N,
    ZM,
    ZN,
    sxm,
    sxn,
    szm,
    szn,
    sym,
    OP: tl.constexpr,
    Z_TILES: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    if Z_TILES:
        zrows = rows % ZM
        zcols = cols % ZN
    else:
        zrows = rows
        zcols = cols
    x = tl.load(x_ptr + rows[:, None] * sxm + cols[None, :] * sxn, mask=mask, other=0.0).to(tl.float32)
    z = tl.load(z_ptr + zrows[:, None] * szm + zcols[None, :] * szn, mask=mask, other=1.0).to(tl.float32)
    y = _op(x, z, OP)
    tl.store(y_ptr + rows[:, None] * sym + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, z, **params):
    m, n = x.shape[0], x.shape[1]
    zm, zn = z.shape[0], z.shape[1]
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    tiles = not (zm in (1, m) and zn in (1, n))
    # along a dim of size 1, z's stride is 0: every row (column) of x reads its one row (column)
    szm = z.stride(0) if zm > 1 else 0
    szn = z.stride(1) if zn > 1 else 0
    grid = (triton.cdiv(m, params["BLOCK_M"]), triton.cdiv(n, params["BLOCK_N"]))
    _tile_kernel[grid](
        x,
        z,
        y,
        m,
        n,
        zm,
        zn,
        x.stride(0),
        x.stride(1),
        szm,
        szn,
        y.stride(0),
        OP=OP,
        Z_TILES=tiles,
        BLOCK_M=params["BLOCK_M"],
        BLOCK_N=params["BLOCK_N"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
