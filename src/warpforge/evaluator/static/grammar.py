"""The variant grammar: what a variant module may contain, as an allowlist checked on its exact bytes.

Checked in the trusted process on the AST only, before any of the candidate's code runs (its
``constraints()`` included). Whatever the productions below do not name is refused; the finding's
``reason`` is the name of the rule (production) that was broken, in brackets below.

Source (checked first, on the text that will be written and imported)::

    [source_encoding]  the bytes are UTF-8 (strict) and any coding cookie on line 1 or 2 says utf-8
                       (a ``# coding: utf-7`` file would be checked as one text and run as another)
    [source_too_large] at most MAX_BYTES bytes and MAX_LINES lines, measured before parsing
    [syntax_error]     it parses (SyntaxError, NUL bytes, parser recursion or memory errors are a verdict)
    [source_too_deep]  AST depth <= MAX_DEPTH and at most MAX_NODES nodes (counted without recursion)

Module::

    module      := docstring? stmt*
    stmt        := import | constant | function | string-expression                     [module_statement]
    import      := "import torch" | "import triton" | "import math"
                 | "import triton.language as tl" | "from __future__ import annotations"   [forbidden_import]
                   (no other module, no other alias: an alias of torch is how ``sys`` was reached) [module_alias]
    constant    := NAME "=" literal                                                       [module_constant]
    literal     := number | string | bool | None | tuple/list/set/dict of literals
                 | unary/binary arithmetic on literals and earlier constants
                 | a dtype name (torch.float16, tl.float32, ...)
    space       := "SPACE" "=" { STR: [value, ...], ... }: distinct ASCII identifier keys, non-empty
                   lists of int | float | bool | str | None literals (finite, 64-bit, no control
                   characters), typed from the tree (kernels/space_values.py)           [space_value]
                   at most 100,000 configurations (the product of the list lengths)      [space_too_large]
    function    := "@triton.jit" def NAME(args): jit-body                                 [decorator]
                 | def (launch | launch_forward | launch_backward | constraints | NAME)(args): host-body
                   (defaults are literals; no decorators other than ``@triton.jit``, no annotations that are
                   not a name or a dotted tl/triton/torch name)
    class       := ONE ``class ModelNew(nn.Module)``: KernelBench's answer format, its productions in
                   the ModelNew section below (``__init__`` builds parameters; ``forward`` is host code like
                   ``launch``)              [model_new_class] [model_new_init] [torch_compute_call]
    every module-level name is bound once (a jit helper rebound below its definition ran as
    Python in the interpreter while the compiled helper was another)                   [rebinding]

Host code (``launch``, ``constraints``, plain helpers)::

    host-stmt   := NAME-target "=" expr | NAME op= expr | return expr? | if/elif/else | for NAME(s) in expr
                 | assert expr (, message)? | raise BuiltinError(message) | kernel-launch | pass/break/continue
                 | string-expression                                                      [host_statement]
    kernel-launch := JIT_NAME "[" grid "]" "(" value-args ")"                              [kernel_use]
    value-args  := a tensor only for a pointer parameter (no tl.constexpr)                [constexpr_tensor]
                   each argument by position or name, none a list, dict or set             [kernel_argument]
    grid        := a tuple of arithmetic expressions, or a local bound to one (values are never callables:
                   see below)
    expr        := literal | NAME (a parameter or a local) | module constant | arithmetic | comparison
                 | boolean | conditional | tuple/list/dict | subscript/slice | call
    call        := triton.cdiv | triton.next_power_of_2 | math.<MATH_CALLS> | torch.<ALLOC_CALLS>
                 | builtin in HOST_BUILTINS | a plain helper of this module | value.<TENSOR_METHODS>
    attribute   := value.<TENSOR_ATTRS> | torch.<dtype> | tl.<dtype> | triton.language.<dtype>
    names       := parameters, locals, module constants; a module name only as the base of an
                   allowlisted attribute, a function only as the callee, a jit function only as
                   ``kernel[grid]``; host code never assigns a module-level name              [host_name]
    f-strings appear only in assert and raise messages                                   [host_statement]
    a module constant holding a list, dict or set is read only as ``v in NAME`` or ``len(NAME)``, and
    defaults hold none: nothing host code can bind outlives a call (``calls += [1]`` on a default
    counted calls)                                                          [host_name] [module_constant]
    kernel launches and torch allocations appear only in ``launch`` (and a training variant's
    ``launch_forward``/``launch_backward``, typed the same way: see LAUNCHERS): ``constraints`` and helpers compute
    on shape values                                                            [kernel_use] [tensor_use]
    tensors (launch's positional parameters, except those SPACE names, which always come by keyword;
    allocations, views and subscripts of them) are used only as
    kernel arguments, allocation templates, view receivers, shape/stride reads and return values: no
    arithmetic, comparison or truth value of a tensor, no tensor index, no tensor passed to a builtin
    or a helper (helpers take and return shape values), no tensor as an argument of an allowlisted call
    except the template of ``*_like``/``view_as``; a container (tuple, list, dict) holding a tensor and
    any method result of one (``d.get('a')``) is a tensor; a launch is a statement, never a value
                                                                                           [tensor_use]
    int()/float()/bool() of a tensor, a tensor in a grid or formatted into a message is a host read
                                                                                           [host_read]

So no value the host code can form is a callable (no lambda, no bound method, no function object):
no callable grid, no hook passed as a value; no attribute of a kernel (``add_pre_run_hook``,
``pre_hook``, ``run``) is reachable; ``torch.library``, ``torch.cuda``, ``sys``, ``threading`` are not
names of the grammar at all.

Kernels (``@triton.jit`` bodies): names are parameters, locals, ``tl``/``triton``/``math``, other jit
functions, module constants and JIT_BUILTINS; no import, global, nonlocal, lambda, try, with, class,
nested def, async, yield, comprehension, walrus or starred; no ``.handle``/``.data`` (the interpreter's
raw buffers); stores bind names only (no attribute or element store); a module is named only as the
namespace of a member (``tl.load``, ``tl.math.exp``, ``tl.extra.cuda.libdevice.tanh``, ``math.pi``),
within JIT_NAMESPACES (``tl.core.builtins`` is Python's builtins); a jit function and a string have no
attributes in a kernel; a module is named only as ``module.member``, a builtin only called, a jit
function only called or passed to a call (never bound: ``l = tl`` then ``l.core``); an attribute of a
value is one of a Triton tensor, dtype, type or constexpr (jit_value_attrs)            [jit_body_disallowed]

Everywhere: no attribute starting with ``_``                                             [private_access]
and no name from FORBIDDEN_NAMES or call to DYNAMIC_CALLS                              [dynamic_access]
host reads of tensor memory (``.item()``, ``.tolist()``, ``.cpu()``...)                 [host_read]
``torch.X`` outside the allocation/dtype vocabulary                                   [torch_compute_call]

Order: source, imports, everywhere-rules, kernels, module statements, host code; the first broken
rule is the finding.

Example::

    >>> check_module("import torch as t\\n").reason
    'module_alias'
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator

from warpforge.evaluator.static.vocab import StaticFinding
from warpforge.kernels import source_limits as limits
from warpforge.kernels.space_values import SpaceRefused, space_from_node

IMPORTS = {("torch", None), ("triton", None), ("math", None), ("triton.language", "tl"), ("torch.nn", "nn")}
FUTURE = {"annotations"}
DTYPES = {"float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
          "float8e4nv", "float8e5", "float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64"}
ALLOC_CALLS = {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "full", "full_like", "ones",
               "ones_like", "finfo", "iinfo", "Size", "promote_types"}
TORCH_VALUES = DTYPES  # never a class or function: a value of the host grammar is never callable
TRITON_CALLS = {"cdiv", "next_power_of_2"}
MATH_CALLS = {"ceil", "floor", "sqrt", "log2", "log", "exp", "isqrt", "gcd", "lcm", "prod"}
MATH_VALUES = {"inf", "pi", "e"}
HOST_BUILTINS = {"int", "float", "bool", "min", "max", "abs", "len", "range", "tuple", "divmod"}
HOST_ERRORS = {"ValueError", "RuntimeError", "AssertionError", "TypeError", "NotImplementedError"}
# Tensor methods host code may call: shapes, strides, views, fresh allocations. Nothing that computes
# values, reads them on the host, casts, or reaches hooks.
TENSOR_METHODS = {"stride", "size", "dim", "numel", "contiguous", "view", "reshape", "is_contiguous",
                  "element_size", "new_empty", "new_zeros", "new_full", "new_ones", "flatten", "unsqueeze",
                  "squeeze", "t", "transpose", "permute", "expand", "view_as", "unflatten", "is_floating_point",
                  "get"}  # get: the params dict
TENSOR_ATTRS = {"shape", "dtype", "device", "ndim", "is_cuda", "itemsize"}
# Tensor methods whose result is a tensor (a view or a fresh allocation); the others return shape values.
TENSOR_RESULTS = {"contiguous", "view", "reshape", "new_empty", "new_zeros", "new_full", "new_ones", "flatten",
                  "unsqueeze", "squeeze", "t", "transpose", "permute", "expand", "view_as", "unflatten"}
# Tensor methods whose result is a shape value (an int, a bool, a tuple of ints).
SHAPE_RESULTS = {"stride", "size", "dim", "numel", "is_contiguous", "element_size", "is_floating_point"}
# Arguments that may be tensors: the template of torch.*_like and of x.view_as (everything else a call
# takes is a shape value: a tensor there is read on the host through __index__/__float__/iteration).
TEMPLATE_ARG = {"empty_like", "zeros_like", "ones_like", "full_like", "view_as"}
TENSOR_ALLOC = {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "full", "full_like", "ones",
                "ones_like"}
HOST_READS = {"numpy", "tolist", "item", "cpu", "untyped_storage", "storage", "__array__", "__dlpack__",
              "data_ptr"}
FORBIDDEN_NAMES = {"__builtins__", "__import__", "__loader__", "__spec__", "__dict__"}
DYNAMIC_CALLS = {"getattr", "setattr", "delattr", "eval", "exec", "compile", "globals", "locals", "vars", "open",
                 "breakpoint", "input", "memoryview", "__import__", "type", "object", "super", "id", "hasattr"}
JIT_BUILTINS = {"range", "min", "max", "abs", "len", "int", "float", "bool", "isinstance", "print", "True", "False",
                "None"}
JIT_MODULES = {"tl", "triton", "math"}
JIT_BANNED_ATTRS = {"handle", "data"}
# Attributes a kernel reads on a value (a tl.tensor, dtype, pointer/block type or constexpr) that are set per
# instance; the class-level ones are read from Triton (jit_value_attrs). A local is never a Triton object
# with hooks or caches: `tl.constexpr(tl.sum).value.cache` reached a library JITFunction's cache.
JIT_INSTANCE_ATTRS = {"shape", "type", "dtype", "numel", "value", "name", "element_ty", "primitive_bitwidth",
                      "int_bitwidth", "int_signedness", "fp_mantissa_width", "exponent_bias", "address_space",
                      "const", "scalar", "itemsize"}
JIT_CODEGEN_ATTRS = {"to_ir", "mangle", "codegen_name", "cache_key_part"}  # the compiler's, with a builder
# Comprehensions, walrus, starred, dict/set displays, match, del: Python-only code Triton's compiler
# refuses and the interpreter runs as Python.
JIT_BANNED_NODES = (ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Lambda, ast.Try, ast.With,
                    ast.ClassDef, ast.AsyncFunctionDef, ast.Await, ast.Yield, ast.YieldFrom, ast.FunctionDef,
                    ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.NamedExpr, ast.Starred,
                    ast.Dict, ast.Set, ast.Match, ast.Delete)
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
JIT_NAMESPACES = {"triton.language", "triton.language.math", "triton.language.extra",
                  "triton.language.extra.cuda", "triton.language.extra.cuda.libdevice",
                  "triton.language.extra.libdevice", "math"}


class GrammarError(Exception):
    """Raised inside the walk; carries the finding."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.finding = StaticFinding(reason, message)


