"""Linear + elementwise chain as one grouped-order tiled GEMM: the bias and every step of the chain are applied
to the fp32 accumulator tile, then it is rounded and stored once (no [M, N] intermediate in memory).

Programs are numbered so that GROUP_M consecutive tile-rows sweep the tile-columns together (their x row panels
and w column panels then hit in L2); w [N, K] is read as the [K, N] operand through its strides, no copy.
"""

import torch
import triton
import triton.language as tl

TASK = "linear_chain"
# The steps this template computes (kernels/chain_regions.py GROUPS): its `_step`'s.
CHAIN_STEPS = ("elementwise", "param")
# ---- generated: constants (python -m warpforge.kernels.chain_regions) ----
# The chain: each step's op and scalars, "none" past its end (a member's constants replace these
# lines; the default is the task's default member).
OP1 = "gelu"
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
# Whether a step reads p, the per-column parameter [N] (add_p, sub_p, mul_p, div_p): only then is it loaded.
PARAM_COLS = False

SPACE = {
    "BLOCK_M": [64, 128, 256],
    "BLOCK_N": [64, 128, 256],
    "BLOCK_K": [32, 64, 128],
    "GROUP_M": [4, 8, 16],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4, 5],
}

# The pipeline holds num_stages x and w tiles in shared memory: at most the target's
# shape["SMEM_BYTES"] per block (the harness adds it: kernels/targets.py).


def constraints(params, shape):
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    warps, stages = params["num_warps"], params["num_stages"]
    # 4 bytes unless told: fp32 is this task's first dtype (sm_90, 128x128x64 at 4 stages: 262,144 bytes in fp32,
    # over the limit, where the 2-byte count said 131,072); a matched problem's shape carries ELEM_BYTES
    smem = stages * (bm * bk + bk * bn) * shape.get("ELEM_BYTES", 4)
    if smem > shape["SMEM_BYTES"]:
        return False
    # fp32 accumulator per thread: more than 128 registers spills (e.g. 128x256 needs 8 warps); the chain keeps
    # z and y live besides it, so the same bound leaves it the other half of the 255
    if bm * bn > 4096 * warps:
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
def _linear_chain_kernel(
    a_ptr,
    b_ptr,
    bias_ptr,
    p_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_bias,
    stride_p,
    stride_cm,
    stride_cn,
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
    PARAM_COLS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # rows/columns past the edge wrap around (always in bounds, so loads need only the K mask); the store
    # below is masked
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # the bias and the chain in fp32, before the one rounding: a chain rounded per step in fp16 would round
    # up to 7 times (and overflow where z passes 65504 but the chain's result does not)
    bias = tl.load(bias_ptr + offs_cn * stride_bias, mask=offs_cn < N, other=0.0)
    z = acc + bias.to(tl.float32)[None, :]
    if PARAM_COLS:  # 1 past the columns, so a div_p step's masked lanes stay finite
        pv = tl.load(p_ptr + offs_cn * stride_p, mask=offs_cn < N, other=1.0).to(tl.float32)[None, :]
    else:
        pv = z
    y = _steps(z, z, pv, 1, 6, OP1, A1, B1, OP2, A2, B2, OP3, A3, B3, OP4, A4, B4, OP5, A5, B5, OP6, A6, B6)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, y.to(c_ptr.dtype.element_ty), mask=c_mask)


def launch(x, w, b, p, **params):
    M, K = x.shape
    N, K2 = w.shape
    assert K == K2, f"in_features differ: x is {tuple(x.shape)}, w is {tuple(w.shape)}"
    # fp32 inputs: torch multiplies them in IEEE fp32 (allow_tf32 is off by default); TF32 alone is 1e-3 off,
    # tf32x3 (three TF32 products) within ~1e-6 at a third of the tensor-core rate. Ignored for 16-bit inputs.
    precision = "tf32x3" if x.dtype == torch.float32 else "tf32"
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    bm, bn = params["BLOCK_M"], params["BLOCK_N"]
    _linear_chain_kernel[(triton.cdiv(M, bm) * triton.cdiv(N, bn),)](
        x,
        w,
        b,
        p,
        y,
        M,
        N,
        K,
        x.stride(0),
        x.stride(1),
        w.stride(1),
        w.stride(0),
        b.stride(0),
        p.stride(0),
        y.stride(0),
        y.stride(1),
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
        PARAM_COLS=PARAM_COLS,
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=params["BLOCK_K"],
        GROUP_M=params["GROUP_M"],
        DOT_PRECISION=precision,
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
