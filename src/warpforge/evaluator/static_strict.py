"""The ``strict`` static rules (static.py): what a machine-written variant may name at all.

A variant is host code that allocates and launches, plus ``@triton.jit`` kernels. Everything a
candidate needs is reachable through a small vocabulary; everything an attacker needs (the harness's
objects, the dispatch-mode switches, numpy views of tensor memory, the interpreter's raw buffers) is
outside it. So the rules are allowlists, checked on the AST before any code runs:

- imports: ``torch``, ``triton``, ``triton.language`` (and ``triton.language.extra``), ``math``,
  ``typing``, ``functools``, ``itertools``, ``dataclasses``, ``enum``, ``__future__``;
- no attribute whose name starts with ``_`` (``torch._C``, ``fn.__closure__``, ``obj.__class__``), no
  name ``__builtins__``/``__import__``/``__loader__``/``__spec__``, no call to ``getattr``, ``setattr``,
  ``delattr``, ``eval``, ``exec``, ``compile``, ``globals``, ``locals``, ``vars``, ``open``,
  ``breakpoint``, ``input``, ``memoryview``;
- ``torch.X`` and ``triton.X`` only for allowlisted X (allocation, dtypes, ``cuda`` streams;
  ``jit``, ``autotune``, ``heuristics``, ``Config``, ``cdiv``, ``next_power_of_2``, ``language``);
- host reads of tensor memory: ``.numpy()``, ``.tolist()``, ``.item()``, ``.cpu()``,
  ``.untyped_storage()``, ``.storage()``, ``.to("cpu")`` / ``.to(device="cpu")``;
- ``@triton.jit`` bodies: names are the function's parameters and locals, ``tl``/``triton``/``math``,
  other jit functions of the module, module-level constants, and the builtins Triton accepts
  (``range``, ``min``, ``max``, ``abs``, ``len``, ``int``, ``float``, ``bool``, ``isinstance``,
  ``print``); calls go to those; attributes ``handle`` and ``data`` (the interpreter's raw buffers)
  are refused; no ``import``, ``global``, ``nonlocal``, ``lambda``, ``try``, ``with``, ``class``.

Example::

    >>> import ast
    >>> strict_finding(ast.parse("import numpy")).reason
    'forbidden_import'
"""

from __future__ import annotations

import ast

from warpforge.evaluator.static_vocab import ALLOWED_TORCH, StaticFinding, is_jit

ALLOWED_IMPORTS = ("torch", "triton", "triton.language", "triton.language.extra", "math", "typing", "functools",
                   "itertools", "dataclasses", "enum", "__future__")
ALLOWED_TRITON = {"jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2", "language", "constexpr"}
DYNAMIC_CALLS = {"getattr", "setattr", "delattr", "eval", "exec", "compile", "globals", "locals", "vars", "open",
                 "breakpoint", "input", "memoryview", "__import__"}
FORBIDDEN_NAMES = {"__builtins__", "__import__", "__loader__", "__spec__", "__dict__"}
HOST_READS = {"numpy", "tolist", "item", "cpu", "untyped_storage", "storage", "__array__", "__dlpack__"}
JIT_BUILTINS = {"range", "min", "max", "abs", "len", "int", "float", "bool", "isinstance", "print", "True", "False",
                "None"}
JIT_MODULES = {"tl", "triton", "math"}
JIT_BANNED_ATTRS = {"handle", "data"}
JIT_BANNED_NODES = (ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Lambda, ast.Try, ast.With,
                    ast.ClassDef, ast.AsyncFunctionDef, ast.Await, ast.Yield, ast.YieldFrom)


def _allowed_module(name: str) -> bool:
    return any(name == ok or name.startswith(ok + ".") and ok == "triton.language.extra" for ok in ALLOWED_IMPORTS)


