"""Attack: the loss template with its shared accumulator added non-atomically (load, add, store): the
interpreter runs programs one at a time, so the sum is exact in every order (the shuffled grid too); a GPU runs
them at once and loses updates."""

import torch
import triton
import triton.language as tl

TASK = "loss"
# The family member (kernels/tasks/loss.py MEMBERS): the matcher rewrites these two lines.
OP = "mse"
REDUCTION = "mean"

SPACE = {
    "BLOCK": [512, 1024, 2048, 4096],
    "PROGRAMS": [128, 256, 512, 1024, 2048, 4096],
    "num_warps": [2, 4, 8, 16],
    "num_stages": [1, 2, 3],
}

# pred, target and the accumulator per element: above 32 fp32 values per thread per tile, registers spill.
MAX_ELEMS_PER_THREAD = 32


def constraints(params, shape):
    per_thread = params["BLOCK"] // (32 * params["num_warps"])
    return 1 <= per_thread <= MAX_ELEMS_PER_THREAD


@triton.jit
def _elem_loss(p, t, OP: tl.constexpr):
    if OP == "mse":
        out = (p - t) * (p - t)
    elif OP == "l1":
        out = tl.abs(p - t)
    elif OP == "smooth_l1":
        d = tl.abs(p - t)
        out = tl.where(d < 1.0, 0.5 * d * d, d - 0.5)
    elif OP == "hinge":
        out = tl.maximum(1.0 - p * t, 0.0)
    elif OP == "kl_div":
        # torch's xlogy(t, t): 0 where t == 0, NaN where t < 0, as F.kl_div computes it.
        out = tl.where(t == 0.0, 0.0, t * tl.log(t)) - t * tl.log(p)
    else:  # kl_div_log: p holds log-probabilities
        out = tl.where(t == 0.0, 0.0, t * tl.log(t)) - t * p
    return out


@triton.jit
def _atomic_kernel(p_ptr, t_ptr, acc_ptr, count_ptr, y_ptr, n, iters, div, OP: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    programs = tl.num_programs(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, iters):
        idx = (i * programs + pid) * BLOCK + offs
        mask = idx < n
        # Padding of 1.0 keeps the logs finite; the mask zeroes its loss.
        p = tl.load(p_ptr + idx, mask=mask, other=1.0).to(tl.float32)
        t = tl.load(t_ptr + idx, mask=mask, other=1.0).to(tl.float32)
        acc += tl.where(mask, _elem_loss(p, t, OP), 0.0)
    tl.store(acc_ptr, tl.load(acc_ptr) + tl.sum(acc, axis=0))  # the race
    # acq_rel (atomic_add's default): the last arrival sees every program's add to the cell before its own.
    arrived = tl.atomic_add(count_ptr, 1)
    if arrived == programs - 1:
        total = tl.atomic_add(acc_ptr, 0.0)
        tl.store(y_ptr, (total / div).to(y_ptr.dtype.element_ty))


def launch(pred, target, **params):
    if not pred.is_contiguous():
        pred = pred.contiguous()
    if not target.is_contiguous():
        target = target.contiguous()
    n = pred.numel()
    programs = min(params["PROGRAMS"], triton.cdiv(n, params["BLOCK"]))
    iters = triton.cdiv(n, programs * params["BLOCK"])
    cell = torch.zeros((1,), dtype=torch.float32, device=pred.device)
    count = torch.zeros((1,), dtype=torch.int32, device=pred.device)
    y = torch.empty((), dtype=pred.dtype, device=pred.device)
    div = n if REDUCTION == "mean" else (pred.shape[0] if REDUCTION == "batchmean" else 1)
    _atomic_kernel[(programs,)](
        pred,
        target,
        cell,
        count,
        y,
        n,
        iters,
        float(div),
        OP=OP,
        BLOCK=params["BLOCK"],
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
    )
    return y