def _fail(reason: str, message: str) -> GrammarError:
    return GrammarError(reason, message)


def check_module(source: str) -> StaticFinding | None:
    """The first grammar rule ``source`` breaks, or None (it may run)."""
    try:
        tree = parse_limited(source)
        Grammar(tree).check()
    except GrammarError as err:
        return err.finding
    return None


def check_source_text(source: str, cookie: bool = True) -> None:
    """[source_encoding] and [source_too_large] (kernels/source_limits.py), as a GrammarError."""
    try:
        limits.check_source_text(source, cookie)
    except limits.SourceRefused as err:
        raise _fail(err.reason, str(err)) from None


def parse_limited(source: str, cookie: bool = True) -> ast.Module:
    """Parse within the limits (kernels/source_limits.py); every failure is a GrammarError."""
    try:
        return limits.parse_limited(source, cookie)
    except limits.SourceRefused as err:
        raise _fail(err.reason, str(err)) from None


# The allowed rewrite of the Triton idioms users and LLMs write most, said with the refusal (the rule is unchanged).
_AUTOTUNE = ("; rewrite: put the configurations in the variant's SPACE (e.g. SPACE = {'BLOCK': [128, 256], "
             "'num_warps': [4, 8]}): the search tunes them, launch receives each as a keyword parameter and the "
             "kernel takes them as tl.constexpr arguments (num_warps and num_stages as launch options: "
             "k[grid](..., num_warps=num_warps)); decorate the kernel with @triton.jit alone")
_HEURISTICS = ("; rewrite: compute the value in launch (or ModelNew.forward) on the host (e.g. EVEN_N = "
               "N % BLOCK_N == 0) and pass it to the kernel as a tl.constexpr argument; decorate the kernel with "
               "@triton.jit alone")
_REWRITES = {"autotune": _AUTOTUNE, "autotuner": _AUTOTUNE, "Autotuner": _AUTOTUNE, "Config": _AUTOTUNE,
             "heuristics": _HEURISTICS, "Heuristics": _HEURISTICS}


def _rewrite(*names: str | None) -> str:
    """The rewrite hint for the first of ``names`` (dotted, judged by the last part) that is a refused idiom."""
    for name in names:
        hint = _REWRITES.get((name or "").rpartition(".")[2])
        if hint:
            return hint
    return ""


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _is_module(dotted: str) -> bool:
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
    return frozenset(JIT_INSTANCE_ATTRS | {a for c in classes for a in dir(c) if not a.startswith("_")}
                     - JIT_CODEGEN_ATTRS)


def _is_callable(dotted: str) -> bool:
    """Whether ``dotted`` (a member of a JIT_NAMESPACES module, not itself a module) is a function or a class."""
    import importlib

    namespace, _, attr = dotted.rpartition(".")
    try:
        return callable(getattr(importlib.import_module(namespace), attr, None))
    except ImportError:
        return True


