"""A problem's forward read as one head module (an ``nn.Linear``) followed by elementwise steps, with ``torch.fx``:
the reader behind ``linear_chain``'s member proposals (kernels/tasks/linear_chain.py ``propose_members``).

A family's members are usually a fixed table; a Linear followed by elementwise steps carries the problem's own
constants (``x * 2.0``, ``LeakyReLU(0.1)``), so the member is built for the problem: its forward is traced
(``torch.fx.symbolic_trace`` of the model at the probe sizes) and read as one ``nn.Linear`` on the first input
followed by steps of kernels/tasks/linear_chain.py ``STEP_OPS``. The trace only proposes; the matcher then
compares that member's reference with the problem's numbers like any member's, so a misread forward is no
match, never a wrong one.

Read as steps: a unary op of the running value (ReLU, GELU, ``torch.clamp``, ...); a binary op with a Python
number (``* s``, ``/ d``, ``- c``, ``c - v``); the running value with the GEMM output ``z`` itself (``v + z``, a
residual; ``clone``/``detach`` of ``z`` are ``z``); ``v * sigmoid(v)`` (swish) as one SiLU step,
``v * clamp((v + 3) / 6, 0, 1)`` as one hardswish; and, for a
Linear without bias, a parameter added right after it as the Linear's bias (``gemm(x) + self.bias``).
A ``GroupNorm`` or a training-mode ``BatchNorm1d`` module is one norm step (``_norm_step``), which only the
tasks owning its statistics take (kernels/tasks/linear_groupnorm.py). Anything else (a second GEMM, another
normalization, a tensor other than z) proposes nothing.

Example::

    >>> import torch.nn as nn, torch.nn.functional as F
    >>> class Model(nn.Module):                                          # doctest: +SKIP
    ...     def __init__(self): super().__init__(); self.gemm = nn.Linear(8, 4)
    ...     def forward(self, x): return F.leaky_relu(self.gemm(x) * 2.0, 0.1)
    >>> chain_steps(Model())                                             # doctest: +SKIP
    (('mul', 2.0, 0.0), ('leaky_relu', 0.1, 0.0))
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

Step = tuple[str, float, float]

MAX_STEPS = 6


# op -> f(y, z, a, b): y the running value, z the head's output (its bias added), a and b the step's scalars.
STEP_OPS: dict[str, Callable[[torch.Tensor, torch.Tensor, float, float], torch.Tensor]] = {
    "mul": lambda y, z, a, b: y * a,
    "div": lambda y, z, a, b: y / a,
    "add": lambda y, z, a, b: y + a,
    "rsub": lambda y, z, a, b: a - y,
    "add_z": lambda y, z, a, b: y + z,
    "sub_z": lambda y, z, a, b: y - z,
    "mul_z": lambda y, z, a, b: y * z,
    "relu": lambda y, z, a, b: torch.relu(y),
    "leaky_relu": lambda y, z, a, b: F.leaky_relu(y, a),
    "gelu": lambda y, z, a, b: F.gelu(y),
    "gelu_tanh": lambda y, z, a, b: F.gelu(y, approximate="tanh"),
    "sigmoid": lambda y, z, a, b: torch.sigmoid(y),
    "tanh": lambda y, z, a, b: torch.tanh(y),
    "silu": lambda y, z, a, b: F.silu(y),
    "mish": lambda y, z, a, b: F.mish(y),
    "clamp": lambda y, z, a, b: torch.clamp(y, a, b),
    "max": lambda y, z, a, b: torch.clamp(y, min=a),
    "min": lambda y, z, a, b: torch.clamp(y, max=a),
    "hardswish": lambda y, z, a, b: F.hardswish(y),
    "mul_mish": lambda y, z, a, b: y * F.mish(y),  # v * mish(v): the value gated by its own Mish
    # Reductions of each output row to one value (a = keepdim, applied when the chain ends); the steps after one
    # act on [M, 1]. Only the `rows` template, whose programs own whole rows, computes them (RED_AT).
    "row_sum": lambda y, z, a, b: y.sum(-1, keepdim=True),
    "row_mean": lambda y, z, a, b: y.mean(-1, keepdim=True),
    "row_max": lambda y, z, a, b: y.amax(-1, keepdim=True),
    "row_min": lambda y, z, a, b: y.amin(-1, keepdim=True),
    "row_logsumexp": lambda y, z, a, b: torch.logsumexp(y, -1, keepdim=True),
    # A softmax over each output row ([M, N] stays [M, N]): a program needs the row's max and sum first.
    "row_softmax": lambda y, z, a, b: torch.softmax(y, -1),
    # 1-D pooling along the row with kernel and stride a (``MaxPool1d(a)`` of ``y.unsqueeze(1)``, squeezed back):
    # [M, N] -> [M, N // a], the last N % a columns dropped.
    "row_pool_max": lambda y, z, a, b: F.max_pool1d(y.unsqueeze(1), int(a)).squeeze(1),
    "row_pool_avg": lambda y, z, a, b: F.avg_pool1d(y.unsqueeze(1), int(a)).squeeze(1),
    # A convolution's global average pooling: [N, C, ...] -> [N, C, 1, ...], the mean over every spatial dim
    # (only a convolution head is read with it, and only the conv template `channel_rows` computes it).
    "spatial_mean": lambda y, z, a, b: y.mean(tuple(range(2, y.dim())), keepdim=True),
}
# Reductions of each row to one value.
REDUCE_OPS = frozenset(("row_sum", "row_mean", "row_max", "row_min", "row_logsumexp"))
# A program must see the whole row (or reshape it) for these: a chain holds at most one of each kind, and no step
# after one reads z. Only linear_chain's `rows` template computes them; other heads (a convolution) refuse them.
ROW_OPS = frozenset(op for op in STEP_OPS if op.startswith("row_"))
# Ops with a parameter tensor p broadcast per output channel (a conv's ``x + self.bias`` of shape [C, 1, 1]):
# y op p. A chain reads at most one such parameter; the task that takes it passes it to the reference.
PARAM_OPS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "add_p": lambda y, p: y + p,
    "sub_p": lambda y, p: y - p,
    "mul_p": lambda y, p: y * p,
    "div_p": lambda y, p: y / p,
}
# Each op of STEP_OPS and PARAM_OPS a template computes on its fp32 tile, as Triton: y the running value, z the
# head's output with its bias, p the parameter ([1, BLOCK_N]), A and B the step's scalars (constexprs), _tanh and
# _softplus the templates' stable helpers (kernels/chain_regions.py). The row steps, spatial_mean and the norm are
# no expression: a template's kernel computes them itself. The one source of every chain template's `_step`,
# which `python -m warpforge.kernels.chain_regions` writes into each template's generated region.
TRITON_STEPS: dict[str, str] = {
    "mul": "y * A",
    "div": "y / A",
    "add": "y + A",
    "rsub": "A - y",
    "add_z": "y + z",
    "sub_z": "y - z",
    "mul_z": "y * z",
    "add_p": "y + p",
    "sub_p": "y - p",
    "mul_p": "y * p",
    "div_p": "y / p",
    "relu": "tl.maximum(y, 0.0)",
    "leaky_relu": "tl.where(y >= 0, y, y * A)",
    "gelu": "0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476))",
    "gelu_tanh": "y / (1.0 + tl.exp(-1.5957691216057308 * (y + 0.044715 * y * y * y)))",
    "sigmoid": "1.0 / (1.0 + tl.exp(-y))",
    "tanh": "_tanh(y)",
    "silu": "y / (1.0 + tl.exp(-y))",
    "mish": "y * _tanh(_softplus(y))",
    "clamp": "tl.minimum(tl.maximum(y, A), B)",
    "max": "tl.maximum(y, A)",
    "min": "tl.minimum(y, A)",
    "hardswish": "y * tl.minimum(tl.maximum(y + 3.0, 0.0), 6.0) / 6.0",
    "mul_mish": "y * (y * _tanh(_softplus(y)))",
}
# Why an expression is written as it is (a comment above it in the generated `_step`).
TRITON_NOTES: dict[str, str] = {
    "gelu_tanh": "0.5 (1 + tanh(u)) is sigmoid(2u); 1 + tanh(u) cancels for y < -3 (2% off at y = -4.46, "
    "torch's fp32 0.6%)",
}
# Ops whose scalar arguments are part of their name (the rest take none).
_ARGS = {
    "mul": 1,
    "div": 1,
    "add": 1,
    "rsub": 1,
    "leaky_relu": 1,
    "clamp": 2,
    "max": 1,
    "min": 1,
    "row_pool_max": 1,
    "row_pool_avg": 1,
    **{op: 1 for op in REDUCE_OPS},
}


def step_name(step: Step) -> str:
    op, a, b = step
    args = (a, b)[: _ARGS.get(op, 0)]
    return f"{op}({','.join(repr(float(v)) for v in args)})" if args else op


def checked(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """The steps with float scalars; ValueError when they are no chain."""
    known = {**STEP_OPS, **PARAM_OPS}
    if not 1 <= len(steps) <= MAX_STEPS or any(op not in known for op, _, _ in steps):
        raise ValueError(f"a chain is 1 to {MAX_STEPS} steps of {sorted(known)}, got {steps}")
    return tuple((op, float(a), float(b)) for op, a, b in steps)


def apply_steps(z: torch.Tensor, steps: tuple[Step, ...], p: torch.Tensor | None = None) -> torch.Tensor:
    """The chain on the head's output z (p: the parameter the ``*_p`` steps read)."""
    y = z
    for op, a, b in steps:
        if op in PARAM_OPS:
            assert p is not None, f"step {op} reads a parameter"
            y = PARAM_OPS[op](y, p)
        else:
            y = STEP_OPS[op](y, z, a, b)
    return y


