"""The grammar's vocabulary (the names each production allows), its error, and the helpers every production
uses: parsing within the source limits, dotted names, the rewrite hints of refused idioms."""

from __future__ import annotations

import ast
import functools
from typing import Protocol

from warpforge.evaluator.static.vocab import StaticFinding
from warpforge.kernels import source_limits as limits

IMPORTS = {("torch", None), ("triton", None), ("math", None), ("triton.language", "tl"), ("torch.nn", "nn")}
FUTURE = {"annotations"}
DTYPES = {
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool",
    "float8e4nv",
    "float8e5",
    "float8_e4m3fn",
    "float8_e5m2",
    "uint16",
    "uint32",
    "uint64",
}
ALLOC_CALLS = {
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "full",
    "full_like",
    "ones",
    "ones_like",
    "finfo",
    "iinfo",
    "Size",
    "promote_types",
}
TORCH_VALUES = DTYPES  # never a class or function: a value of the host grammar is never callable
TRITON_CALLS = {"cdiv", "next_power_of_2"}
MATH_CALLS = {"ceil", "floor", "sqrt", "log2", "log", "exp", "isqrt", "gcd", "lcm", "prod"}
MATH_VALUES = {"inf", "pi", "e"}
HOST_BUILTINS = {"int", "float", "bool", "min", "max", "abs", "len", "range", "tuple", "divmod"}
HOST_ERRORS = {"ValueError", "RuntimeError", "AssertionError", "TypeError", "NotImplementedError"}
# Tensor methods host code may call: shapes, strides, views, fresh allocations. Nothing that computes
# values, reads them on the host, casts, or reaches hooks.
TENSOR_METHODS = {
    "stride",
    "size",
    "dim",
    "numel",
    "contiguous",
    "view",
    "reshape",
    "is_contiguous",
    "element_size",
    "new_empty",
    "new_zeros",
    "new_full",
    "new_ones",
    "flatten",
    "unsqueeze",
    "squeeze",
    "t",
    "transpose",
    "permute",
    "expand",
    "view_as",
    "unflatten",
    "is_floating_point",
    "get",
}  # get: the params dict
TENSOR_ATTRS = {"shape", "dtype", "device", "ndim", "is_cuda", "itemsize"}
# Tensor methods whose result is a tensor (a view or a fresh allocation); the others return shape values.
TENSOR_RESULTS = {
    "contiguous",
    "view",
    "reshape",
    "new_empty",
    "new_zeros",
    "new_full",
    "new_ones",
    "flatten",
    "unsqueeze",
    "squeeze",
    "t",
    "transpose",
    "permute",
    "expand",
    "view_as",
    "unflatten",
}
# Tensor methods whose result is a shape value (an int, a bool, a tuple of ints).
SHAPE_RESULTS = {"stride", "size", "dim", "numel", "is_contiguous", "element_size", "is_floating_point"}
# Arguments that may be tensors: the template of torch.*_like and of x.view_as (everything else a call
# takes is a shape value: a tensor there is read on the host through __index__/__float__/iteration).
TEMPLATE_ARG = {"empty_like", "zeros_like", "ones_like", "full_like", "view_as"}
TENSOR_ALLOC = {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "full", "full_like", "ones", "ones_like"}
HOST_READS = {"numpy", "tolist", "item", "cpu", "untyped_storage", "storage", "__array__", "__dlpack__", "data_ptr"}
FORBIDDEN_NAMES = {"__builtins__", "__import__", "__loader__", "__spec__", "__dict__"}
DYNAMIC_CALLS = {
    "getattr",
    "setattr",
    "delattr",
    "eval",
    "exec",
    "compile",
    "globals",
    "locals",
    "vars",
    "open",
    "breakpoint",
    "input",
    "memoryview",
    "__import__",
    "type",
    "object",
    "super",
    "id",
    "hasattr",
}
JIT_BUILTINS = {
    "range",
    "min",
    "max",
    "abs",
    "len",
    "int",
    "float",
    "bool",
    "isinstance",
    "print",
    "True",
    "False",
    "None",
}
JIT_MODULES = {"tl", "triton", "math"}
JIT_BANNED_ATTRS = {"handle", "data"}
# Attributes a kernel reads on a value (a tl.tensor, dtype, pointer/block type or constexpr) that are set per
# instance; the class-level ones are read from Triton (jit_value_attrs). A local is never a Triton object
# with hooks or caches: `tl.constexpr(tl.sum).value.cache` reached a library JITFunction's cache.
JIT_INSTANCE_ATTRS = {
    "shape",
    "type",
    "dtype",
    "numel",
    "value",
    "name",
    "element_ty",
    "primitive_bitwidth",
    "int_bitwidth",
    "int_signedness",
    "fp_mantissa_width",
    "exponent_bias",
    "address_space",
    "const",
    "scalar",
    "itemsize",
}
JIT_CODEGEN_ATTRS = {"to_ir", "mangle", "codegen_name", "cache_key_part"}  # the compiler's, with a builder
# Comprehensions, walrus, starred, dict/set displays, match, del: Python-only code Triton's compiler
# refuses and the interpreter runs as Python.
JIT_BANNED_NODES = (
    ast.Import,
    ast.ImportFrom,
    ast.Global,
    ast.Nonlocal,
    ast.Lambda,
    ast.Try,
    ast.With,
    ast.ClassDef,
    ast.AsyncFunctionDef,
    ast.Await,
    ast.Yield,
    ast.YieldFrom,
    ast.FunctionDef,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.NamedExpr,
    ast.Starred,
    ast.Dict,
    ast.Set,
    ast.Match,
    ast.Delete,
)
JIT_OPTIONS = {"do_not_specialize", "do_not_specialize_on_alignment", "debug", "noinline"}
# The modules a jit body may name a member of (``tl.load``, ``tl.math.exp``, ``math.pi``). Every other module
# reached through an attribute is refused: ``tl.core`` is a module whose ``builtins`` attribute is Python's
# (``tl.core.builtins.exec`` ran arbitrary Python under the interpreter), ``tl.core.knobs`` flips Triton's
# settings.
# The host functions the harness calls with the task's inputs (docs/design.md §3.2): ``launch`` (inference),
# and a training variant's ``launch_forward(*inputs, **params) -> (out, saved)`` and
# ``launch_backward(grad_out, saved, *inputs, **params) -> grads``. Their positional parameters are tensors
# (``saved`` is a tuple of them: unpacked or indexed, its items are tensors), and only they allocate and launch.
LAUNCHERS = frozenset({"launch", "launch_forward", "launch_backward"})
# libdevice, as users import it: the module (``from triton.language.extra import libdevice``) or its functions
# (``from triton.language.extra.libdevice import rsqrt``); the interpreter child runs them (child/libdevice.py).
LIBDEVICE_PARENTS = {"triton.language.extra", "triton.language.extra.cuda"}
LIBDEVICE = {"triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice"}
# Functions of the kernel namespaces that are no alias target: they take or make callables and hooks.
ALIAS_REFUSED = {"triton.language.constexpr"}
# Annotations beyond the builtin names: Triton's value types (a jit helper's ``-> tl.tensor``).
ANNOTATION_TYPES = {
    "triton.language.constexpr",
    "triton.language.tensor",
    "triton.language.dtype",
    "triton.language.tuple",
}
JIT_NAMESPACES = {
    "triton.language",
    "triton.language.math",
    "triton.language.extra",
    "triton.language.extra.cuda",
    "triton.language.extra.cuda.libdevice",
    "triton.language.extra.libdevice",
    "math",
}


