"""Reshape adapters of the matcher (evaluator/judge/matching.py): a problem whose inputs are a task's inputs with
dimensions merged or split off as 1 (a 4-D tensor normalized over dim 1 is the task's [M, R, N] with
N = dim1 * dim2; a 2-D row reduction is [M, R, 1]; a LayerNorm over three trailing dims is [M, N] with
N = features * dim1 * dim2) or with their last two dimensions transposed (``A.T @ B`` is ``matmul`` of a
strided view); and a problem whose output is the mean or sum of everything a task returns (a loss averaged
over the per-row losses of ``cross_entropy``); and a problem that lacks an input the task takes, which the task
declares fillable (``FILL_INPUTS``: a Conv without bias is the conv task with a zero bias), created in ``launch`` as
a constant tensor sized from the inputs passed.

An :class:`Adapter` cuts each problem input's dimensions into contiguous groups, one per dimension of the
task's input (an empty group is a size of 1), and says how the task's output is viewed as the problem's:
each output dimension is a dimension of some input, or a literal size. Both the matcher's comparison and the
generated ``launch`` (:func:`launch_source`, appended to a template whose own entry point is renamed) apply
exactly the same views, so a match is the function the template computes: reshapes and views of contiguous
tensors only, no compute in host code. A reduction is computed by a kernel the adapter adds to the template
(:data:`REDUCE_KERNEL`: one program, fp32, a fixed order), launched on the template's result at every return.

Example (a template's ``launch(x, **params)`` adapted to a 4-D input normalized over dim 1)::

    >>> adapter = Adapter(groups=(((0, 1), (1, 2), (2, 4)),), out=((0, 0), (0, 1), (0, 2), (0, 3)))
    >>> print(adapted_template(template_source, adapter, 1))  # doctest: +SKIP
    def launch(x, **params):
        wf_shape0 = x.shape
        x = x.reshape(wf_shape0[0], wf_shape0[1], wf_shape0[2] * wf_shape0[3])
        ...
        return (y).view(wf_shape0[0], wf_shape0[1], wf_shape0[2], wf_shape0[3])
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

# The names the adapted launch keeps each problem input's shape under.
SHAPE_PREFIX = "wf_shape"
# The output rule's marker of a dimension of the task's own output (Adapter.out).
TASK_OUT = -2
OUT_NAME = "wf_out"
# The reductions of a task's whole output that the adapter applies (a loss's reduction over per-row losses).
REDUCTIONS = ("mean", "sum")
REDUCE_NAME = "_wf_reduce_all"
# One program folds the whole output into an fp32 [1024] accumulator, then sums it: deterministic, and for the
# 32768 per-row losses of a KernelBench cross-entropy 32 steps (microseconds against the loss kernel itself).
REDUCE_KERNEL = f"""