class Grammar:
    """One module's check (see the module docstring for the productions)."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.modules: dict[str, str] = {}  # local name -> module ("tl" -> "triton.language")
        self.constants: set[str] = set()
        self.mutable: set[str] = set()  # constants holding a list, dict or set (shared by every call)
        self.jit: set[str] = set()
        self.host: set[str] = set()
        # each kernel's parameters in order, and which of them are tl.constexpr ([kernel_argument])
        self.jit_params: dict[str, tuple[list[str], set[str]]] = {}
        # ModelNew (the ModelNew section below): nodes its productions allow that the everywhere-rules would refuse
        # (``super().__init__()``, ``nn.Linear``, ``torch.randn`` inside ``nn.Parameter``)
        self.exempt: set[int] = set()

    def check(self) -> None:

        self._imports()
        self.exempt = exempt_nodes(self)
        self._everywhere()
        self._collect()
        for fn in self._functions():
            if fn.name in self.jit:
                self._jit_body(fn)
        self._module()
        for fn in self._functions():
            if fn.name in self.host:
                HostCheck(self, fn).check()
        check_methods(self)

    def _functions(self) -> Iterator[ast.FunctionDef]:
        return (n for n in self.tree.body if isinstance(n, ast.FunctionDef))

    # -- imports -------------------------------------------------------------------------------
    def _imports(self) -> None:
        for node in self.tree.body:  # a nested import is refused by its function's production
            if isinstance(node, ast.ImportFrom):
                if node.module == "__future__" and node.level == 0 and all(a.name in FUTURE for a in node.names):
                    continue
                if node.module == "torch" and node.level == 0 and [(a.name, a.asname) for a in node.names] == \
                        [("nn", None)]:  # `from torch import nn`: the same binding as `import torch.nn as nn`
                    self.modules["nn"] = "torch.nn"
                    continue
                hint = _rewrite(node.module, *(a.name for a in node.names)) \
                    if (node.module or "").partition(".")[0] == "triton" and node.level == 0 else ""
                raise _fail("forbidden_import", f"line {node.lineno}: from {node.module or '.'} import ...: a "
                            "variant imports only with `import torch`, `import triton`, `import math` and "
                            "`import triton.language as tl`" + hint)
            if not isinstance(node, ast.Import):
                continue
            for alias in node.names:
                if (alias.name, alias.asname) in IMPORTS or (alias.name, None) in IMPORTS and \
                        alias.asname == alias.name:
                    self.modules[alias.asname or alias.name] = alias.name
                    continue
                if alias.name in {name for name, _ in IMPORTS}:
                    raise _fail("module_alias", f"line {node.lineno}: `import {alias.name} as {alias.asname}`: "
                                "modules keep their own names (an alias hides what is reached through it)")
                hint = _rewrite(alias.name) if alias.name.partition(".")[0] == "triton" else ""
                raise _fail("forbidden_import", f"line {node.lineno}: imports {alias.name}: a variant may import "
                            "only torch, triton, math and triton.language as tl" + hint)

    # -- rules that hold in every production ----------------------------------------------------
    def _everywhere(self) -> None:
        for node in ast.walk(self.tree):
            if id(node) in self.exempt:
                continue
            if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                raise _fail("private_access", f"line {node.lineno}: the private attribute .{node.attr}: a variant "
                            "may not reach interpreter, torch or harness internals")
            if isinstance(node, ast.Name) and (node.id in FORBIDDEN_NAMES or node.id.startswith("__")):
                raise _fail("dynamic_access", f"line {node.lineno}: uses {node.id}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in DYNAMIC_CALLS:
                raise _fail("dynamic_access", f"line {node.lineno}: calls {node.func.id}(): a variant may not look "
                            "up, open or run code dynamically")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                attr = node.func.attr
                to_cpu = attr == "to" and (
                    any(isinstance(a, ast.Constant) and a.value == "cpu" for a in node.args)
                    or any(k.arg == "device" and isinstance(k.value, ast.Constant) and k.value.value == "cpu"
                           for k in node.keywords))
                if attr in HOST_READS or to_cpu:
                    raise _fail("host_read", f"line {node.lineno}: .{attr}(){' to the CPU' if to_cpu else ''}: "
                                "reading tensor memory on the host is computing outside the kernels")
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                module = self.modules.get(node.value.id)
                if module == "torch" and node.attr not in TORCH_VALUES | ALLOC_CALLS:
                    raise _fail("torch_compute_call", f"line {node.lineno}: torch.{node.attr}: host code may use "
                                "torch only to allocate (" + ", ".join(sorted(ALLOC_CALLS)) + ") and name dtypes")
                if module == "torch.nn":
                    raise _fail("torch_compute_call", f"line {node.lineno}: nn.{node.attr}: nn names only ModelNew's "
                                "base (nn.Module), nn.Parameter and parameter-holding modules built in its __init__ "
                                "(never called: their computation is torch's)")
                if module == "triton" and node.attr not in TRITON_CALLS | {"jit", "language"}:
                    raise _fail("forbidden_import", f"line {node.lineno}: triton.{node.attr}: only triton.jit, "
                                "triton.cdiv, triton.next_power_of_2 and triton.language are part of a variant"
                                + _rewrite(node.attr))

    # -- module statements -------------------------------------------------------------------------
    def _collect(self) -> None:
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef):
                (self.jit if node.decorator_list else self.host).add(node.name)
                if node.decorator_list:
                    a = node.args
                    params = [p for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
                    self.jit_params[node.name] = ([p.arg for p in params], {
                        p.arg for p in params if p.annotation is not None and self._is_constexpr(p.annotation)})

    def _is_constexpr(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value.replace(" ", "").split(".")[-1] == "constexpr"
        return self.canonical(node) == "triton.language.constexpr"

    def _module(self) -> None:
        bound: dict[str, int] = {name: 0 for name in self.modules}
        for node in self.tree.body:
            names: list[str] = []
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and \
                    isinstance(node.value.value, str):
                continue
            if isinstance(node, ast.FunctionDef):
                self._signature(node)
                names = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if isinstance(node, ast.AnnAssign) and not self._annotation(node.annotation):
                    # a module-level annotation is evaluated at import: `X: <any call> = 1` ran that call
                    raise _fail("module_constant", f"line {node.lineno}: the annotation "
                                f"{ast.unparse(node.annotation)[:40]}: annotations are names, literals or "
                                "tl.constexpr")
                if len(targets) != 1 or not isinstance(targets[0], ast.Name) or node.value is None:
                    raise _fail("module_constant", f"line {node.lineno}: a module-level assignment binds one name "
                                "to a literal")
                if targets[0].id == "SPACE":  # typed from the tree: it becomes JSON, Optuna choices, stored rows
                    try:
                        space_from_node(node.value)
                    except SpaceRefused as exc:
                        raise _fail(exc.reason, f"line {node.lineno}: {exc}") from None
                if not self._literal(node.value):
                    raise _fail("module_constant", f"line {node.lineno}: {targets[0].id} = "
                                f"{ast.unparse(node.value)[:60]}: module-level values are literals, arithmetic on "
                                "earlier constants, or dtypes")
                names = [targets[0].id]
            elif isinstance(node, ast.ClassDef) and node.name == "ModelNew":

                check_class(self, node)
                names = [node.name]
            elif isinstance(node, ast.ClassDef):
                raise _fail("module_statement", f"line {node.lineno}: class {node.name}: a variant defines no "
                            "classes but KernelBench's `class ModelNew(nn.Module)`")
            else:
                raise _fail("module_statement", f"line {node.lineno}: a {type(node).__name__} statement at module "
                            "level: a variant module holds imports, literal constants, SPACE, constraints, "
                            "@triton.jit functions and launch only")
            for name in names:
                if name in bound:
                    raise _fail("rebinding", f"line {node.lineno}: {name} is bound twice at module level: each "
                                "name (jit functions included) is defined once")
                bound[name] = node.lineno
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    self.constants.add(name)
                    if not self._immutable(node.value):
                        self.mutable.add(name)

    def _signature(self, fn: ast.FunctionDef) -> None:
        for dec in fn.decorator_list:
            call = dec if isinstance(dec, ast.Call) else None
            target = call.func if call else dec
            if _dotted(target) != "triton.jit" or len(fn.decorator_list) != 1:
                name = (_dotted(target) or "").rpartition(".")[2]
                raise _fail("decorator", f"line {fn.lineno}: @{ast.unparse(dec)[:60]} on {fn.name}: the only "
                            "decorator is @triton.jit (autotune and heuristics take callables and hooks)"
                            + _rewrite(name))
            if call and (call.args or any(k.arg not in JIT_OPTIONS or not self._literal(k.value)
                                          for k in call.keywords)):
                raise _fail("decorator", f"line {fn.lineno}: @triton.jit(...) takes only literal "
                            f"{', '.join(sorted(JIT_OPTIONS))}")
        args = fn.args
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            if not self._literal(default) or not self._immutable(default):
                raise _fail("module_constant", f"line {fn.lineno}: {fn.name}'s default "
                            f"{ast.unparse(default)[:40]} is not a literal")
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if a is not None and a.annotation is not None and not self._annotation(a.annotation):
                raise _fail("module_statement", f"line {fn.lineno}: annotation {ast.unparse(a.annotation)[:40]} "
                            f"of {fn.name}: annotations are names or tl.constexpr")
        if fn.returns is not None and not self._annotation(fn.returns):
            raise _fail("module_statement", f"line {fn.lineno}: {fn.name}'s return annotation is not a name")

    def _immutable(self, node: ast.AST | None) -> bool:
        """No list, dict or set display in ``node``, nor a mutable constant: a default or a module constant
        outlives the call, and ``calls += [1]`` on one counted calls (state across calls)."""
        return not any(isinstance(n, (ast.List, ast.Dict, ast.Set)) or isinstance(n, ast.Name) and n.id in self.mutable
                       for n in ast.walk(node)) if node is not None else True

    def _annotation(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return True
        if isinstance(node, ast.Name):
            return node.id in {"int", "float", "bool", "str", "dict", "tuple"}
        return self.canonical(node) == "triton.language.constexpr" or self._literal(node)

    def _literal(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return all(self._literal(e) for e in node.elts)
        if isinstance(node, ast.Dict):
            return all(k is not None and self._literal(k) for k in node.keys) and \
                all(self._literal(v) for v in node.values)
        if isinstance(node, ast.UnaryOp):
            return self._literal(node.operand)
        if isinstance(node, ast.BinOp):
            return not isinstance(node.op, ast.MatMult) and self._literal(node.left) and self._literal(node.right)
        if isinstance(node, ast.Name):
            return node.id in self.constants
        if isinstance(node, ast.Attribute):
            head, _, attr = self.canonical(node).rpartition(".")
            return head in ("torch", "triton.language") and attr in DTYPES or head == "math" and attr in MATH_VALUES
        if isinstance(node, ast.Call):  # tl.constexpr(literal)
            return self.canonical(node.func) == "triton.language.constexpr" and not node.keywords \
                and all(self._literal(a) for a in node.args)
        return False

    def space_keys(self) -> set[str]:
        """The string keys of a module-level ``SPACE = {...}`` dict literal (the tuning parameters)."""
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and [_dotted(t) for t in node.targets] == ["SPACE"] \
                    and isinstance(node.value, ast.Dict):
                return {k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        return set()

    def canonical(self, node: ast.AST) -> str:
        """The dotted name with its first part resolved to the module it names ("tl.float32" ->
        "triton.language.float32"); "" when the base is not an imported module."""
        dotted = _dotted(node)
        if dotted is None:
            return ""
        first, _, rest = dotted.partition(".")
        module = self.modules.get(first)
        if module is None:
            return ""
        return f"{module}.{rest}" if rest else module

    # -- kernels -------------------------------------------------------------------------------------
    def _jit_body(self, fn: ast.FunctionDef) -> None:
        local = {a.arg for a in [*fn.args.args, *fn.args.kwonlyargs, *fn.args.posonlyargs]}
        body = [node for stmt in fn.body for node in ast.walk(stmt)]  # not the decorators or annotations
        for node in body:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                local.add(node.id)
        modules = {name for name, mod in self.modules.items() if mod in ("triton", "triton.language", "math")}
        # scalar constants only: a list, dict or set would be Python state under the interpreter
        # (``CALLS.append(1)`` in a kernel counted calls)
        constants = {n.targets[0].id for n in self.tree.body if isinstance(n, ast.Assign)
                     and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and self._literal_early(n.value)
                     and n.targets[0].id not in self._mutable_early()}
        allowed = local | self.jit | constants | modules | JIT_BUILTINS | {fn.name}
        parent = {id(child): node for node in body for child in ast.iter_child_nodes(node)}
        for node in body:
            if isinstance(node, JIT_BANNED_NODES):
                raise _fail("jit_body_disallowed", f"line {node.lineno}: @triton.jit '{fn.name}' contains a "
                            f"{type(node).__name__} statement: kernels are Triton code only")
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
                self._jit_name_use(fn, node, parent.get(id(node)))
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in allowed:
                raise _fail("jit_body_disallowed", f"line {node.lineno}: @triton.jit '{fn.name}' uses "
                            f"'{node.id}', which is not tl, triton, a parameter, a local, a constant or another "
                            "jit function (names the interpreter injects, such as np, are not)")
            if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, ast.Store):
                raise _fail("jit_body_disallowed", f"line {node.lineno}: @triton.jit '{fn.name}' stores into "
                            f"{ast.unparse(node)[:40]}: a kernel binds local names only (stores go through tl.store)")
            if isinstance(node, ast.Attribute) and (
                    isinstance(node.value, ast.Constant)
                    or isinstance(node.value, ast.Name) and node.value.id in self.jit):
                raise _fail("jit_body_disallowed", f"line {node.lineno}: @triton.jit '{fn.name}' reads "
                            f"{ast.unparse(node)[:40]}: a jit function is only called, a string has no methods "
                            "in a kernel")
            if isinstance(node, ast.Attribute) and self.canonical(node):
                self._jit_member(fn, node, parent.get(id(node)))
            elif isinstance(node, ast.Attribute) and node.attr not in jit_value_attrs():
                raise _fail("jit_body_disallowed", f"line {node.lineno}: @triton.jit '{fn.name}' reads "
                            f".{node.attr}: a kernel reads only the attributes of Triton tensors, dtypes and "
                            "constexprs (shape, dtype, to, ...)")
            if isinstance(node, ast.Attribute) and node.attr in JIT_BANNED_ATTRS:
                raise _fail("jit_body_disallowed", f"line {node.lineno}: @triton.jit '{fn.name}' reads "
                            f".{node.attr} (the interpreter's raw buffers)")

    def _jit_name_use(self, fn: ast.FunctionDef, node: ast.Name, parent: ast.AST | None) -> None:
        """[jit_body_disallowed] a module is named only as the base of a member (``l = tl`` then
        ``l.core.builtins.exec`` reached Python's builtins), a builtin only as a callee, a jit function only
        as a callee or a call's argument (``tl.reduce(x, 0, combine)``), never bound to a local."""
        name = node.id
        callee = isinstance(parent, ast.Call) and parent.func is node
        argument = isinstance(parent, ast.Call) and node in parent.args or isinstance(parent, ast.keyword)
        if name in self.modules and not (isinstance(parent, ast.Attribute) and parent.value is node) \
                or name in JIT_BUILTINS and not callee \
                or name in self.jit and not (callee or argument):
            raise _fail("jit_body_disallowed", f"line {node.lineno}: @triton.jit '{fn.name}' uses {name} as a "
                        "value: modules are named only as tl.member, builtins and jit functions only called")

    def _jit_member(self, fn: ast.FunctionDef, node: ast.Attribute, parent: ast.AST | None) -> None:
        """[jit_body_disallowed] ``module.NAME`` in a kernel: the module is one of JIT_NAMESPACES and NAME is
        not itself a module, unless it is the namespace of an enclosing ``module.NAME.MEMBER``."""
        canonical = self.canonical(node)
        namespace = canonical.rpartition(".")[0]
        if namespace == "triton" and node.attr in TRITON_CALLS | {"jit"}:
            return
        if canonical in JIT_NAMESPACES and isinstance(parent, ast.Attribute) and parent.value is node:
            return
        if namespace in JIT_NAMESPACES and not _is_module(canonical):
            called = isinstance(parent, ast.Call) and (parent.func is node or node in parent.args) \
                or isinstance(parent, ast.keyword) or isinstance(parent, ast.AnnAssign) and parent.annotation is node
            if called or not _is_callable(canonical):
                return  # a function is called or passed; a value (tl.float32, math.pi) is a value
            raise _fail("jit_body_disallowed", f"line {node.lineno}: @triton.jit '{fn.name}' binds "
                        f"{ast.unparse(node)[:40]} as a value: functions of tl are only called (`s = tl.sum` then "
                        "s.fn, s.cache, s.add_pre_run_hook reach Triton's objects)")
        raise _fail("jit_body_disallowed", f"line {node.lineno}: @triton.jit '{fn.name}' names "
                    f"{ast.unparse(node)[:40]}: a kernel uses members of tl, tl.math, tl.extra.cuda.libdevice "
                    "and math only (no module as a value, no other module)")

    def _mutable_early(self) -> set[str]:
        """Module names bound to a list, dict or set display, or to an earlier such name (``X = CALLS``)."""
        mutable: set[str] = set()
        for n in self.tree.body:
            if not isinstance(n, (ast.Assign, ast.AnnAssign)) or n.value is None:
                continue
            if any(isinstance(e, (ast.List, ast.Dict, ast.Set)) or isinstance(e, ast.Name) and e.id in mutable
                   for e in ast.walk(n.value)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                mutable |= {t.id for t in targets if isinstance(t, ast.Name)}
        return mutable

    def _literal_early(self, node: ast.AST) -> bool:
        """A literal judged before ``constants`` is filled (jit bodies are checked before module statements)."""
        if isinstance(node, ast.Name):
            return any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.id
                                                         for t in n.targets) for n in self.tree.body)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return all(self._literal_early(e) for e in node.elts)
        if isinstance(node, ast.BinOp):
            return self._literal_early(node.left) and self._literal_early(node.right)
        if isinstance(node, ast.UnaryOp):
            return self._literal_early(node.operand)
        return self._literal(node)


