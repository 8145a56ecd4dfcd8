"""The trusted launcher's typing of kernel arguments (runs in the child, before the candidate is imported).

Under ``TRITON_INTERPRET`` a ``tl.constexpr`` parameter receives the launch argument itself and any other
argument that is not a tensor, int or bool reaches the kernel untouched (``_implicit_cvt`` in
triton/runtime/interpreter.py returns it as is): a torch tensor passed as a constexpr is a torch tensor inside
the kernel, and ``T.max()`` / ``T.exp()`` make torch compute the answer. The compiler never lets that happen
(a constexpr is a Python scalar, a dtype or a string; every other argument is a pointer or a scalar register),
so every launch is typed here as the compiler types it:

- a constexpr is int, float, bool, None, str or a Triton dtype (rule ``constexpr_tensor`` for a tensor,
  ``kernel_argument_type`` for anything else);
- any other argument is a tensor (a pointer), int, float, bool, None or a tuple of those
  (``kernel_argument_type``);
- a Python float becomes fp32, as the compiled kernel's ``.param .f32`` is (grid.py converts it).

Each launch's *specialization* (kernel source hash, constexpr values, argument kinds and dtypes, num_warps,
num_stages) is a fact the child reports; the trusted side checks that every specialization the interpreter
ran was also compiled for the target (stages.spec_stage). The same function types the ahead-of-time compile
child's captured launches, so both sides name a specialization by the same key.

Example::

    >>> spec = {"kernel": "k", "hash": "ab", "args": [["x", "ptr", "torch.float32"], ["B", "constexpr", 64]],
    ...         "options": {"num_warps": 4, "num_stages": 3}}
    >>> spec_key(spec)
    '["ab", [["x", "ptr", "torch.float32"], ["B", "constexpr", 64]], {"num_stages": 3, "num_warps": 4}]'
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import torch

# Triton's own launch defaults for NVIDIA (backends/nvidia/compiler.py CUDAOptions, Triton 3.4-3.9).
DEFAULT_OPTIONS = {"num_warps": 4, "num_stages": 3}
OPTION_NAMES = ("num_warps", "num_stages", "num_ctas", "maxnreg")
MAX_ARG_DEPTH = 4  # tuples of tuples of ... : deeper nesting is no kernel signature anyone writes


class ArgumentRefused(TypeError):
    """A kernel argument the compiled kernel could not receive; ``rule`` names the verdict's reason."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


def _is_constexpr_annotation(annotation: Any) -> bool:
    import triton.language as tl

    if annotation is tl.constexpr:
        return True
    # a string annotation under `from __future__ import annotations` may carry its own quotes: "'tl.constexpr'"
    return isinstance(annotation, str) and annotation.replace(" ", "").strip("'\"").split(".")[-1] == "constexpr"


def python_function(kernel: Any) -> Any:
    """The plain function under a JITFunction, InterpretedFunction, autotuner or heuristics wrapper."""
    import types

    fn = kernel
    for _ in range(8):
        if isinstance(fn, types.FunctionType) or not hasattr(fn, "fn"):
            break
        fn = fn.fn
    return fn


def _dtype_name(value: Any) -> str | None:
    import triton.language as tl

    if isinstance(value, tl.dtype):
        return str(value)
    return None


def _constexpr_value(name: str, value: Any) -> Any:
    import triton.language as tl

    if isinstance(value, tl.constexpr):
        value = value.value
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    dtype = _dtype_name(value)
    if dtype is not None:
        return {"dtype": dtype}
    if isinstance(value, torch.Tensor):
        raise ArgumentRefused(
            "constexpr_tensor",
            f"the tensor passed as {name} (a tl.constexpr parameter): under "
            "the interpreter it would reach the kernel as a torch tensor and torch would compute "
            "with it; a tensor goes to a pointer parameter (no tl.constexpr annotation)",
        )
    raise ArgumentRefused(
        "kernel_argument_type",
        f"{name} (a tl.constexpr parameter) received a "
        f"{type(value).__name__}: a constexpr is an int, float, bool, None, str or Triton dtype",
    )


def _int_kind(value: int) -> str:
    # triton.runtime.jit.mangle_type, the compiled kernel's parameter type (Triton 3.4-3.9)
    if -(2**31) <= value < 2**31:
        return "i32"
    if 2**31 <= value < 2**32:
        return "u32"
    if -(2**63) <= value < 2**63:
        return "i64"
    return "u64"


