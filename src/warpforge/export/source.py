"""Source facts the package writer needs, read from a task and its winning variant without running them.

- :func:`wrap_launches` rewrites a variant's launcher so every ``kernel[grid](...)`` of a ``@triton.jit``
  function becomes ``wrap_triton(kernel)[grid](...)``: ``torch.library.triton_op`` needs that to trace the
  kernels for ``torch.compile``/``torch.export``. Only the kernel names change; comments and layout stay,
  so a reviewer reads the variant as it was searched.
- :func:`check_standalone` refuses a source that imports warpforge (the package must run without it).
- :func:`op_signature` names the op's inputs and outputs from the task's ``reference`` and one set of
  inputs made on a correctness shape (tensor or scalar, how many outputs).
- :func:`shape_map` finds, for each named shape dimension, the input tensor dimension that carries it
  (``M`` = ``x.shape[0]``), so the package can key its tuned-config table by the shape of a call.

Example::

    >>> src = "import triton\\n@triton.jit\\ndef k(x): pass\\ndef launch(x):\\n    k[(1,)](x)\\n"
    >>> "wrap_triton(k)[(1,)](x)" in wrap_launches(src)
    True
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass

import torch

from warpforge.errors import UsageError
from warpforge.kernels.taskdef import Task, dtype_name


class SourceError(UsageError):
    """A task or variant cannot be exported as it is written; the message says what to change."""


def _jit_functions(tree: ast.Module) -> set[str]:
    """Module-level functions decorated with ``triton.jit`` / ``triton.autotune`` / ``triton.heuristics``."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                text = ast.unparse(target)
                if text in {"triton.jit", "jit"} or text.startswith(("triton.autotune", "triton.heuristics")):
                    names.add(node.name)
    return names


def wrap_launches(source: str) -> str:
    """The variant source with each launch of a module-level Triton kernel wrapped in ``wrap_triton``."""
    tree = ast.parse(source)
    kernels = _jit_functions(tree)
    if not kernels:
        raise SourceError("the winning variant defines no @triton.jit kernel: nothing to export")
    edits: list[tuple[int, int, int, str]] = []  # (line, start col, end col, replacement)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Subscript)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in kernels
        ):
            name = node.func.value
            edits.append((name.lineno, name.col_offset, name.end_col_offset or 0, f"wrap_triton({name.id})"))
    if not edits:
        raise SourceError(
            "the winning variant never launches its kernels as kernel[grid](...): wrap_triton "
            "needs that form; rewrite the launcher"
        )
    lines = source.splitlines(keepends=True)
    # Later edits first, so earlier columns stay valid (col offsets are UTF-8 byte offsets: the sources are
    # ASCII in practice; a non-ASCII line is edited on its encoded bytes to stay exact).
    for lineno, start, end, text in sorted(edits, reverse=True):
        raw = lines[lineno - 1].encode()
        lines[lineno - 1] = (raw[:start] + text.encode() + raw[end:]).decode()
    out = "".join(lines)
    return _add_import(out)


def _add_import(source: str) -> str:
    """Insert ``from torch.library import wrap_triton`` after the module's last top-level import."""
    tree = ast.parse(source)
    last = 0
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            last = node.end_lineno or node.lineno
    lines = source.splitlines(keepends=True)
    lines.insert(last, "from torch.library import wrap_triton\n")
    return "".join(lines)


def check_standalone(source: str, what: str) -> None:
    """Refuse a source that imports warpforge: the exported package must run with torch and triton only."""
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        if any(n == "warpforge" or n.startswith("warpforge.") for n in names):
            line = getattr(node, "lineno", 0)
            raise SourceError(
                f"{what} imports {', '.join(names)} (line {line}); the exported package must run "
                "without warpforge: inline what it uses"
            )


@dataclass(frozen=True)
class OpSignature:
    """The op's Python signature: input names and kinds (tensor | int | float | bool), output count."""

    inputs: tuple[tuple[str, str], ...]
    outputs: int  # 1: returns a Tensor; n > 1: a tuple of n Tensors

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.inputs)

    def annotated(self) -> str:
        kinds = {"tensor": "torch.Tensor", "int": "int", "float": "float", "bool": "bool"}
        return ", ".join(f"{n}: {kinds[k]}" for n, k in self.inputs)

    def returns(self) -> str:
        if self.outputs == 1:
            return "torch.Tensor"
        return "tuple[" + ", ".join(["torch.Tensor"] * self.outputs) + "]"


