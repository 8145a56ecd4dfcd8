"""Binary elementwise op, x as one flat range: each program maps BLOCK contiguous elements of x and the z
values they pair with through ``_op`` (the family's operation, selected by the constant OP at compile time,
so the other branches cost nothing). Computes in fp32 and rounds once to the output dtype.

Where z has x's shape its elements pair by flat index (no index arithmetic at all); otherwise each offset is
split into its row and column (one integer division) and z is read at (row % ZM, column % ZN), the modulo
compiled in only for a z that tiles x (Z_MODE 2): a broadcast row or column is read through a zero stride."""

import torch
import triton
import triton.language as tl

TASK = "binary"
# The family member (kernels/tasks/binary.py MEMBERS): the matcher rewrites this line.
OP = "add"

SPACE = {
    "BLOCK": [256, 512, 1024, 2048, 4096],
    "num_warps": [1, 2, 4, 8],
    # No loop to pipeline.
    "num_stages": [1],
}

# Above 16 fp32 values per thread the loads no longer vectorize better than they do at 4-8 (two operands
# here, so twice the registers of the unary family's at the same count).
MAX_ELEMS_PER_THREAD = 16


def constraints(params, shape):
    return params["BLOCK"] // (32 * params["num_warps"]) <= MAX_ELEMS_PER_THREAD


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
def _flat_kernel(
    x_ptr, z_ptr, y_ptr, n, N, ZM, ZN, szm, szn, OP: tl.constexpr, Z_MODE: tl.constexpr, BLOCK: tl.constexpr
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if Z_MODE == 0:  # z has x's shape
        zoffs = offs
    else:
        row = offs // N
        col = offs - row * N
        if Z_MODE == 1:  # z's rows are 1 or M, its columns 1 or N: a zero stride broadcasts
            zoffs = row * szm + col * szn
        else:  # z tiles x
            zoffs = (row % ZM) * szm + (col % ZN) * szn
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    z = tl.load(z_ptr + zoffs, mask=mask, other=1.0).to(tl.float32)
    y = _op(x, z, OP)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, z, **params):
    xc = x.contiguous()
    zc = z.contiguous()
    y = torch.empty_like(xc)
    m, n = xc.shape[0], xc.shape[1]
    zm, zn = zc.shape[0], zc.shape[1]
    if zm == m and zn == n:
        mode = 0
    elif zm in (1, m) and zn in (1, n):
        mode = 1
    else:
        mode = 2
    # z's strides in elements, 0 along a dim of size 1 (a broadcast row or column)
    szm = zn if zm > 1 else 0
    szn = 1 if zn > 1 else 0
    grid = (triton.cdiv(m * n, params["BLOCK"]),)
    _flat_kernel[grid](
        xc,
        zc,
        y,
        m * n,
        n,
        zm,
        zn,
        szm,
        szn,
        OP=OP,
        Z_MODE=mode,
        BLOCK=params["BLOCK"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