def step_constants(steps: tuple[Step, ...]) -> dict[str, str | float]:
    """The templates' module constants OP1, A1, B1, ..., OP6, A6, B6 ("none" past the chain's end)."""
    out: dict[str, str | float] = {}
    for i in range(MAX_STEPS):
        op, a, b = steps[i] if i < len(steps) else ("none", 0.0, 0.0)
        out.update({f"OP{i + 1}": op, f"A{i + 1}": a, f"B{i + 1}": b})
    return out


# Unary callables (functions, and the methods by name) -> the step op; an argument-free op.
_UNARY: dict[Any, str] = {
    torch.relu: "relu",
    F.relu: "relu",
    torch.sigmoid: "sigmoid",
    F.sigmoid: "sigmoid",
    torch.tanh: "tanh",
    F.tanh: "tanh",
    F.silu: "silu",
    F.mish: "mish",
    F.hardswish: "hardswish",
    "relu": "relu",
    "sigmoid": "sigmoid",
    "tanh": "tanh",
}
# No-ops: the value itself.
_SAME: set[Any] = {"clone", "detach", "contiguous", torch.clone}
_MATMUL: set[Any] = {torch.matmul, operator.matmul, torch.mm}
# Reductions over the output row (functions, and the methods by name) -> the step op.
_REDUCE: dict[Any, str] = {
    torch.sum: "row_sum",
    "sum": "row_sum",
    torch.mean: "row_mean",
    "mean": "row_mean",
    torch.amax: "row_max",
    "amax": "row_max",
    torch.max: "row_max",
    "max": "row_max",
    torch.amin: "row_min",
    "amin": "row_min",
    torch.min: "row_min",
    "min": "row_min",
    torch.logsumexp: "row_logsumexp",
    "logsumexp": "row_logsumexp",
}
_SOFTMAX: set[Any] = {torch.softmax, F.softmax, "softmax"}
# Elementwise min/max of two tensors (as torch.min/max with a tensor second argument): a step when one is 0-d.
_ELEMENTWISE_MINMAX: set[Any] = {torch.minimum, torch.maximum, "minimum", "maximum"}
# Global average pooling of a convolution's output (output size 1 in every dim): one ``spatial_mean`` step.
_ADAPTIVE_AVG = (nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d)
_ADAPTIVE_AVG_FN: set[Any] = {F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d}
# 1-D pooling modules read as a step: ``pool(v.unsqueeze(1)).squeeze(1)``.
_POOLS: dict[type[nn.Module], str] = {nn.MaxPool1d: "row_pool_max", nn.AvgPool1d: "row_pool_avg"}
_BINARY: dict[Any, str] = {
    operator.mul: "mul",
    torch.mul: "mul",
    "mul": "mul",
    operator.add: "add",
    torch.add: "add",
    "add": "add",
    operator.sub: "sub",
    torch.sub: "sub",
    "sub": "sub",
    operator.truediv: "div",
    torch.div: "div",
    "div": "div",
}