class GrammarError(Exception):
    """Raised inside the walk; carries the finding."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.finding = StaticFinding(reason, message)


def refuse(reason: str, message: str) -> GrammarError:
    return GrammarError(reason, message)


def check_source_text(source: str, cookie: bool = True) -> None:
    """[source_encoding] and [source_too_large] (kernels/source_limits.py), as a GrammarError."""
    try:
        limits.check_source_text(source, cookie)
    except limits.SourceRefused as err:
        raise refuse(err.reason, str(err)) from None


def parse_limited(source: str, cookie: bool = True) -> ast.Module:
    """Parse within the limits (kernels/source_limits.py); every failure is a GrammarError."""
    try:
        return limits.parse_limited(source, cookie)
    except limits.SourceRefused as err:
        raise refuse(err.reason, str(err)) from None


# The allowed rewrite of the Triton idioms users and LLMs write most, said with the refusal (the rule is unchanged).
_AUTOTUNE = (
    "; rewrite: @triton.autotune(configs=[triton.Config({'BLOCK': 128}, num_warps=4, num_stages=2), ...], "
    "key=['n']) directly above @triton.jit (the trusted side chooses among the configurations; no hooks, "
    "prune_configs_by or reset_to_zero), or put the values in the variant's SPACE (e.g. SPACE = "
    "{'BLOCK': [128, 256], 'num_warps': [4, 8]}) and pass them from launch as tl.constexpr arguments"
)
_HEURISTICS = (
    "; rewrite: @triton.heuristics({'EVEN_N': lambda args: args['N'] % args['BLOCK_N'] == 0}) "
    "between @triton.autotune and @triton.jit (each lambda one expression on args['NAME']), or compute "
    "the value in launch on the host and pass it as a tl.constexpr argument"
)
_REWRITES = {
    "autotune": _AUTOTUNE,
    "autotuner": _AUTOTUNE,
    "Autotuner": _AUTOTUNE,
    "Config": _AUTOTUNE,
    "heuristics": _HEURISTICS,
    "Heuristics": _HEURISTICS,
}


def rewrite_hint(*names: str | None) -> str:
    """The rewrite hint for the first of ``names`` (dotted, judged by the last part) that is a refused idiom."""
    for name in names:
        hint = _REWRITES.get((name or "").rpartition(".")[2])
        if hint:
            return hint
    return ""


def dotted_name(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def is_module(dotted: str) -> bool:
    """Whether ``dotted`` (a canonical name under a JIT_NAMESPACES module) is a module; imports only the
    trusted namespaces themselves, looks members up with getattr (the name has no ``_``: private_access)."""
    import importlib
    import types

    namespace, _, attr = dotted.rpartition(".")
    try:
        value = getattr(importlib.import_module(namespace), attr, None)
    except ImportError:
        return True  # a namespace that does not import is no namespace of a kernel
    return isinstance(value, types.ModuleType)


@functools.cache
def jit_value_attrs() -> frozenset[str]:
    """JIT_INSTANCE_ATTRS and the public class attributes of Triton's value types, minus codegen's."""
    import triton.language as tl

    classes = (tl.tensor, tl.dtype, tl.constexpr, tl.pointer_type, tl.block_type, tl.tuple)
    return frozenset(
        JIT_INSTANCE_ATTRS | {a for c in classes for a in dir(c) if not a.startswith("_")} - JIT_CODEGEN_ATTRS
    )


def is_callable(dotted: str) -> bool:
    """Whether ``dotted`` (a member of a JIT_NAMESPACES module, not itself a module) is a function or a class."""
    import importlib

    namespace, _, attr = dotted.rpartition(".")
    try:
        return callable(getattr(importlib.import_module(namespace), attr, None))
    except ImportError:
        return True


class GrammarView(Protocol):
    """What the host, idiom and ModelNew checks read of one module's check (kernels.Grammar): its names and their
    kinds, each kernel's parameters, and name resolution."""

    tree: ast.Module
    modules: dict[str, str]
    constants: set[str]
    mutable: set[str]
    jit: set[str]
    host: set[str]
    aliases: dict[str, str]
    jit_params: dict[str, tuple[list[str], set[str]]]

    def canonical(self, node: ast.AST) -> str: ...

    def space_keys(self) -> set[str]: ...

    def is_constexpr(self, node: ast.AST) -> bool: ...

    def signature(self, fn: ast.FunctionDef) -> None: ...
