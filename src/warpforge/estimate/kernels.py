"""From walked aten ops to the kernels a GPU runs: each op's class, and the fusible regions.

Op classes (the cost model's unit, and the rows of its validation): ``gemm`` (mm, addmm, bmm, baddbmm),
``conv`` (split by what cuDNN runs differently: ``conv``, ``conv3d``, ``conv_transpose``, ``conv_transpose3d``,
``conv_grouped``), ``attention`` (one ``scaled_dot_product_attention`` call, whatever the meta walk decomposed
it into), ``reduction`` (single-pass: ``sum``, ``mean``, ``amax``, ``argmax``...; multi-pass ``norm``: softmax,
batch/group/layer norm, logsumexp; ``pool``; ``scan``: cumsum) and ``pointwise`` (everything else).

A *fusible region* is what torch.compile's default mode (Inductor) or a warpforge kernel makes one kernel of:
a maximal run of consecutive non-GEMM, non-convolution ops (Inductor leaves matmuls and convolutions to
cuBLAS and cuDNN outside max-autotune). Its bytes are its largest op's (a fused chain reads its input once
and writes its output once, and the largest op in it reads or writes at least that much).

Example::

    >>> kernel_class(WalkedOp("mm", 2.0, 3.0, torch.float32, "", ""))   # doctest: +SKIP
    'gemm'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from warpforge.estimate.ops import WalkedOp

GEMM = {"mm", "addmm", "bmm", "baddbmm", "_scaled_mm", "matmul", "linear"}
CONV = {"convolution", "_convolution", "cudnn_convolution", "conv2d", "conv3d", "conv1d"}
NORM = {
    "_softmax",
    "_log_softmax",
    "_safe_softmax",
    "softmax",
    "log_softmax",
    "native_batch_norm",
    "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training",
    "native_group_norm",
    "native_layer_norm",
    "logsumexp",
    "_fused_rms_norm",
    "nll_loss_forward",
    "var_mean",
    "var",
    "std",
}
REDUCTION = {
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "argmax",
    "argmin",
    "prod",
    "norm",
    "linalg_vector_norm",
    "any",
    "all",
    "std_mean",
    "nansum",
    "count_nonzero",
}
POOL = {
    "max_pool2d_with_indices",
    "max_pool3d_with_indices",
    "avg_pool2d",
    "avg_pool3d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool2d",
    "max_pool1d",
    "avg_pool1d",
    "_adaptive_avg_pool2d",
    "_adaptive_avg_pool3d",
}
SCAN = {"cumsum", "cumprod", "logcumsumexp", "cummax", "cummin"}

# The op classes the validation reports (a kernel's sub-class -> its class).
TOP_CLASS = {
    "gemm": "gemm",
    "conv": "conv",
    "conv3d": "conv",
    "conv_transpose": "conv",
    "conv_transpose3d": "conv",
    "conv_grouped": "conv",
    "attention": "attention",
    "reduction": "reduction",
    "norm": "reduction",
    "pool": "reduction",
    "scan": "reduction",
    "pointwise": "pointwise",
    "fused": "pointwise",
    "fused_norm": "reduction",
}
COMPUTE = {"gemm", "conv", "conv3d", "conv_transpose", "conv_transpose3d", "conv_grouped", "attention"}


@dataclass(frozen=True)
class Kernel:
    """One GPU kernel as the cost model prices it."""

    kind: str  # the sub-class (a key of TOP_CLASS)
    flops: float
    bytes: float
    dtype: torch.dtype
    module: str
    ops: tuple[str, ...]  # the aten ops it runs
    gemm_mnk: tuple[int, int, int] = (0, 0, 0)  # GEMM (M, N, K); a convolution's implicit GEMM, per group
    rows: int = 0  # a reduction's independent rows (its parallelism); 0 where unknown
    window: int = 1  # a convolution's or pool's kernel volume (positions a weight slides over)
    stride: int = 1  # a convolution's largest stride; a pool's stride volume
    fused: bool = False  # a fusible region run as one kernel

    @property
    def op_class(self) -> str:
        return TOP_CLASS[self.kind]


def _conv_geometry(op: WalkedOp) -> tuple[int, int]:
    spatial = len(op.shapes[0]) - 2
    ints = [int(v) for v in op.flags if isinstance(v, int) and not isinstance(v, bool)]
    return math.prod(op.shapes[1][2:]), max(ints[:spatial] or [1])


def _pool_geometry(op: WalkedOp) -> tuple[int, int]:
    """(window, stride) volumes: a window larger than its stride reads each input several times (level 1's
    2D max pool, 4x4 at stride 1: 0.8 TB/s on an H100; its 11x11 average pool at stride 11: 2.7 TB/s)."""
    if op.op.startswith(("adaptive", "_adaptive")) or not op.shapes:
        return 1, 1
    spatial = len(op.shapes[0]) - 2
    ints = [int(v) for v in op.flags if isinstance(v, int) and not isinstance(v, bool)]
    kernel, stride = ints[:spatial], ints[spatial : 2 * spatial] or ints[:spatial]
    return max(1, math.prod(kernel)), max(1, math.prod(stride))


def _conv(op: WalkedOp) -> tuple[str, tuple[int, int, int]]:
    x, w = op.shapes[0], op.shapes[1]
    bools = [v for v in op.flags if isinstance(v, bool)]
    transposed = bool(bools and bools[0])
    groups = int(op.flags[-1]) if op.flags and not isinstance(op.flags[-1], bool) else 1
    spatial = len(x) - 2
    kvol = math.prod(w[2:])
    c_in = x[1]
    c_out = w[1] * groups if transposed else w[0]
    # cuDNN's implicit GEMM: M = output positions, N = C_out / g, K = C_in / g x kernel volume (level 1's
    # AlexNet conv over 3 channels, 11x11: K = 363; a 3x3 over 3 channels: K = 27, a fraction of a tensor-core tile)
    m = op.out_numel // max(1, c_out) if op.out_numel else x[0] * math.prod(x[2:])
    n, k = max(1, c_out // groups), max(1, c_in // groups) * kvol
    if groups > 1 and not transposed:
        kind = "conv_grouped"
    elif transposed:
        kind = "conv_transpose3d" if spatial == 3 else "conv_transpose"
    else:
        kind = "conv3d" if spatial == 3 else "conv"
    return kind, (m, n, k)


def _gemm_mnk(op: WalkedOp) -> tuple[int, int, int]:
    mats = [s for s in op.shapes if len(s) >= 2]
    if len(mats) < 2:
        return (0, 0, 0)
    a, b = mats[-2], mats[-1]
    batch = math.prod(a[:-2]) if len(a) > 2 else 1
    return (batch * a[-2], b[-1], a[-1])


def _rows(op: WalkedOp, kind: str) -> int:
    """Independent rows of a norm or softmax: each is one block's work in torch's kernels, so few rows idle the GPU
    (level 1's LayerNorm over [64, 256, 256] per sample: 16 rows, 8.1 ms on an H100 for 0.26 GB)."""
    if not op.shapes:
        return 0
    x = op.shapes[0]
    numel = math.prod(x)
    ints = [int(v) for v in op.flags if isinstance(v, int) and not isinstance(v, bool)]
    name = op.op
    if name == "native_layer_norm" and len(op.shapes) >= 2:
        return numel // max(1, math.prod(op.shapes[1]))  # the weight's shape is the normalized shape
    if name == "native_group_norm" and len(ints) >= 4:
        return ints[0] * ints[3]
    if name.endswith("batch_norm") or name.startswith("_native_batch_norm"):
        return x[1] if len(x) > 1 else 0
    if "softmax" in name and ints:
        return numel // max(1, x[ints[0]])
    return 0


def op_kind(op: WalkedOp) -> str:
    """The sub-class of one aten op (``attention`` is decided per call, in :func:`kernels_of`)."""
    name = op.op.rstrip("_")  # in-place ``add_`` runs ``add``'s kernel
    if name in GEMM:
        return "gemm"
    if name in CONV and len(op.shapes) >= 2:
        return _conv(op)[0]
    if name == "convolution_backward":  # a training step's (optimize): no forward geometry to read
        return "conv"
    if name in NORM:
        return "norm"
    if name in REDUCTION:
        return "reduction"
    if name in POOL:
        return "pool"
    if name in SCAN:
        return "scan"
    return "pointwise"


def _attention(ops: list[WalkedOp]) -> Kernel:
    # q, k, v read and the output written once, as a fused attention kernel does
    q = next((s for o in ops for s in o.shapes if len(s) >= 3), ())
    size = torch.empty((), dtype=ops[0].dtype).element_size()
    return Kernel(
        "attention",
        sum(o.flops for o in ops),
        4.0 * math.prod(q) * size if q else sum(o.bytes for o in ops),
        ops[0].dtype,
        ops[0].module,
        tuple(o.op for o in ops),
    )


def kernels_of(ops: list[WalkedOp]) -> list[Kernel]:
    """The eager forward's kernels: one per op, one per attention call."""
    out: list[Kernel] = []
    i = 0
    while i < len(ops):
        o = ops[i]
        if "scaled_dot_product_attention" in o.call:
            j = i
            while j < len(ops) and ops[j].call == o.call:
                j += 1
            out.append(_attention(ops[i:j]))
            i = j
            continue
        kind = op_kind(o)
        forward_conv = kind.startswith("conv") and o.op != "convolution_backward"
        mnk = _conv(o)[1] if forward_conv else _gemm_mnk(o) if kind == "gemm" else (0, 0, 0)
        # a plain reduction to few outputs splits its rows over blocks (a mean to a scalar fills the GPU); a
        # norm's or softmax's kernel gives each row one block
        rows = _rows(o, kind) if kind == "norm" else 0
        window, stride = _conv_geometry(o) if forward_conv else _pool_geometry(o) if kind == "pool" else (1, 1)
        out.append(Kernel(kind, o.flops, o.bytes, o.dtype, o.module, (o.op,), mnk, rows, window, stride))
        i += 1
    return out


@dataclass
class Region:
    """A run of kernels that fusion makes one (a GEMM, convolution or attention kernel is a region alone)."""

    kernels: list[Kernel] = field(default_factory=list)

    @property
    def fusible(self) -> bool:
        return self.kernels[0].kind not in COMPUTE

    def as_one(self) -> Kernel:
        """The region as one kernel: its FLOPs, and its largest op's bytes."""
        if not self.fusible:
            return self.kernels[0]
        ks = self.kernels
        kind = "fused_norm" if any(k.kind in ("norm", "pool", "scan") for k in ks) else "fused"
        rows = [k.rows for k in ks if k.rows]
        return Kernel(
            kind,
            sum(k.flops for k in ks),
            max(k.bytes for k in ks),
            ks[0].dtype,
            ks[0].module,
            tuple(op for k in ks for op in k.ops),
            rows=min(rows) if rows else 0,
            fused=True,
        )


def regions_of(kernels: list[Kernel]) -> list[Region]:
    """Fusible regions in order (see module doc)."""
    regions: list[Region] = []
    for k in kernels:
        if k.kind in COMPUTE or not regions or not regions[-1].fusible:
            regions.append(Region([k]))
        else:
            regions[-1].kernels.append(k)
    return regions