# Added by warpforge (evaluator/judge/match_adapters.py): the mean or sum of the task's output, as the problem returns.
@triton.jit
def {REDUCE_NAME}(x_ptr, y_ptr, n, div, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        idx = start + offs
        acc += tl.load(x_ptr + idx, mask=idx < n, other=0.0).to(tl.float32)
    tl.store(y_ptr, (tl.sum(acc, axis=0) / div).to(y_ptr.dtype.element_ty))
"""


@dataclass(frozen=True)
class Fill:
    """A task input the problem does not pass: a tensor of ``value`` whose dimensions are those of passed inputs."""

    index: int  # the task's argument position
    # per dimension: (a passed input, in task order among the passed, its dim), or (-1, 1) for a size of 1
    dims: tuple[tuple[int, int], ...]
    value: float
    # An integer input of the task (a BatchNorm's num_batches_tracked): int64, else the first input's dtype.
    integer: bool = False


def _fill_dim(names: Sequence[str], j: int, d: int) -> str:
    """One dimension of a filled input in the generated launch: a passed input's size, or a literal 1."""
    return f"{names[j]}.shape[{d}], " if j >= 0 else f"{d}, "


def _fill_value(f: Fill) -> str:
    return repr(int(f.value)) if f.integer else repr(f.value)


@dataclass(frozen=True)
class Adapter:
    """Per problem input (in the task's argument order): its dimension groups as (start, end) ranges; and the
    problem's output dimensions, each (input, dim) of the task-ordered inputs, (-1, literal size) or
    (:data:`TASK_OUT`, dim) of the task's own output (a size computed by the task, see :func:`unit_layouts`)."""

    groups: tuple[tuple[tuple[int, int], ...], ...]
    out: tuple[tuple[int, int], ...]
    # One of REDUCTIONS: the problem's output is that reduction of the task's whole output; "" for none.
    reduction: str = ""
    # Per input (task order), whether its last two dimensions are swapped after the reshape: a GEMM given A as
    # [K, M] (``A.T @ B``) is the task's [M, K] as a strided view, no copy; empty: none is.
    transposed: tuple[bool, ...] = ()
    # The task's inputs the problem does not pass, in ascending ``index``; ``groups`` covers the passed ones.
    filled: tuple[Fill, ...] = ()

    def inputs(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        shaped = [t.reshape(*[_prod(t.shape[a:b]) for a, b in g]) for t, g in zip(tensors, self.groups)]
        viewed = [t.transpose(-2, -1) if self.swaps(i) else t for i, t in enumerate(shaped)]
        for f in self.filled:
            size = tuple(int(viewed[j].shape[d]) if j >= 0 else d for j, d in f.dims)
            dtype = torch.int64 if f.integer else viewed[0].dtype
            viewed.insert(
                f.index, torch.full(size, int(f.value) if f.integer else f.value, dtype=dtype, device=viewed[0].device)
            )
        return viewed

    def swaps(self, i: int) -> bool:
        return i < len(self.transposed) and self.transposed[i]

    def group_of(self, i: int, j: int) -> tuple[int, int]:
        """The problem dims (start, end) that become dimension ``j`` of the task's input ``i``."""
        rank = len(self.groups[i])
        if self.swaps(i) and j >= rank - 2:
            j = 2 * rank - 3 - j  # the last two swapped
        return self.groups[i][j]

    def output(self, y: torch.Tensor, tensors: Sequence[torch.Tensor]) -> torch.Tensor:
        if self.reduction:
            y = y.sum() if self.reduction == "sum" else y.mean()
        return y.reshape(
            tuple(int(tensors[i].shape[d]) if i >= 0 else int(y.shape[d]) if i == TASK_OUT else d for i, d in self.out)
        )

    @property
    def reads_output(self) -> bool:
        """Whether some output size is one of the task's output sizes (the launch keeps its result to read it)."""
        return any(i == TASK_OUT for i, _ in self.out)

    @property
    def reshapes(self) -> bool:
        """Whether some input is cut other than one group per dimension (an adapter may only reduce)."""
        return any(a != j or b != j + 1 for g in self.groups for j, (a, b) in enumerate(g))

    def describe(self) -> str:
        def one(g: tuple[tuple[int, int], ...]) -> str:
            return "[" + ", ".join("*".join(f"d{d}" for d in range(a, b)) or "1" for a, b in g) + "]"

        parts = ["reshaped " + ", ".join(one(g) for g in self.groups)] if self.reshapes else []
        swapped = [str(i) for i in range(len(self.groups)) if self.swaps(i)]
        if swapped:
            parts.append(f"input{'s' if len(swapped) > 1 else ''} {', '.join(swapped)} transposed")
        if self.reduction:
            parts.append(f"the {self.reduction} of its output")
        parts += [f"input {f.index} filled with {f.value:g}" for f in self.filled]
        return ", ".join(parts)


def _prod(sizes: Sequence[int]) -> int:
    out = 1
    for s in sizes:
        out *= int(s)
    return out


def cuts(rank: int, parts: int) -> Iterator[tuple[tuple[int, int], ...]]:
    """Every way to cut dims 0..rank into ``parts`` contiguous groups, possibly empty, identity-like first."""
    for bounds in itertools.combinations_with_replacement(range(rank + 1), parts - 1):
        edges = (0, *bounds, rank)
        yield tuple((edges[i], edges[i + 1]) for i in range(parts))


def output_rule(out_shape: Sequence[int], tensors: Sequence[torch.Tensor]) -> tuple[tuple[int, int], ...] | None:
    """Each output size as a dimension of an input (found by its value, sizes being distinct primes), a 1 as
    a literal; None when a size is neither."""
    rule: list[tuple[int, int]] = []
    for size in out_shape:
        spot = next(((i, d) for i, t in enumerate(tensors) for d, s in enumerate(t.shape) if s == size), None)
        if spot is None and size != 1:
            return None
        rule.append(spot if spot is not None and size != 1 else (-1, 1))
    return tuple(rule)


def unit_layouts(
    out_shape: Sequence[int], tensors: Sequence[torch.Tensor], task_inputs: Sequence[torch.Tensor]
) -> list[tuple[tuple[tuple[int, int], ...], ...]]:
    """Where the output sizes are no input's (a pooling's output length): each input's dims as they are, in
    order, with unit dims inserted up to the task input's rank (a 1-D pooling's [N, C, L] as the task's
    [N, C, 1, 1, L]), one grouping per choice of places; :func:`unit_rule` then reads the output off the
    task's. Empty unless the output has the first input's rank, no input has more dims than the task's and
    some has fewer (the same ranks are the problem's inputs as they are, tried without an adapter)."""
    ranks = [(t.dim(), u.dim()) for t, u in zip(tensors, task_inputs)]
    if (
        not tensors
        or len(out_shape) != tensors[0].dim()
        or any(r > q for r, q in ranks)
        or all(r == q for r, q in ranks)
    ):
        return []
    per_input = []
    for t, u in zip(tensors, task_inputs):
        ways = []
        for places in itertools.combinations(range(u.dim()), t.dim()):
            starts = [sum(1 for p in places if p < j) for j in range(u.dim())]
            ways.append(tuple((s, s + 1) if j in places else (s, s) for j, s in enumerate(starts)))
        per_input.append(ways)
    return [tuple(groups) for groups in itertools.product(*per_input)]


def unit_rule(groups: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """The output rule of a :func:`unit_layouts` grouping: the problem's output dim d is the task output's dim
    that the first input's dim d became."""
    return tuple((TASK_OUT, j) for j, (a, b) in enumerate(groups) if b > a)


def adapted_template(text: str, adapter: Adapter, n_inputs: int) -> str | None:
    """The template with its ``launch`` viewing the problem's inputs as the task's on entry and its result as the
    problem's output on every return (the grammar allows allocation and launches in ``launch`` only, so the
    views go into it, not around it); None when its launch does not name its inputs one by one."""
    tree = ast.parse(text)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "launch"), None)
    if fn is None or fn.args.vararg is not None or len(fn.args.args) != n_inputs + len(adapter.filled) or not fn.body:
        return None
    every = [a.arg for a in fn.args.args]
    gone = {f.index for f in adapter.filled}
    names = [n for i, n in enumerate(every) if i not in gone]
    lines = text.splitlines(keepends=True)
    if gone:  # the signature loses the filled inputs; it must fit on its one line to be rewritten
        old = f"def launch({', '.join(every)}, **"
        if fn.args.defaults or not lines[fn.lineno - 1].startswith(old):
            return None
        lines[fn.lineno - 1] = lines[fn.lineno - 1].replace(old, f"def launch({', '.join(names)}, **", 1)
    first = fn.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(fn.body) > 1:
        first = fn.body[1]  # after a docstring
    indent = " " * first.col_offset
    shapes = [f"{SHAPE_PREFIX}{i}" for i in range(n_inputs)]

    def dims(i: int, a: int, b: int) -> str:
        return " * ".join(f"{shapes[i]}[{d}]" for d in range(a, b)) or "1"

    prologue = [f"{indent}# Added by warpforge (evaluator/judge/match_adapters.py): inputs as the task takes them.\n"]
    prologue += [f"{indent}{shapes[i]} = {n}.shape\n" for i, n in enumerate(names)]
    prologue += [
        f"{indent}{n} = {n}.reshape({', '.join(dims(i, a, b) for a, b in g)})\n"
        for i, (n, g) in enumerate(zip(names, adapter.groups))
    ]
    prologue += [f"{indent}{n} = {n}.transpose(-2, -1)\n" for i, n in enumerate(names) if adapter.swaps(i)]
    prologue += [
        f"{indent}{every[f.index]} = torch.full(({''.join(_fill_dim(names, j, d) for j, d in f.dims)}), "
        f"{_fill_value(f)}, dtype={'torch.int64' if f.integer else names[0] + '.dtype'}, "
        f"device={names[0]}.device)\n"
        for f in adapter.filled
    ]
    out = (
        ", ".join(
            f"{shapes[i]}[{d}]" if i >= 0 else f"{OUT_NAME}.shape[{d}]" if i == TASK_OUT else str(d)
            for i, d in adapter.out
        )
        or "()"
    )
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    if any(isinstance(n, (ast.FunctionDef, ast.Lambda)) for n in ast.walk(fn) if n is not fn):
        return None
    if adapter.reads_output and (adapter.reduction or OUT_NAME in text):
        return None
    if adapter.reduction and (REDUCE_NAME in text or "import triton.language as tl" not in text):
        return None
    for ret in sorted(returns, key=lambda r: r.lineno, reverse=True):
        value = ast.get_source_segment(text, ret.value) if ret.value is not None else None
        if value is None or ret.end_lineno is None:
            return None
        pad = " " * ret.col_offset
        if (adapter.reduction or adapter.reads_output) and lines[ret.lineno - 1][: ret.col_offset].strip():
            return None  # ``if c: return y`` on one line: the statements a reduction adds need lines of their own
        if adapter.reduction:
            lines[ret.lineno - 1 : ret.end_lineno] = _reduced_return(pad, value, adapter.reduction, out)
        elif adapter.reads_output:
            lines[ret.lineno - 1 : ret.end_lineno] = [
                f"{pad}{OUT_NAME} = ({value})\n",
                f"{pad}return {OUT_NAME}.view({out})\n",
            ]
        else:
            lines[ret.lineno - 1 : ret.end_lineno] = [f"{pad}return ({value}).view({out})\n"]
    lines[first.lineno - 1 : first.lineno - 1] = prologue
    text = "".join(lines)
    return text + REDUCE_KERNEL if adapter.reduction else text


def _reduced_return(pad: str, value: str, reduction: str, out: str) -> list[str]:
    """A return of the reduction of ``value`` (a tensor the template allocated): a scalar of its dtype written by
    :data:`REDUCE_KERNEL`, then viewed as the problem's output."""
    div = "wf_full.numel()" if reduction == "mean" else "1"
    return [
        f"{pad}wf_full = ({value})\n",
        f"{pad}wf_red = torch.empty((), dtype=wf_full.dtype, device=wf_full.device)\n",
        f"{pad}{REDUCE_NAME}[(1,)](wf_full, wf_red, wf_full.numel(), float({div}), BLOCK=1024, num_warps=4, "
        "num_stages=1)\n",
        f"{pad}return wf_red.view({out})\n",
    ]


def reordered_template(text: str, order: tuple[int, ...]) -> str | None:
    """The template with its ``launch`` taking the problem's argument order: the task's argument ``i`` is the
    problem's ``order[i]``, so the positional parameters are permuted in the signature and the body is left as
    it is (a KernelBench state_dict lists a module's own parameters before its children's: 76_Gemm_Add_ReLU
    passes ``x, bias, gemm.weight``). None when the signature does not fit on its one line."""
    tree = ast.parse(text)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "launch"), None)
    if fn is None or fn.args.vararg is not None or len(fn.args.args) != len(order) or fn.args.defaults:
        return None
    names = [a.arg for a in fn.args.args]
    lines = text.splitlines(keepends=True)
    old = f"def launch({', '.join(names)}, **"
    if not lines[fn.lineno - 1].startswith(old):
        return None
    moved = [""] * len(order)
    for i, j in enumerate(order):
        moved[j] = names[i]
    lines[fn.lineno - 1] = lines[fn.lineno - 1].replace(old, f"def launch({', '.join(moved)}, **", 1)
    return "".join(lines)