def _module_names(tree: ast.Module) -> tuple[dict[str, str], set[str], set[str]]:
    """(import alias -> module, jit function names, module-level constant names)."""
    aliases: dict[str, str] = {}
    jit_fns: set[str] = set()
    constants: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.FunctionDef) and is_jit(node):
            jit_fns.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _is_constant(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            constants |= {t.id for t in targets if isinstance(t, ast.Name)}
    return aliases, jit_fns, constants


def _is_constant(node: ast.AST) -> bool:
    """A literal, arithmetic on literals, or ``tl.constexpr(literal)``."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _is_constant(node.operand)
    if isinstance(node, ast.BinOp):
        return _is_constant(node.left) and _is_constant(node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "constexpr":
        return all(_is_constant(a) for a in node.args) and not node.keywords
    if isinstance(node, ast.Attribute):  # tl.float16, triton.language.float32
        root = node.value
        while isinstance(root, ast.Attribute):
            root = root.value
        return isinstance(root, ast.Name) and root.id in JIT_MODULES
    return False


def strict_finding(tree: ast.Module) -> StaticFinding | None:
    """The first strict rule the module breaks, or None."""
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                return StaticFinding("forbidden_import", "relative imports are not allowed in a variant")
            modules = [node.module or ""]
            allowed_names = {"torch": ALLOWED_TORCH, "triton": ALLOWED_TRITON}.get(node.module or "")
            for a in node.names:
                if a.name.startswith("_") or (allowed_names is not None and a.name not in allowed_names):
                    return StaticFinding("forbidden_import", f"imports {a.name} from {node.module}")
        for mod in modules:
            if not _allowed_module(mod):
                return StaticFinding("forbidden_import", f"imports {mod}: a variant may import only "
                                     f"{', '.join(ALLOWED_IMPORTS)}")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            return StaticFinding("private_access", f"uses the private attribute .{node.attr}: a variant may not "
                                 "reach interpreter, torch or harness internals")
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            return StaticFinding("dynamic_access", f"uses {node.id}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in DYNAMIC_CALLS:
            return StaticFinding("dynamic_access", f"calls {node.func.id}(): a variant may not look up, open or "
                                 "run code dynamically")
    aliases, jit_fns, constants = _module_names(tree)
    finding = _host_reads(tree) or _library_attributes(tree, aliases)
    if finding is not None:
        return finding
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and is_jit(n)):
        finding = _jit_body(fn, aliases, jit_fns, constants)
        if finding is not None:
            return finding
    return None


def _library_attributes(tree: ast.Module, aliases: dict[str, str]) -> StaticFinding | None:
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
            continue
        module = aliases.get(node.value.id)
        if module == "torch" and node.attr not in ALLOWED_TORCH:
            return StaticFinding("torch_compute_call", f"uses torch.{node.attr}: launch may only allocate tensors, "
                                 "describe them and launch Triton kernels")
        if module == "triton" and node.attr not in ALLOWED_TRITON:
            return StaticFinding("forbidden_import", f"uses triton.{node.attr}: only "
                                 f"{', '.join(sorted(ALLOWED_TRITON))} are allowed (not Triton's runtime)")
    return None


def _host_reads(tree: ast.Module) -> StaticFinding | None:
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        attr = node.func.attr
        to_cpu = attr == "to" and any(isinstance(a, ast.Constant) and a.value == "cpu" for a in node.args) or \
            attr == "to" and any(k.arg == "device" and isinstance(k.value, ast.Constant) and k.value.value == "cpu"
                                 for k in node.keywords)
        if attr in HOST_READS or to_cpu:
            return StaticFinding("host_read", f"calls .{attr}(){' to the CPU' if to_cpu else ''}: reading tensor "
                                 "memory on the host is computing outside the kernels")
    return None


def _jit_body(fn: ast.FunctionDef, aliases: dict[str, str], jit_fns: set[str], constants: set[str]
              ) -> StaticFinding | None:
    """A ``@triton.jit`` body may use only Triton's vocabulary (see the module docstring)."""
    local = {a.arg for a in [*fn.args.args, *fn.args.kwonlyargs, *fn.args.posonlyargs]}
    body = [node for stmt in fn.body for node in ast.walk(stmt)]  # not the decorators or annotations
    for node in body:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            local.add(node.id)
        elif isinstance(node, ast.arg):
            local.add(node.arg)
    modules = {name for name, mod in aliases.items()
               if name in JIT_MODULES or mod in ("triton", "triton.language", "math")
               or mod.startswith("triton.language")}
    allowed = local | jit_fns | constants | modules | JIT_BUILTINS | {fn.name}
    for node in body:
        if isinstance(node, JIT_BANNED_NODES) or (isinstance(node, ast.FunctionDef)):
            return StaticFinding("jit_body_disallowed", f"@triton.jit '{fn.name}' contains a "
                                 f"{type(node).__name__} statement: kernels are Triton code only")
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in allowed:
            return StaticFinding("jit_body_disallowed", f"@triton.jit '{fn.name}' uses '{node.id}', which is "
                                 "not tl, triton, a parameter, a local, a constant or another jit function")
        if isinstance(node, ast.Attribute) and node.attr in JIT_BANNED_ATTRS:
            return StaticFinding("jit_body_disallowed", f"@triton.jit '{fn.name}' reads .{node.attr} (the "
                                 "interpreter's raw buffers)")
    return None