class HostCheck:
    """Host code (launch, constraints, helpers) against the host productions."""

    def __init__(self, grammar: Grammar, fn: ast.FunctionDef) -> None:
        self.g, self.fn = grammar, fn
        args = fn.args
        self.locals = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs] if a}
        self.locals |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        self.read_only: set[int] = set()  # ids of Name nodes in a read-only position (`v in NAME`, len(NAME))
        self.module_names = set(grammar.modules) | grammar.constants | grammar.jit | grammar.host
        # launch's positional inputs are tensors; a helper's or constraints' parameters are shape values
        self.tensors: set[str] = set()
        # The entry points (launch, launch_forward, launch_backward; ModelNew.forward in the ModelNew section below)
        # launch kernels and allocate
        self.entry = fn.name in LAUNCHERS
        if self.entry:
            self.entry_tensors(fn.args)

    def entry_tensors(self, args: ast.arguments, skip: int = 0) -> None:
        """The harness calls launch(*inputs, **params) with params a point of SPACE: a positional parameter
        is an input unless SPACE names it (then it always comes by keyword; an input landing there is a
        TypeError). `def launch(x, w=None)` on a two-input task received w untyped. ``skip``: ``self``."""
        positional = [*args.posonlyargs, *args.args][skip:]
        n_plain = len(positional) - len(args.defaults)
        self.tensors = {a.arg for a in positional[:n_plain]}
        self.tensors |= {a.arg for a in positional[n_plain:]
                         if a.arg not in self.g.space_keys() or a in args.posonlyargs}
        if args.vararg is not None:
            self.tensors.add(args.vararg.arg)

    def fail(self, reason: str, node: ast.AST, what: str) -> GrammarError:
        line = getattr(node, "lineno", self.fn.lineno)
        return _fail(reason, f"line {line}: in {self.fn.name}: {what}")

    def check(self) -> None:
        shadow = self.locals & self.module_names
        if shadow:
            raise self.fail("host_name", self.fn, f"parameter {sorted(shadow)[0]} shadows a module-level name")
        self.block(self.fn.body)

    def block(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            self.stmt(stmt)

    def is_tensor(self, node: ast.AST | None) -> bool:
        """Whether ``node`` is a tensor in the grammar's typing (see [tensor_use])."""
        if isinstance(node, ast.Name):
            return node.id in self.tensors
        if isinstance(node, ast.Subscript):
            return self.is_tensor(node.value)
        if isinstance(node, ast.IfExp):
            return self.is_tensor(node.body) or self.is_tensor(node.orelse)
        if isinstance(node, (ast.Tuple, ast.List)):
            return any(self.is_tensor(e.value if isinstance(e, ast.Starred) else e) for e in node.elts)
        if isinstance(node, ast.Dict):  # {'a': x}['a'] is x
            return any(self.is_tensor(v) for v in [*node.keys, *node.values] if v is not None)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            canonical = self.g.canonical(node.func)
            if canonical:
                return canonical.rpartition(".")[0] == "torch" and node.func.attr in TENSOR_ALLOC
            # a method of a tensor (or of a container holding one: d.get('a')) gives a tensor unless it is
            # one of the shape reads
            return node.func.attr not in SHAPE_RESULTS and self.is_tensor(node.func.value)
        return False

    def untensored(self, node: ast.AST, what: str, reason: str = "tensor_use") -> None:
        if self.is_tensor(node):
            raise self.fail(reason, node, f"{ast.unparse(node)[:60]} is a tensor, {what}: host code computes only "
                            "on shapes and parameters; the values are the kernels' work")

    def bind(self, target: ast.AST, value: ast.AST | None = None, tensor: bool = False) -> None:
        if isinstance(target, ast.Name):
            if target.id in self.module_names:
                raise self.fail("host_name", target, f"assigns {target.id}, a module-level name")
            self.locals.add(target.id)
            if tensor or self.is_tensor(value):
                self.tensors.add(target.id)
            else:
                self.tensors.discard(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) \
                else None
            for i, e in enumerate(target.elts):
                self.bind(e, values[i] if values else None, tensor=values is None and self.is_tensor(value))
        else:
            raise self.fail("host_statement", target, f"assigns to {ast.unparse(target)[:60]}: host code binds "
                            "local names only (no attribute or element stores: hooks and in-place compute)")

    def stmt(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Assign):
            self.expr(node.value)
            for t in node.targets:
                self.bind(t, node.value)
        elif isinstance(node, ast.AugAssign):
            if not isinstance(node.target, ast.Name) or node.target.id not in self.locals:
                raise self.fail("host_statement", node, "augmented assignment to something other than a local")
            self.untensored(node.target, "updated in place")
            self.untensored(node.value, "in arithmetic")
            self.expr(node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            self.expr(node.value)
            self.bind(node.target, node.value)
        elif isinstance(node, ast.Return):
            if node.value is not None:
                if not self.entry:  # a helper's tensor would be untyped in its caller
                    self.untensored(node.value, "returned by a helper (helpers take and return shape values)")
                self.expr(node.value)
        elif isinstance(node, ast.If):
            self.untensored(node.test, "read as a truth value", "host_read")
            self.expr(node.test)
            self.block(node.body)
            self.block(node.orelse)
        elif isinstance(node, ast.For) and not node.orelse:
            self.expr(node.iter)
            self.bind(node.target, tensor=self.is_tensor(node.iter))
            self.block(node.body)
        elif isinstance(node, ast.Assert):
            self.untensored(node.test, "read as a truth value", "host_read")
            self.expr(node.test)
            if node.msg is not None:
                self.message(node.msg)
        elif isinstance(node, ast.Raise) and node.cause is None and isinstance(node.exc, ast.Call) \
                and isinstance(node.exc.func, ast.Name) and node.exc.func.id in HOST_ERRORS \
                and not node.exc.keywords:
            for a in node.exc.args:
                self.message(a)
        elif isinstance(node, (ast.Pass, ast.Break, ast.Continue)):
            pass
        elif isinstance(node, ast.Expr):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return
            if isinstance(node.value, ast.Call):
                self.call(node.value)  # its own production first (a kernel's method is kernel_use)
            if not (isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Subscript)):
                raise self.fail("host_statement", node, f"the expression statement {ast.unparse(node)[:60]}: a "
                                "bare expression in host code is a kernel launch `kernel[grid](...)`")
        else:
            raise self.fail("host_statement", node, f"a {type(node).__name__} statement: host code is assignments, "
                            "if, for, assert, raise, return and kernel launches (no while, with, try, import, "
                            "def, lambda, global, del)")

    def message(self, node: ast.expr) -> None:
        if isinstance(node, ast.JoinedStr):
            for part in node.values:
                if isinstance(part, ast.FormattedValue):
                    self.untensored(part.value, "formatted into a message (formatting reads its values)",
                                    "host_read")
                    self.expr(part.value)
                    if part.format_spec is not None:
                        self.message(part.format_spec)
        else:
            self.untensored(node, "used as a message (str() reads its values)", "host_read")
            self.expr(node)

    def expr(self, node: ast.expr) -> None:
        if isinstance(node, ast.Constant):
            return
        if isinstance(node, ast.Name):
            if node.id in self.g.mutable and node.id not in self.locals and id(node) not in self.read_only:
                raise self.fail("host_name", node, f"{node.id} is a list, dict or set bound at module level: host "
                                "code reads it only as `v in NAME` or len(NAME) (an alias of it would carry state "
                                "from one call to the next: `c = NAME; c += [1]`)")
            if node.id in self.locals or node.id in self.g.constants:
                return
            raise self.fail("host_name", node, self._name_use(node.id))
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.MatMult):
                raise self.fail("torch_compute_call", node, "the @ operator (a torch matmul)")
            for side in (node.left, node.right):
                self.untensored(side, "in arithmetic")
                self.expr(side)
        elif isinstance(node, ast.UnaryOp):
            self.untensored(node.operand, "in arithmetic")
            self.expr(node.operand)
        elif isinstance(node, ast.BoolOp):
            for v in node.values:
                self.untensored(v, "read as a truth value", "host_read")
                self.expr(v)
        elif isinstance(node, ast.Compare):
            identity = all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)
            self.read_only |= {id(c) for op, c in zip(node.ops, node.comparators)
                               if isinstance(op, (ast.In, ast.NotIn)) and isinstance(c, ast.Name)}
            for v in [node.left, *node.comparators]:
                if not identity:
                    self.untensored(v, "compared")
                self.expr(v)
        elif isinstance(node, ast.IfExp):
            self.untensored(node.test, "read as a truth value", "host_read")
            for v in (node.test, node.body, node.orelse):
                self.expr(v)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    self.expr(e.value)
                else:
                    self.expr(e)
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if k is not None:
                    self.expr(k)
                self.expr(v)
        elif isinstance(node, ast.Subscript):
            if isinstance(node.value, ast.Name) and node.value.id in self.g.jit:
                raise self.fail("kernel_use", node, f"{node.value.id}[...] outside a launch: a kernel is used "
                                "only as kernel[grid](args)")
            self.expr(node.value)
            parts: list[ast.expr] = [node.slice]
            while parts:  # the index's components: tuple elements and slice bounds, not what they call
                part = parts.pop()
                if isinstance(part, ast.Tuple):
                    parts.extend(part.elts)
                elif isinstance(part, ast.Slice):
                    parts.extend(p for p in (part.lower, part.upper, part.step) if p is not None)
                else:
                    self.untensored(part, "used as an index (indexing by a tensor gathers: compute)")
            self.expr(node.slice)
        elif isinstance(node, ast.Slice):
            for bound in (node.lower, node.upper, node.step):
                if bound is not None:
                    self.expr(bound)
        elif isinstance(node, ast.Attribute):
            self.attribute(node)
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Subscript):
                raise self.fail("kernel_use", node, "a launch used as a value: kernel[grid](args) is a statement "
                                "(its result is the compiled kernel, with its hooks)")
            self.call(node)
        else:
            raise self.fail("host_statement", node, f"a {type(node).__name__} expression "
                            f"({ast.unparse(node)[:60]}): not part of the host grammar (no lambda, comprehension, "
                            "f-string outside messages, walrus, await or yield)")

    def _name_use(self, name: str) -> str:
        if name in self.g.jit:
            return f"the kernel {name} used as a value: a kernel appears only as {name}[grid](args)"
        if name in self.g.host:
            return f"the function {name} used as a value: functions are only called (no callables as values)"
        if name in self.g.modules:
            return f"the module {name} used as a value: only its allowlisted attributes are"
        if name in HOST_BUILTINS:
            return f"the builtin {name} used as a value: builtins are only called"
        return f"'{name}' is not a parameter, a local or a module constant"

    def attribute(self, node: ast.Attribute) -> None:
        dotted = _dotted(node)
        canonical = self.g.canonical(node)
        if canonical:
            module = canonical.rpartition(".")[0]
            allowed = {"torch": TORCH_VALUES, "triton.language": DTYPES, "math": MATH_VALUES}.get(module, set())
            if node.attr in allowed:
                return
            raise self.fail("host_name", node, f"{dotted} as a value: host code names only dtypes "
                            "(torch.float16, tl.float32) and math constants; functions are only called")
        if isinstance(node.value, ast.Name) and node.value.id in self.g.jit:
            raise self.fail("kernel_use", node, f"{dotted}: a kernel's attributes (hooks, run, warmup) are "
                            "not part of a variant")
        if node.attr not in TENSOR_ATTRS:
            raise self.fail("host_name", node, f".{node.attr} as a value: host code reads only "
                            f"{', '.join(sorted(TENSOR_ATTRS))} (a bound method would be a callable value)")
        self.expr(node.value)

    def call(self, node: ast.Call) -> None:
        self.callee(node)  # what is called first: `kernel.add_pre_run_hook(f)` is about the kernel
        for kw in node.keywords:
            self.expr(kw.value)
        for a in node.args:
            self.expr(a.value if isinstance(a, ast.Starred) else a)

    def callee(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Subscript):  # kernel[grid](...)
            if not self.entry:
                raise self.fail("kernel_use", node, "a launch outside launch(): constraints and helpers compute "
                                "on shape values only")
            if not (isinstance(func.value, ast.Name) and func.value.id in self.g.jit):
                raise self.fail("kernel_use", node, f"{ast.unparse(func)[:60]}(...): only a @triton.jit function "
                                "of this module is launched with [grid]")
            self.grid(func.slice)
            self.launch_args(func.value.id, node)
            return
        if isinstance(func, ast.Name):
            if func.id in HOST_BUILTINS or func.id in self.g.host:
                for a in [*node.args, *(k.value for k in node.keywords)]:
                    a = a.value if isinstance(a, ast.Starred) else a
                    if func.id in ("int", "float", "bool"):
                        self.untensored(a, f"read by {func.id}()", "host_read")
                    elif func.id == "len" and isinstance(a, ast.Name):
                        self.read_only.add(id(a))
                    elif func.id != "len":
                        self.untensored(a, f"passed to {func.id}() (builtins and helpers take shape values)")
                return
            if func.id in self.g.jit:
                raise self.fail("kernel_use", node, f"{func.id}(...) without a grid: launch kernels as "
                                f"{func.id}[grid](...)")
            raise self.fail("host_name", node, f"calls {func.id}(): host code calls triton.cdiv, "
                            "triton.next_power_of_2, math functions, torch allocation, the builtins "
                            f"{', '.join(sorted(HOST_BUILTINS))} and its own helpers")
        if not isinstance(func, ast.Attribute):
            raise self.fail("host_name", node, f"calls {ast.unparse(func)[:60]}: not a name of the host grammar")
        dotted = _dotted(func)
        canonical = self.g.canonical(func)
        if canonical:
            module = canonical.rpartition(".")[0]
            allowed = {"torch": ALLOC_CALLS, "triton": TRITON_CALLS, "math": MATH_CALLS}.get(module, set())
            if func.attr in allowed:
                if module == "torch" and func.attr in TENSOR_ALLOC and not self.entry:
                    raise self.fail("tensor_use", node, f"{dotted}() outside launch(): constraints and helpers "
                                    "compute on shape values only (no allocation)")
                self.shape_args(node, func.attr if module == "torch" else "")
                return
            raise self.fail("torch_compute_call" if module == "torch" else "host_name", node,
                            f"calls {dotted}(): host code may call torch.{{{', '.join(sorted(ALLOC_CALLS))}}}, "
                            f"triton.cdiv/next_power_of_2 and math.{{{', '.join(sorted(MATH_CALLS))}}} only")
        if isinstance(func.value, ast.Name) and func.value.id in self.g.jit:
            raise self.fail("kernel_use", node, f"{dotted}(): a kernel's methods (add_pre_run_hook, run, warmup) "
                            "are not part of a variant")
        self.expr(func.value)  # the receiver first: np.asarray(x) is about np, not asarray
        if func.attr not in TENSOR_METHODS:
            raise self.fail("torch_compute_call", node, f".{func.attr}() on a value: host code may call only "
                            f"{', '.join(sorted(TENSOR_METHODS))}; compute belongs in a @triton.jit kernel")
        self.shape_args(node, func.attr)

    def launch_args(self, kernel: str, node: ast.Call) -> None:
        """[kernel_argument] a tensor reaches only a pointer parameter (one without tl.constexpr: under the
        interpreter a constexpr receives the object itself, and a torch tensor there is torch computing inside
        the kernel); a constexpr gets a literal, a SPACE parameter, a shape integer or arithmetic on them; no
        argument is a list, dict or set (no kernel parameter receives one)."""
        names, constexprs = self.g.jit_params.get(kernel, ([], set()))
        given: list[tuple[str | None, ast.expr]] = []
        for i, a in enumerate(node.args):
            if isinstance(a, ast.Starred):
                raise self.fail("kernel_argument", a, f"*{ast.unparse(a.value)[:40]} in a launch of {kernel}: "
                                "pass each kernel argument by position or name")
            given.append((names[i] if i < len(names) else None, a))
        for kw in node.keywords:
            if kw.arg is None:
                raise self.fail("kernel_argument", kw.value, f"**{ast.unparse(kw.value)[:40]} in a launch of "
                                f"{kernel}: pass each kernel argument by name")
            given.append((kw.arg, kw.value))
        for name, value in given:
            if isinstance(value, (ast.List, ast.Dict, ast.Set)):
                raise self.fail("kernel_argument", value, f"{ast.unparse(value)[:40]} passed to {kernel}: a kernel "
                                "argument is a tensor, a scalar or a tuple, never a list, dict or set")
            if name in constexprs and self.is_tensor(value):
                raise self.fail("constexpr_tensor", value, f"the tensor {ast.unparse(value)[:40]} passed to {kernel}'s "
                                f"tl.constexpr parameter {name}: a tensor goes only to a pointer parameter (a "
                                "constexpr gets a literal, a SPACE parameter or arithmetic on shapes)")

    def shape_args(self, node: ast.Call, name: str) -> None:
        """[tensor_use] an allowlisted call takes shape values; only the template of ``*_like``/``view_as``
        (its first positional argument) is a tensor (``triton.cdiv(x, 1)`` computed on x, a tensor size or
        fill value is read on the host)."""
        args = [a.value if isinstance(a, ast.Starred) else a for a in node.args]
        if name in TEMPLATE_ARG and args and not isinstance(node.args[0], ast.Starred):
            args = args[1:]
        for a in [*args, *(k.value for k in node.keywords)]:
            self.untensored(a, f"passed to {name or _dotted(node.func)}() (it takes shape values; only a "
                            "*_like/view_as template is a tensor)")

    def grid(self, node: ast.expr) -> None:
        """[kernel_use] a grid is a tuple of arithmetic, or a local holding one (never a callable)."""
        if isinstance(node, ast.Tuple):
            for e in node.elts:
                self.untensored(e, "in a grid (a grid is read on the host)", "host_read")
                self.expr(e)
            return
        if isinstance(node, ast.Name) and node.id in self.locals:
            self.untensored(node, "used as a grid (a grid is read on the host)", "host_read")
            return  # a local holds a value of this grammar, never a callable
        raise self.fail("kernel_use", node, f"grid {ast.unparse(node)[:60]}: a grid is a tuple of arithmetic on "
                        "shapes and parameters (no lambda, no function)")