class _Unsupported(Exception):
    """The forward is no Linear followed by an elementwise chain."""


class _Pair(Exception):
    """A (values, indices) reduction: its chain waits in ``_Reader.pairs`` for ``[0]`` or ``.values``; or a
    view on the way to a pooling (``v.unsqueeze(1)``, the pooled [M, 1, N // k]) waits in ``_Reader.views``."""


@dataclass(frozen=True)
class Chain:
    """A forward read as its head module applied to the input, then steps."""

    head: nn.Module | None  # None for a functional Linear (``x @ W.T``, ``F.linear``)
    steps: tuple[Step, ...]
    param: str = ""  # the parameter the ``*_p`` steps read (its state_dict name), "" for none


def read_chain(model: nn.Module, heads: tuple[type[nn.Module], ...] = (nn.Linear,)) -> Chain | None:
    """The model's forward as one head (a module of ``heads``, or a functional Linear when nn.Linear is one) on its
    input followed by steps; None when it is no such chain (the head alone is none either)."""
    traced = torch.fx.symbolic_trace(model)
    reader = _Reader(traced, heads)
    try:
        steps = reader.read()
    except _Unsupported:
        return None
    return None if steps is None else Chain(reader.head, steps, reader.param)


def chain_steps(model: nn.Module) -> tuple[Step, ...] | None:
    """The steps after the model's one Linear, read from its traced forward; None when it is not such a chain."""
    chain = read_chain(model)
    return None if chain is None else chain.steps