def _arg_kind(name: str, value: Any, depth: int = 0) -> list[Any]:
    if isinstance(value, bool):
        return ["i1"]
    if isinstance(value, int):
        return [_int_kind(value)]
    if isinstance(value, float):
        return ["fp32"]
    if value is None:
        return ["none"]
    if isinstance(value, torch.Tensor):
        return ["ptr", str(value.dtype)]
    base = getattr(value, "base", None)  # triton.reinterpret's TensorWrapper: a tensor viewed as another dtype
    if type(value).__name__ == "TensorWrapper" and isinstance(base, torch.Tensor):
        return ["ptr", f"{base.dtype} as {getattr(value, 'dtype', '?')}"]
    if isinstance(value, tuple) and depth < MAX_ARG_DEPTH:
        return ["tuple", [_arg_kind(name, v, depth + 1) for v in value]]
    raise ArgumentRefused(
        "kernel_argument_type",
        f"{name} received a {type(value).__name__}: a kernel argument is "
        "a tensor (pointer), int, float, bool, None or a tuple of those",
    )


def constexpr_names(kernel: Any) -> set[str]:
    fn = python_function(kernel)
    params = getattr(kernel, "params", None)
    names = {p.name for p in params if getattr(p, "is_constexpr", False)} if params else set()
    try:
        annotations = inspect.get_annotations(fn)
    except (TypeError, ValueError):
        annotations = getattr(fn, "__annotations__", {}) or {}
    return names | {n for n, a in annotations.items() if _is_constexpr_annotation(a)}


def specialization(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any], source_hash: str) -> dict[str, Any]:
    """Type one launch's arguments (raising :class:`ArgumentRefused`) and name its specialization."""
    fn = python_function(kernel)
    signature = inspect.signature(fn)
    params = [p for p in signature.parameters.values()]
    names = {p.name for p in params}
    given = {k: v for k, v in kwargs.items() if k in names}
    try:
        bound = signature.bind(*args, **given)
    except TypeError as exc:
        raise ArgumentRefused("kernel_argument_type", f"{getattr(fn, '__name__', 'kernel')}: {exc}") from None
    bound.apply_defaults()
    constexprs = constexpr_names(kernel)
    out = []
    for name, value in bound.arguments.items():
        if name in constexprs:
            out.append([name, "constexpr", _constexpr_value(name, value)])
        else:
            out.append([name, *_arg_kind(name, value)])
    options = {k: kwargs.get(k, DEFAULT_OPTIONS.get(k)) for k in OPTION_NAMES if k in kwargs or k in DEFAULT_OPTIONS}
    for k, v in options.items():
        if not isinstance(v, int) or isinstance(v, bool):
            raise ArgumentRefused("kernel_argument_type", f"{k}={v!r}: launch options are ints")
    return {"kernel": getattr(fn, "__name__", "kernel"), "hash": source_hash, "args": out, "options": options}


def spec_key(spec: dict[str, Any]) -> str:
    """What the compile and check children both report for a specialization (JSON: hashable, comparable)."""
    return json.dumps([spec["hash"], spec["args"], dict(sorted(spec["options"].items()))])


def rebuild_arguments(spec: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Arguments that specialize a kernel as ``spec`` does, for the compile child (tensors are fake: call this
    under ``FakeTensorMode``). Scalars take a representative value of their kind; constexprs their own."""
    import triton.language as tl

    def value(kind: list[Any]) -> Any:
        tag = kind[0]
        if tag == "ptr":
            import triton

            base, _, view = str(kind[1]).partition(" as ")
            tensor = torch.empty(64, dtype=getattr(torch, base.removeprefix("torch.")))
            return triton.reinterpret(tensor, tl.dtype(view)) if view else tensor
        if tag == "tuple":
            return tuple(value(k) for k in kind[1])
        return {
            "i1": True,
            "i32": 17,
            "u32": 2**31 + 17,
            "i64": 2**40 + 17,
            "u64": 2**63 + 17,
            "fp32": 1.5,
            "none": None,
        }[tag]

    args: list[Any] = []
    for entry in spec["args"]:
        if entry[1] == "constexpr":
            v = entry[2]
            args.append(tl.dtype(v["dtype"]) if isinstance(v, dict) else v)
        else:
            args.append(value(entry[1:]))
    # A kernel parameter named like a launch option (the fused-softmax tutorial's ``num_stages``) is bound by
    # position above; the option then keeps its default, as at the launch (one value per name)
    names = {entry[0] for entry in spec["args"]}
    return args, {k: v for k, v in spec["options"].items() if k not in names}