def kernels_use(source: str, name: str) -> bool:
    """Whether a ``@triton.jit`` body of ``source`` names ``triton.language.<name>`` (``tl.dot``), decided on
    the AST: a comment or a string that mentions it does not count (a comment with ``tl.dot`` once removed
    bf16 from the interpreter's check). False for a source the grammar cannot parse."""
    try:
        tree = parse_limited(source)
    except GrammarError:
        return False
    g = Grammar(tree)
    try:
        g._imports()
    except GrammarError:
        return False
    target = f"triton.language.{name}"
    jit = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.decorator_list]
    return any(isinstance(node, ast.Attribute) and g.canonical(node) == target
               for fn in jit for stmt in fn.body for node in ast.walk(stmt))


# -- ModelNew: KernelBench's answer format ------------------------------------------------------------------
# KernelBench's answer format in the variant grammar: ONE ``class ModelNew(nn.Module)``.
#
# The same allowlist discipline as grammar.py (checked on the exact bytes that run, before any of them
# runs); the finding's ``reason`` is the rule in brackets::
#
#     model-new   := "class ModelNew(nn.Module):" docstring? init? forward                [model_new_class]
#                    (one base, nn.Module; no decorator, metaclass or keyword; no class-level statement;
#                    no method but ``__init__`` and ``forward``: ``load_state_dict``, ``_load_from_state_dict``,
#                    ``__setattr__``, ``state_dict``, ``__call__`` are never ModelNew's, so the harness's own
#                    nn.Module functions load the state and call it; no decorator on a method     [decorator])
#     init        := def __init__(self, NAME*): init-stmt*                                   [model_new_init]
#     init-stmt   := "super().__init__()" (first)
#                  | self.NAME "=" nn.Parameter(torch.<empty|zeros|ones|randn|rand>(value, ...))
#                  | self.NAME "=" nn.<PARAM_MODULES>(value, ..., key=value)
#                  | self.register_buffer("NAME", torch.<empty|zeros|ones|randn|rand>(value, ...))
#                  | self.NAME "=" value (no list, dict or set: state across timed calls)
#                  | NAME "=" value | pass | docstring
#                    (each self.NAME bound once, never a name nn.Module has: ``self.forward = ...``)
#     value       := literal | parameter | local | module constant | arithmetic | comparison | tuple/list
#                  | subscript | builtin or helper call on values | torch.<dtype>
#     forward     := def forward(self, inputs..., **SPACE params): host code of ``launch``'s grammar
#                    (grammar.HostCheck), where ``self.P`` (a parameter or buffer) and ``self.SUB.weight``
#                    (a tensor of a parameter-holding submodule) are tensors usable only as kernel arguments
#                    or for shapes/strides, ``self.V`` (a plain value) and ``self.SUB.in_features`` (a
#                    hyperparameter) are shape values; a submodule is never called or named as a value:
#                    ``self.gemm(x)`` is torch computing the answer                        [torch_compute_call]
#
# Whatever ModelNew's ``__init__`` initialises, the harness (evaluator/sandbox/child/model_new.py) replaces its
# whole state with the reference's before ``forward`` runs; a name the reference does not have is an error
# that names the reference's names.
#
# Example::
#
#     >>> from warpforge.evaluator.static.grammar import check_module
#     >>> src = "import torch.nn as nn\\nclass ModelNew(nn.Module):\\n    def forward(self, x):\\n        return x\\n"
#     >>> check_module(src) is None
#     True