class _Reader:
    """Each fx node as the chain of steps it is of z (the Linear's output); parameters and numbers as they are."""

    def __init__(self, traced: torch.fx.GraphModule, heads: tuple[type[nn.Module], ...] = (nn.Linear,)) -> None:
        self.traced = traced
        self.heads = heads
        self.head: nn.Module | None = None
        self.param = ""
        self.modules = dict(traced.named_modules())
        self.chains: dict[torch.fx.Node, tuple[Step, ...]] = {}
        self.params: set[torch.fx.Node] = set()
        # The head's bias: True, False (a bias-free Linear or ``x @ W.T``), None before the head is read.
        self.bias: bool | None = None
        self.bias_folded = False
        # torch.max/min(v, dim) return (values, indices): read only through ``[0]`` or ``.values``.
        self.pairs: dict[torch.fx.Node, tuple[Step, ...]] = {}
        # v.unsqueeze(1) ("unsqueezed") and a 1-D pooling of it ("pooled"), read only through the next step of
        # ``pool(v.unsqueeze(1)).squeeze(1)``.
        self.views: dict[torch.fx.Node, tuple[str, tuple[Step, ...]]] = {}
        # 0-d tensors made in the forward (``torch.tensor(0.5)``) -> their value; ``v.device``/``v.dtype`` reads.
        self.scalars: dict[torch.fx.Node, float] = {}
        self.meta: set[torch.fx.Node] = set()

    def read(self) -> tuple[Step, ...] | None:
        inputs = [n for n in self.traced.graph.nodes if n.op == "placeholder"]
        if len(inputs) != 1:
            raise _Unsupported
        result: tuple[Step, ...] | None = None
        for node in self.traced.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "get_attr":
                self.params.add(node)
            elif self._scalar_source(node):
                continue
            elif (
                node.args
                and isinstance(node.args[0], torch.fx.Node)
                and node.args[0] in self.params
                and ((node.target is getattr and node.args[1] == "T") or node.target == "t")
            ):
                self.params.add(node)  # W.T of a parameter: the operand of x @ W.T
            elif node.op == "output":
                out = node.args[0]
                if not isinstance(out, torch.fx.Node) or out not in self.chains:
                    raise _Unsupported
                result = self.chains[out]
            else:
                try:
                    self.chains[node] = self._step(node, inputs[0])
                except _Pair:
                    pass
        if self.bias is None:
            return None  # no Linear head
        return result or None  # an empty chain is the linear task itself

    def _chain(self, arg: Any) -> tuple[Step, ...]:
        if not isinstance(arg, torch.fx.Node) or arg not in self.chains:
            raise _Unsupported
        return self.chains[arg]

    def _step(self, node: torch.fx.Node, x: torch.fx.Node) -> tuple[Step, ...]:
        target = node.target
        if node.op == "call_module":
            module = self.modules[str(target)]
            if isinstance(module, self.heads):
                self.head = module
                return self._head(node.args[0] is x, getattr(module, "bias", None) is not None)
            if isinstance(module, (nn.Identity, nn.Dropout)):  # a Dropout of a model in eval() is the identity
                return self._chain(node.args[0])
            if type(module) in _POOLS:
                return self._pool(node, module)
            if isinstance(module, _ADAPTIVE_AVG):
                return self._spatial_pool(node, module.output_size)
            if isinstance(module, nn.Softmax):
                if module.dim not in (1, -1):
                    raise _Unsupported
                return self._chain(node.args[0]) + (("row_softmax", 0.0, 0.0),)
            norm = _norm_step(module)
            if norm is not None:
                return self._chain(node.args[0]) + (norm,)
            return self._chain(node.args[0]) + (_module_step(module),)
        key = target if node.op == "call_function" else str(target)
        if node.kwargs.get("inplace"):
            raise _Unsupported
        kwargs = {k: v for k, v in node.kwargs.items() if k != "inplace"}
        if key in _SAME:
            return self._chain(node.args[0])
        if (key in _MATMUL or key == "matmul") and nn.Linear in self.heads:  # x @ W.T, W a parameter [N, K]
            w = node.args[1] if len(node.args) == 2 else None
            if kwargs or not isinstance(w, torch.fx.Node) or w not in self.params or w.op == "get_attr":
                raise _Unsupported  # only W.T (a parameter's transpose) is a Linear's weight [N, K]
            return self._head(node.args[0] is x, False)
        if key is F.linear and nn.Linear in self.heads:
            if kwargs or len(node.args) not in (2, 3) or any(a not in self.params for a in node.args[1:]):
                raise _Unsupported
            return self._head(node.args[0] is x, len(node.args) == 3)
        if key in _ELEMENTWISE_MINMAX or (
            key in _REDUCE and len(node.args) == 2 and not kwargs and self._scalar(node.args[1]) is not None
        ):
            return self._minmax(key, node)
        if key in _ADAPTIVE_AVG_FN:
            return self._spatial_pool(node, _arg(node, 1, "output_size", None))
        if key in _REDUCE and self._spatial_dims(_arg(node, 1, "dim", None)):
            return self._spatial_reduce(_REDUCE[key], node)
        if key in _REDUCE:
            return self._reduce(_REDUCE[key], node)
        if key in _SOFTMAX:
            if (
                _arg(node, 1, "dim", None) not in (1, -1)
                or set(kwargs) - {"dim", "_stacklevel", "dtype"}
                or kwargs.get("dtype") is not None
            ):
                raise _Unsupported
            return self._chain(node.args[0]) + (("row_softmax", 0.0, 0.0),)
        if key in ("squeeze", "flatten", torch.flatten) and self._pooled_view(node):
            return self._chain(node.args[0])
        if key in ("unsqueeze", "squeeze"):
            return self._view(node, str(key))
        pair = node.args[0] if node.args and isinstance(node.args[0], torch.fx.Node) else None
        if key in (operator.getitem, getattr) and pair in self.pairs:
            if node.args[1] not in (0, "values"):
                raise _Unsupported  # the indices
            return self.pairs[pair]
        if key in _UNARY:
            if len(node.args) != 1 or kwargs:
                raise _Unsupported
            return self._chain(node.args[0]) + ((_UNARY[key], 0.0, 0.0),)
        if key in _BINARY:
            if kwargs or len(node.args) != 2:  # torch.add(a, b, alpha=2) is no plain add
                raise _Unsupported
            return self._binary(_BINARY[key], *node.args)
        return self._chain(node.args[0]) + (_function_step(key, node),)

    def _head(self, on_input: bool, bias: bool) -> tuple[Step, ...]:
        if self.bias is not None or not on_input:
            raise _Unsupported  # a second GEMM, or one not applied to the input
        self.bias = bias
        return ()

    def _reduce(self, op: str, node: torch.fx.Node) -> tuple[Step, ...]:
        """A reduction over each output row (dim 1 or -1 of the [M, N] output): one ``row_*`` step whose first
        scalar is keepdim; a second one over the [M, 1] that remains is the value itself."""
        chain = self._chain(node.args[0])
        dim = _arg(node, 1, "dim", None)
        keep = bool(_arg(node, 2, "keepdim", False))
        if dim not in (1, -1, (1,), (-1,), [1], [-1]) or set(node.kwargs) - {"dim", "keepdim"}:
            raise _Unsupported
        prior = next((s for s in chain if s[0] in REDUCE_OPS), None)
        if prior is not None and not (keep and prior[1] == 1.0):
            raise _Unsupported  # only [M, 1] reduced again over its one column is the value itself
        out = chain if prior is not None else chain + ((op, float(keep), 0.0),)
        if node.target in (torch.max, torch.min, "max", "min"):
            self.pairs[node] = out  # values and indices: the values are read by [0] or .values
            raise _Pair
        return out

    def _view(self, node: torch.fx.Node, key: str) -> tuple[Step, ...]:
        """``v.unsqueeze(1)`` waits for its pooling; ``.squeeze(1)`` of the pooled value is its chain."""
        arg, dim = node.args[0], _arg(node, 1, "dim", None)
        if set(node.kwargs) - {"dim"} or not isinstance(arg, torch.fx.Node):
            raise _Unsupported
        if key == "unsqueeze" and dim == 1:
            self.views[node] = ("unsqueezed", self._chain(arg))
            raise _Pair
        if key == "squeeze" and dim in (1, -2) and self.views.get(arg, ("", ()))[0] == "pooled":
            return self.views[arg][1]
        raise _Unsupported

    def _pool(self, node: torch.fx.Node, module: nn.Module) -> tuple[Step, ...]:
        """A 1-D pooling of ``v.unsqueeze(1)`` with stride its kernel, no padding, dilation or ceil mode."""
        arg = node.args[0]
        kind, chain = self.views.get(arg, ("", ())) if isinstance(arg, torch.fx.Node) else ("", ())
        k, stride, padding = (_one(getattr(module, a)) for a in ("kernel_size", "stride", "padding"))
        plain = (
            stride in (k, None)
            and padding == 0
            and not getattr(module, "ceil_mode", False)
            and _one(getattr(module, "dilation", 1)) == 1
            and not getattr(module, "return_indices", False)
        )
        if kind != "unsqueezed" or not plain or not isinstance(k, int):
            raise _Unsupported
        self.views[node] = ("pooled", chain + ((_POOLS[type(module)], float(k), 0.0),))
        raise _Pair

    def _spatial_dims(self, dim: Any) -> bool:
        """Whether ``dim`` names every spatial dim of a convolution head's [N, C, ...] output (and only those)."""
        rank = len(getattr(self.head, "kernel_size", ())) + 2
        dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
        return (
            rank > 2
            and all(isinstance(d, int) for d in dims)
            and len(dims) == rank - 2
            and {d % rank for d in dims} == set(range(2, rank))
        )

    def _spatial_pool(self, node: torch.fx.Node, size: Any) -> tuple[Step, ...]:
        """A global average pooling of a convolution's output (``AdaptiveAvgPoolNd(1)``): one ``spatial_mean``."""
        sizes = size if isinstance(size, (tuple, list)) else (size,)
        if self.head is None or not hasattr(self.head, "kernel_size") or any(s != 1 for s in sizes):
            raise _Unsupported
        return self._spatial_reduce("row_mean", node, pooling=True)

    def _spatial_reduce(self, op: str, node: torch.fx.Node, pooling: bool = False) -> tuple[Step, ...]:
        """A mean over every spatial dim (keepdim: the pooled [N, C, 1, ...]) is ``spatial_mean``; once pooled,
        a sum or mean over those unit dims is the value itself (KernelBench 42's ``torch.sum(x, dim=(2, 3))``)."""
        chain = self._chain(node.args[0])
        if not pooling and (set(node.kwargs) - {"dim", "keepdim"} or op not in ("row_sum", "row_mean")):
            raise _Unsupported
        if any(s[0] == "spatial_mean" for s in chain):
            return chain
        if op != "row_mean" or not (pooling or _arg(node, 2, "keepdim", False)) or any(s[0] in ROW_OPS for s in chain):
            raise _Unsupported  # a spatial sum, a squeezed mean, or a pooling after a channel reduction
        return chain + (("spatial_mean", 0.0, 0.0),)

    def _pooled_view(self, node: torch.fx.Node) -> bool:
        """``squeeze`` of spatial dims or ``flatten(1)`` of a globally pooled value: the same values (the
        problem's output shape is the matcher's to map)."""
        arg = node.args[0]
        if not isinstance(arg, torch.fx.Node) or not any(s[0] == "spatial_mean" for s in self.chains.get(arg, ())):
            return False
        dim = _arg(node, 1, "dim" if node.target == "squeeze" else "start_dim", None)
        if node.target == "squeeze":
            rank = len(getattr(self.head, "kernel_size", ())) + 2
            return isinstance(dim, int) and (dim % rank >= 2 or dim == -1) and not set(node.kwargs) - {"dim"}
        return dim == 1 and len(node.args) <= 2 and not node.kwargs

    def _binary(self, op: str, a: Any, b: Any) -> tuple[Step, ...]:
        a, b = (v if (c := self._scalar(v)) is None else c for v in (a, b))
        if _number(b):
            # v - c is v + (-c), the same rounding
            by_number = {"mul": ("mul", b), "add": ("add", b), "sub": ("add", -b), "div": ("div", b)}
            step, value = by_number[op]
            return self._chain(a) + ((step, float(value), 0.0),)
        if _number(a):
            flipped = {"mul": "mul", "add": "add", "sub": "rsub"}.get(op)
            if flipped is None:
                raise _Unsupported  # c / v
            return self._chain(b) + ((flipped, float(a), 0.0),)
        if op == "add" and self.bias is False and not self.bias_folded:
            # gemm(x) + self.bias right after a bias-free Linear: that parameter is the Linear's bias
            for z, p in ((a, b), (b, a)):
                if p in self.params and self._chain(z) == ():
                    self.bias_folded = self.bias = True
                    return ()
        for v, w, swapped in ((a, b, False), (b, a, True)):
            if (
                isinstance(w, torch.fx.Node)
                and w.op == "get_attr"
                and w in self.params
                and isinstance(v, torch.fx.Node)
                and v in self.chains
            ):
                # y op p with a parameter broadcast per channel (p - y or p / y: no step)
                if self.param not in ("", str(w.target)) or (swapped and op in ("sub", "div")):
                    raise _Unsupported
                self.param = str(w.target)
                return self._chain(v) + ((f"{op}_p", 0.0, 0.0),)
        ca, cb = self._chain(a), self._chain(b)
        # The same chain of z is the same value (each step a function of its input): v + v is 2v, v - v is
        # 0 * v (both NaN where v is infinite).
        if op in ("add", "sub") and ca == cb:
            return ca + (("mul", 2.0 if op == "add" else 0.0, 0.0),)
        # v * f(v): gates with one step op
        for gate, step in (
            ((("sigmoid", 0.0, 0.0),), "silu"),
            ((("mish", 0.0, 0.0),), "mul_mish"),
            ((("add", 3.0, 0.0), ("div", 6.0, 0.0), ("clamp", 0.0, 1.0)), "hardswish"),
        ):
            if op == "mul" and (cb == ca + gate or ca == cb + gate):
                return min(ca, cb, key=len) + ((step, 0.0, 0.0),)
        if any(s[0] in ROW_OPS for s in ca + cb):
            raise _Unsupported  # a row reduced, pooled or normalized with anything but a number or itself
        residual = {"add": "add_z", "mul": "mul_z", "sub": "sub_z"}.get(op)
        if residual is not None and cb == () and ca:
            return ca + ((residual, 0.0, 0.0),)
        if residual in ("add_z", "mul_z") and ca == () and cb:
            return cb + ((residual, 0.0, 0.0),)
        raise _Unsupported

    # --- 0-d tensor constants: torch.min(v, torch.tensor(c)), torch.min(v, self.constant), v - self.constant ---

    def _scalar_source(self, node: torch.fx.Node) -> bool:
        """Record ``v.device`` / ``v.dtype`` (only ever passed on to ``torch.tensor``) and ``torch.tensor(c)`` with
        a Python number c and no dtype but fp32; True when ``node`` was one of them."""
        if node.op != "call_function":
            return False
        if node.target is getattr and len(node.args) == 2 and node.args[1] in ("device", "dtype"):
            self.meta.add(node)
            return True
        if (
            node.target is torch.tensor
            and len(node.args) == 1
            and _number(node.args[0])
            and set(node.kwargs) <= {"device", "dtype"}
            and node.kwargs.get("dtype") in (None, torch.float32)
            and all(
                v is None or v in self.meta or isinstance(v, (str, torch.device))
                for v in node.kwargs.values()
                if not isinstance(v, torch.dtype)
            )
        ):
            value = node.args[0]
            assert isinstance(value, (int, float))
            self.scalars[node] = float(value)
            return True
        return False

    def _scalar(self, arg: Any) -> float | None:
        """The value of a 0-d floating tensor: one made in the forward, or a 0-d attribute of the module (a
        constant fx lifted, ``torch.tensor(0.5)``, or a scalar ``nn.Parameter``) read as the module holds it now;
        None for anything else. A parameter's value is the module's at the probe: the numbers then check it."""
        if not isinstance(arg, torch.fx.Node):
            return None
        if arg in self.scalars:
            return self.scalars[arg]
        if arg.op != "get_attr":
            return None
        value: Any = self.traced
        for part in str(arg.target).split("."):
            value = getattr(value, part, None)
        if not isinstance(value, torch.Tensor) or value.dim() != 0 or not value.is_floating_point():
            return None
        return float(value.detach())

    def _minmax(self, key: Any, node: torch.fx.Node) -> tuple[Step, ...]:
        """``torch.min(v, c)`` / ``torch.minimum(v, c)`` with a 0-d constant c (either order): v clamped at c
        (``min`` caps from above, ``max`` from below)."""
        if len(node.args) != 2 or node.kwargs:
            raise _Unsupported
        a, b = node.args
        c, v = self._scalar(b), a
        if c is None:
            c, v = self._scalar(a), b
        if c is None:
            raise _Unsupported  # two tensors: no step
        op = "min" if key in (torch.min, "min", torch.minimum, "minimum") else "max"
        return self._chain(v) + ((op, c, 0.0),)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _module_step(module: nn.Module) -> Step:
    if isinstance(module, nn.ReLU):
        return ("relu", 0.0, 0.0)
    if isinstance(module, nn.LeakyReLU):
        return ("leaky_relu", float(module.negative_slope), 0.0)
    if isinstance(module, nn.GELU):
        return ("gelu_tanh" if module.approximate == "tanh" else "gelu", 0.0, 0.0)
    if isinstance(module, nn.Hardtanh):  # ReLU6 too
        return ("clamp", float(module.min_val), float(module.max_val))
    simple = {nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.SiLU: "silu", nn.Mish: "mish", nn.Hardswish: "hardswish"}
    for kind, op in simple.items():
        if isinstance(module, kind):
            return (op, 0.0, 0.0)
    raise _Unsupported