def _kind(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return "tensor"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    raise SourceError(
        f"an input of type {type(value).__name__} cannot be an op argument: inputs must be "
        "tensors or int/float/bool scalars"
    )


def op_signature(task: Task) -> OpSignature:
    """Input names from ``reference``'s parameters, kinds from one set of inputs on a correctness shape."""
    params = [
        p
        for p in inspect.signature(task.reference).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    shape = (task.check_shapes or task.shapes)[0]
    inputs = task.make_inputs(shape, task.dtypes[0], 0, "cpu")
    if len(params) > len(inputs) and all(p.default is not p.empty for p in params[len(inputs) :]):
        # Trailing parameters with defaults that the judge never passes (attention's ``causal=True``): the op
        # is what was checked, the reference with its defaults.
        params = params[: len(inputs)]
    if len(params) != len(inputs):
        raise SourceError(
            f"task {task.name}: reference takes {len(params)} positional arguments but make_inputs "
            f"returns {len(inputs)}: name every input in reference's signature"
        )
    out = task.reference(*inputs)
    outputs = len(out) if isinstance(out, (tuple, list)) else 1
    return OpSignature(tuple((p.name, _kind(v)) for p, v in zip(params, inputs)), outputs)


def shape_map(task: Task) -> dict[str, tuple[int, int, int]]:
    """For each shape name, ``(input index, dim index, rank)`` of a tensor dimension that always equals it
    (``(-1, value, -1)`` for a key that is the same constant in every task shape and no tensor dimension).

    Checked over every correctness and small shape (the boundary sizes are primes and 1, so a dimension
    that equals ``M`` only by chance is ruled out); benchmark shapes too where they are small. Inputs are
    made on the CPU, so small and benchmark shapes above 2**20 elements are left out (make_inputs draws them
    in memory first: 8192x128256 fp32 logits would be 4 GiB). Correctness shapes always count: the judge ran
    them in the interpreter, so their inputs are small, and the product of a shape's values overstates its
    elements where keys repeat sizes (a PyTorch-module problem's shape holds both its globals and the matched
    task's keys made of them, export/bypath.py).
    """
    shapes = task.check_shapes + [s for s in task.small_shapes + task.shapes if _elements(s) <= 1 << 20]
    names = sorted({k for s in task.shapes + task.check_shapes for k in s})
    candidates: dict[str, set[tuple[int, int, int]]] | None = None
    for shape in shapes:
        inputs = task.make_inputs(shape, task.dtypes[0], 0, "cpu")
        found: dict[str, set[tuple[int, int, int]]] = {n: set() for n in names}
        for i, t in enumerate(inputs):
            if isinstance(t, torch.Tensor):
                for d, size in enumerate(t.shape):
                    for n in names:
                        if shape.get(n) == size:
                            found[n].add((i, d, t.dim()))
        candidates = found if candidates is None else {n: candidates[n] & found[n] for n in names}
    if candidates is None:
        raise SourceError(
            f"task {task.name}: no correctness shape small enough to read the input layout from; add CHECK_SHAPES"
        )
    # A key with one value over every task shape that no tensor carries (attention's CAUSAL = 1) is a constant
    # of the op: (-1, value, -1).
    for n in names:
        values = {s.get(n) for s in task.shapes + task.check_shapes + task.small_shapes}
        value = values.pop() if len(values) == 1 else None
        if not candidates[n] and value is not None:
            candidates[n] = {(-1, int(value), -1)}
    missing = [n for n in names if not candidates[n]]
    if missing:
        raise SourceError(
            f"task {task.name}: shape dimension(s) {', '.join(missing)} are not a dimension of any "
            "input tensor; the exported op cannot key its tuned configs by them"
        )
    return {n: min(candidates[n]) for n in names}


def _elements(shape: dict[str, int]) -> int:
    n = 1
    for v in shape.values():
        n *= int(v)
    return n


def effective_tolerances(task: Task) -> dict[str, tuple[float, float]]:
    """(atol, rtol) per dtype name as warpforge checked it, so the package's tests judge alike."""
    return {dtype_name(d): task.tolerance(d) for d in task.dtypes}


def self_check_tolerances(task: Task) -> dict[str, tuple[float, float]]:
    """(atol, rtol) for an op's first-use check: the task's dtypes and the three a caller may bring besides."""
    dtypes = sorted({*task.dtypes, torch.float16, torch.bfloat16, torch.float32}, key=dtype_name)
    return {dtype_name(d): task.tolerance(d) for d in dtypes}


@dataclass(frozen=True)
class TrainingFacts:
    """How an op trains: the inputs it differentiates and how many tensors ``launch_forward`` saves."""

    grad_inputs: tuple[int, ...]
    n_saved: int


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _saved_count(fn: ast.FunctionDef) -> int:
    """How many tensors ``launch_forward`` saves, read from its ``return out, (a, b)`` statements."""
    counts = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Return):
            value = node.value
            if not (
                isinstance(value, ast.Tuple)
                and len(value.elts) == 2
                and isinstance(value.elts[1], ast.Tuple)
                and not any(isinstance(e, ast.Starred) for e in value.elts[1].elts)
            ):
                raise SourceError(
                    f"line {node.lineno}: launch_forward must return (out, (saved, ...)) with the saved "
                    "tensors written as a tuple, e.g. `return y, (rstd,)` or `return y, ()`: export "
                    "reads from it how many tensors the forward op returns"
                )
            counts.add(len(value.elts[1].elts))
    if len(counts) != 1:
        raise SourceError(
            "launch_forward must return the same number of saved tensors on every path "
            f"(found {sorted(counts) or 'no return'})"
        )
    return counts.pop()


def training_facts(task: Task, variant_source: str) -> TrainingFacts | None:
    """The op's training facts when the task defines gradients and the variant a backward, else ``None``."""
    fns = _functions(ast.parse(variant_source))
    if not task.has_backward or "launch_forward" not in fns or "launch_backward" not in fns:
        return None
    kinds = dict(op_signature(task).inputs)
    names = op_signature(task).names
    for i in task.grad_inputs:
        if i >= len(names) or kinds[names[i]] != "tensor":
            raise SourceError(f"task {task.name}: GRAD_INPUTS entry {i} is not a tensor input of reference()")
    return TrainingFacts(tuple(task.grad_inputs), _saved_count(fns["launch_forward"]))


def effective_grad_tolerances(task: Task) -> dict[str, tuple[float, float]]:
    """(atol, rtol) per dtype name for gradients as the task states them (its own, else the forward's)."""
    return {dtype_name(d): task.grad_tolerance(d) for d in task.dtypes} if task.has_backward else {}