# Modules that hold parameters and are only ever built, never called (their forward is torch's compute).
PARAM_MODULES = {"Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
                 "ConvTranspose3d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm",
                 "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "Embedding", "RMSNorm"}
TENSOR_CTORS = {"empty", "zeros", "ones", "randn", "rand"}
# A submodule's tensors (its state) and its hyperparameters (plain values the constructor stored).
SUB_TENSORS = {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}
SUB_VALUES = {"in_features", "out_features", "in1_features", "in2_features", "in_channels", "out_channels",
              "kernel_size", "stride", "padding", "dilation", "groups", "output_padding", "eps", "momentum",
              "normalized_shape", "num_groups", "num_channels", "num_features", "num_embeddings", "embedding_dim",
              "padding_idx", "affine", "elementwise_affine", "track_running_stats"}


@functools.cache
def module_names() -> frozenset[str]:
    """Every attribute nn.Module has: ModelNew never binds one (``self.forward = ...``, ``self.training``)."""
    import torch

    return frozenset(dir(torch.nn.Module)) | frozenset(dir(torch.nn.Module()))  # instance ones: training


def _model_new(g: Grammar) -> ast.ClassDef | None:
    return next((n for n in g.tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _is_super_init(stmt: ast.stmt) -> bool:
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    call = stmt.value
    func = call.func
    return (not call.args and not call.keywords and isinstance(func, ast.Attribute) and func.attr == "__init__"
            and isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "super" and not func.value.args and not func.value.keywords)


def _self_attr(node: ast.AST, me: str) -> str | None:
    """``NAME`` when ``node`` is ``self.NAME``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == me:
        return node.attr
    return None


def exempt_nodes(g: Grammar) -> set[int]:
    """Nodes of ModelNew's productions that the everywhere-rules refuse elsewhere: the ``super().__init__()``
    call, the ``nn.Module`` base, and in ``__init__`` the ``nn.Parameter``/``nn.<PARAM_MODULES>``
    constructors and the ``torch.<TENSOR_CTORS>`` inside them. Anything else keeps its rule."""
    out: set[int] = set()
    for node in g.tree.body:  # any class's base: a second class is then refused by its own rule
        if isinstance(node, ast.ClassDef):
            out |= {id(base) for base in node.bases if g.canonical(base) == "torch.nn.Module"}
    cls = _model_new(g)
    if cls is None:
        return out
    init = _method(cls, "__init__")
    if init is None:
        return out
    body = [s for s in init.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and _is_super_init(first):
        call = first.value
        assert isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
        out |= {id(call.func), id(call.func.value)}
    for stmt in body:
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _self_attr(stmt.targets[0], "self"):
            value = stmt.value
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                and _self_attr(stmt.value.func, "self") == "register_buffer" and len(stmt.value.args) == 2:
            ctor = stmt.value.args[1]
            if isinstance(ctor, ast.Call) and g.canonical(ctor.func).removeprefix("torch.") in TENSOR_CTORS:
                out.add(id(ctor.func))
        if not isinstance(value, ast.Call):
            continue
        canonical = g.canonical(value.func)
        if canonical == "torch.nn.Parameter":
            out.add(id(value.func))
            arg = value.args[0] if len(value.args) == 1 else None
            if isinstance(arg, ast.Call) and g.canonical(arg.func).removeprefix("torch.") in TENSOR_CTORS:
                out.add(id(arg.func))
        elif canonical.removeprefix("torch.nn.") in PARAM_MODULES and canonical.startswith("torch.nn."):
            out.add(id(value.func))
    return out


def check_class(g: Grammar, cls: ast.ClassDef) -> None:
    """[model_new_class] the class statement and its body's shape (the methods are checked by check_methods)."""
    where = f"line {cls.lineno}: class ModelNew"
    if cls.decorator_list:
        raise _fail("decorator", f"{where}: a decorator on ModelNew (it could replace the class)")
    if cls.keywords:
        raise _fail("model_new_class", f"{where}: keywords in the class statement (a metaclass runs code and "
                    "shapes the class): ModelNew is `class ModelNew(nn.Module):`")
    if len(cls.bases) != 1 or g.canonical(cls.bases[0]) != "torch.nn.Module":
        raise _fail("model_new_class", f"{where}: its one base is nn.Module (`import torch.nn as nn`)")
    seen: set[str] = set()
    for i, node in enumerate(cls.body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            continue
        if isinstance(node, ast.FunctionDef) and node.decorator_list:
            raise _fail("decorator", f"line {node.lineno}: @{ast.unparse(node.decorator_list[0])[:40]} on "
                        f"ModelNew.{node.name}: ModelNew's methods are plain (no property, staticmethod, jit)")
        if not isinstance(node, ast.FunctionDef) or node.name not in {"__init__", "forward"} or node.name in seen:
            what = f"def {node.name}" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else \
                f"a {type(node).__name__} statement"
            raise _fail("model_new_class", f"line {node.lineno}: {what} in ModelNew: it defines only __init__ and "
                        "forward, once each (the harness loads the state and calls it with nn.Module's own "
                        "functions; no class attribute, no override)")
        seen.add(node.name)
        args = node.args
        if not args.args or args.posonlyargs or node.name == "__init__" and (args.vararg or args.kwarg
                                                                              or args.kwonlyargs):
            raise _fail("model_new_class", f"line {node.lineno}: ModelNew.{node.name}'s parameters: "
                        "`def __init__(self, a, b)` (the init inputs) and `def forward(self, x, ...)`")
        g._signature(node)
    if "forward" not in seen:
        raise _fail("model_new_class", f"{where}: defines no forward(self, ...)")


def check_methods(g: Grammar) -> None:
    """``__init__`` against the init productions, then ``forward`` as host code."""
    cls = _model_new(g)
    if cls is None:
        return
    init = _method(cls, "__init__")
    model = InitCheck(g, init).check() if init is not None else ModelState()
    forward = _method(cls, "forward")
    assert forward is not None  # check_class
    ForwardCheck(g, forward, model).check()


class ModelState:
    """What ``__init__`` bound on self: tensors (parameters, buffers), submodules, plain values."""

    def __init__(self) -> None:
        self.tensors: set[str] = set()
        self.submodules: set[str] = set()
        self.values: set[str] = set()

    @property
    def names(self) -> set[str]:
        return self.tensors | self.submodules | self.values


class InitCheck:
    """[model_new_init] ModelNew.__init__: it builds parameters and reads its init inputs, nothing else."""

    def __init__(self, g: Grammar, fn: ast.FunctionDef) -> None:
        self.g, self.fn = g, fn
        self.me = fn.args.args[0].arg
        self.locals = {a.arg for a in fn.args.args[1:]}
        self.state = ModelState()

    def fail(self, node: ast.AST, what: str, reason: str = "model_new_init") -> GrammarError:
        return _fail(reason, f"line {getattr(node, 'lineno', self.fn.lineno)}: in ModelNew.__init__: {what}")

    def check(self) -> ModelState:
        shadow = self.locals & (set(self.g.modules) | self.g.constants | self.g.jit | self.g.host)
        if shadow:
            raise self.fail(self.fn, f"parameter {sorted(shadow)[0]} shadows a module-level name", "host_name")
        body = [s for s in self.fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                                 and isinstance(s.value.value, str))]
        for i, stmt in enumerate(body):
            if _is_super_init(stmt):
                if i != 0:
                    raise self.fail(stmt, "super().__init__() comes first")
                continue
            self.stmt(stmt)
        return self.state

    def stmt(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Pass):
            return
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                self.value(stmt.value)
                if target.id == self.me or target.id in self.g.modules or target.id in self.g.constants:
                    raise self.fail(stmt, f"assigns {target.id}", "host_name")
                self.locals.add(target.id)
                return
            name = _self_attr(target, self.me)
            if name is not None:
                self.own(stmt, name)
                kind = self.built(stmt.value)
                {"tensor": self.state.tensors, "module": self.state.submodules,
                 "value": self.state.values}[kind].add(name)
                return
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                and _self_attr(stmt.value.func, self.me) == "register_buffer":
            call = stmt.value
            name_node = call.args[0] if call.args else None
            if len(call.args) != 2 or call.keywords or not isinstance(name_node, ast.Constant) \
                    or not isinstance(name_node.value, str) or not name_node.value.isidentifier():
                raise self.fail(stmt, "register_buffer takes a literal name and a torch constructor, no keywords "
                                "(a non-persistent buffer would be state the reference's does not replace)")
            self.own(stmt, name_node.value)
            self.ctor(call.args[1])
            self.state.tensors.add(name_node.value)
            return
        raise self.fail(stmt, f"{ast.unparse(stmt)[:60]!r}: __init__ calls super().__init__(), binds "
                        "self.NAME to nn.Parameter(torch.empty/zeros/ones/randn/rand(...)), to a parameter-holding "
                        f"module ({', '.join(sorted(PARAM_MODULES))}) or to a value of its init inputs, and "
                        "registers buffers")

    def own(self, node: ast.AST, name: str) -> None:
        if name.startswith("_") or name in module_names():
            raise self.fail(node, f"self.{name}: a name nn.Module has (it would replace the harness's own)",
                            "model_new_class")
        if name in self.state.names:
            raise self.fail(node, f"self.{name} is bound twice", "rebinding")

    def built(self, value: ast.expr) -> str:
        """The kind of what ``self.NAME = value`` binds: "tensor", "module" or "value"."""
        if isinstance(value, ast.Call):
            canonical = self.g.canonical(value.func)
            if canonical == "torch.nn.Parameter":
                if len(value.args) != 1 or value.keywords:
                    raise self.fail(value, "nn.Parameter(torch.<ctor>(shape...)) takes one argument")
                self.ctor(value.args[0])
                return "tensor"
            if canonical.startswith("torch.nn.") and canonical.removeprefix("torch.nn.") in PARAM_MODULES:
                for a in [*value.args, *(k.value for k in value.keywords)]:
                    self.value(a.value if isinstance(a, ast.Starred) else a)
                if any(k.arg is None for k in value.keywords):
                    raise self.fail(value, "**kwargs in a module's constructor")
                return "module"
        if any(isinstance(n, (ast.List, ast.Dict, ast.Set)) for n in ast.walk(value)):
            # the model outlives a call in the benchmark: `c = self.calls; c += [1]` in forward would count calls
            raise self.fail(value, f"self.NAME = {ast.unparse(value)[:40]}: a list, dict or set on the model would "
                            "carry state from one call to the next; use a tuple")
        self.value(value)
        return "value"

    def ctor(self, node: ast.expr) -> None:
        if not (isinstance(node, ast.Call)
                and self.g.canonical(node.func).removeprefix("torch.") in TENSOR_CTORS
                and self.g.canonical(node.func).startswith("torch.")):
            raise self.fail(node, f"{ast.unparse(node)[:60]}: a parameter or buffer is made by "
                            f"torch.{{{', '.join(sorted(TENSOR_CTORS))}}}(shape...) (the harness then loads the "
                            "reference's values into it)")
        for a in node.args:
            self.value(a.value if isinstance(a, ast.Starred) else a)
        for k in node.keywords:
            if k.arg != "dtype" or self.g.canonical(k.value).removeprefix("torch.") not in DTYPES:
                raise self.fail(node, f"{ast.unparse(node)[:60]}: a constructor takes shapes and dtype=torch.<dtype>")

    def value(self, node: ast.expr) -> None:
        if isinstance(node, ast.Constant):
            return
        if isinstance(node, ast.Name):
            if node.id in self.g.mutable:
                raise self.fail(node, f"{node.id} is a list, dict or set bound at module level", "host_name")
            if node.id in self.locals or node.id in self.g.constants:
                return
            raise self.fail(node, f"'{node.id}' is not a parameter, a local or a module constant", "host_name")
        if isinstance(node, (ast.Tuple, ast.List)):
            for e in node.elts:
                self.value(e.value if isinstance(e, ast.Starred) else e)
        elif isinstance(node, ast.BinOp) and not isinstance(node.op, ast.MatMult):
            self.value(node.left)
            self.value(node.right)
        elif isinstance(node, ast.UnaryOp):
            self.value(node.operand)
        elif isinstance(node, ast.BoolOp):
            for v in node.values:
                self.value(v)
        elif isinstance(node, ast.Compare):
            for v in [node.left, *node.comparators]:
                self.value(v)
        elif isinstance(node, ast.IfExp):
            for v in (node.test, node.body, node.orelse):
                self.value(v)
        elif isinstance(node, ast.Subscript):
            self.value(node.value)
            self.value(node.slice)
        elif isinstance(node, ast.Slice):
            for bound in (node.lower, node.upper, node.step):
                if bound is not None:
                    self.value(bound)
        elif isinstance(node, ast.Attribute) and self.g.canonical(node).removeprefix("torch.") in DTYPES \
                and self.g.canonical(node).startswith("torch."):
            return
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and (node.func.id in HOST_BUILTINS or node.func.id in self.g.host) and not node.keywords:
            for a in node.args:
                self.value(a.value if isinstance(a, ast.Starred) else a)
        else:
            raise self.fail(node, f"{ast.unparse(node)[:60]}: __init__ computes plain values from its init "
                            "inputs only (literals, arithmetic, tuples, builtins, this module's helpers)")


class ForwardCheck(HostCheck):
    """ModelNew.forward: the host productions of ``launch``, with self's tensors and values typed."""

    def __init__(self, g: Grammar, fn: ast.FunctionDef, model: ModelState) -> None:
        super().__init__(g, fn)
        self.model = model
        self.me = fn.args.args[0].arg
        self.entry = True
        self.entry_tensors(fn.args, skip=1)
        self.locals.discard(self.me)

    def _self_kind(self, node: ast.AST) -> str | None:
        """"tensor", "value", "module" or "other" for ``self.X`` / ``self.SUB.Y``; None when not rooted at self."""
        name = _self_attr(node, self.me)
        if name is not None:
            if name in self.model.tensors:
                return "tensor"
            if name in self.model.values:
                return "value"
            return "module" if name in self.model.submodules else "other"
        if isinstance(node, ast.Attribute):
            sub = _self_attr(node.value, self.me)
            if sub is not None:
                if sub in self.model.submodules and node.attr in SUB_TENSORS:
                    return "tensor"
                if sub in self.model.submodules and node.attr in SUB_VALUES:
                    return "value"
                return "other"
        return None

    def is_tensor(self, node: ast.AST | None) -> bool:
        if node is not None and self._self_kind(node) == "tensor":
            return True
        return super().is_tensor(node)

    def attribute(self, node: ast.Attribute) -> None:
        kind = self._self_kind(node)
        if kind in ("tensor", "value"):
            return
        if kind == "module":
            raise self.fail("host_name", node, f"{ast.unparse(node)} as a value: a submodule is read only "
                            f"through its tensors ({', '.join(sorted(SUB_TENSORS))}) and hyperparameters")
        if kind == "other":
            raise self.fail("host_name", node, f"{ast.unparse(node)}: forward reads on self only what __init__ "
                            "bound (parameters, buffers, plain values, a submodule's weight/bias and "
                            "hyperparameters)")
        super().attribute(node)

    def expr(self, node: ast.expr) -> None:
        if isinstance(node, ast.Name) and node.id == self.me:
            raise self.fail("host_name", node, f"{self.me} as a value: forward reads self's parameters and "
                            "values by name (self.weight), never the module itself")
        super().expr(node)

    def callee(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            receiver = self._self_kind(func.value) if isinstance(func.value, ast.Attribute) else None
            if _self_attr(func, self.me) is not None or receiver in ("module", "other"):
                raise self.fail("torch_compute_call", node, f"calls {ast.unparse(func)[:60]}(): a submodule or "
                                "method of the model called is torch computing the answer; launch a @triton.jit "
                                "kernel on its tensors (self.gemm.weight) instead")
        super().callee(node)