def _norm_step(module: nn.Module) -> Step | None:
    """A normalization over the features of the [M, N] output, for the tasks that own its statistics: a GroupNorm
    as ``("group_norm", groups, eps)``; a BatchNorm1d normalizing with the batch's statistics (training mode,
    as KernelBench runs it) as ``("batch_norm", eps, 0)``. Their affine parameters are the tasks' inputs (the
    chain families refuse these steps)."""
    if isinstance(module, nn.GroupNorm):
        return ("group_norm", float(module.num_groups), float(module.eps))
    if isinstance(module, nn.BatchNorm1d) and (module.training or not module.track_running_stats):
        return ("batch_norm", float(module.eps), 0.0)
    return None


def _one(value: Any) -> Any:
    """A 1-D pooling's hyperparameter: an int, or a 1-tuple of one."""
    return value[0] if isinstance(value, tuple) and len(value) == 1 else value


def _arg(node: torch.fx.Node, index: int, name: str, default: Any) -> Any:
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _function_step(key: Any, node: torch.fx.Node) -> Step:
    """A call with scalar arguments: LeakyReLU's slope, GELU's approximation, a clamp's bounds."""
    if key is F.leaky_relu:
        return ("leaky_relu", float(_arg(node, 1, "negative_slope", 0.01)), 0.0)
    if key is F.gelu:
        approximate = _arg(node, 1, "approximate", "none")
        return ("gelu_tanh" if approximate == "tanh" else "gelu", 0.0, 0.0)
    if key is F.hardtanh:
        return ("clamp", float(_arg(node, 1, "min_val", -1.0)), float(_arg(node, 2, "max_val", 1.0)))
    if key in (torch.clamp, "clamp", torch.clip, "clip"):
        lo, hi = _arg(node, 1, "min", None), _arg(node, 2, "max", None)
        if isinstance(lo, torch.fx.Node) or isinstance(hi, torch.fx.Node) or (lo is None and hi is None):
            raise _Unsupported
        if lo is None:
            return ("min", float(hi), 0.0)
        return ("max", float(lo), 0.0) if hi is None else ("clamp", float(lo), float(hi))
    raise _Unsupported
