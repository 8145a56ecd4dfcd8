"""The module and kernel productions: imports, the everywhere-rules, module statements (constants, SPACE,
signatures) and ``@triton.jit`` bodies; ``Grammar.check`` runs them, then the host and ModelNew checks."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from warpforge.evaluator.static.grammar.host import HostCheck
from warpforge.evaluator.static.grammar.idioms import (
    check_decorators,
    decorator_nodes,
    decorator_prefix,
)
from warpforge.evaluator.static.grammar.model_new import check_class, check_methods, exempt_nodes
from warpforge.evaluator.static.grammar.rules import (
    ALIAS_REFUSED,
    ALLOC_CALLS,
    ANNOTATION_TYPES,
    DTYPES,
    DYNAMIC_CALLS,
    FORBIDDEN_NAMES,
    FUTURE,
    HOST_READS,
    IMPORTS,
    JIT_BANNED_ATTRS,
    JIT_BANNED_NODES,
    JIT_BUILTINS,
    JIT_NAMESPACES,
    JIT_OPTIONS,
    LIBDEVICE,
    LIBDEVICE_PARENTS,
    MATH_VALUES,
    TORCH_VALUES,
    TRITON_CALLS,
    GrammarError,
    dotted_name,
    is_callable,
    is_module,
    jit_value_attrs,
    parse_limited,
    refuse,
    rewrite_hint,
)
from warpforge.kernels.autotune_space import autotune_space
from warpforge.kernels.space_values import SpaceRefused, space_from_node


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
        # module-level names that stand for a function of a kernel namespace or a triton helper ("tanh" ->
        # "triton.language.extra.libdevice.tanh"): every use is checked as that dotted name's
        self.aliases: dict[str, str] = {}
        self.imported: set[str] = set()  # the aliases bound by ``from ...libdevice import NAME``

    def check(self) -> None:

        self._imports()
        self._aliases()
        self.exempt = exempt_nodes(self)
        for fn in self._functions():
            self.exempt |= decorator_nodes(self, fn)
        self._everywhere()
        self._collect()
        for fn in self._functions():
            if fn.name in self.jit:
                self._jit_body(fn)
        self._module()
        for fn in self._functions():
            check_decorators(self, fn)
        try:  # the configurations become the variant's space (kernels/autotune_space.py)
            autotune_space(self.tree)
        except SpaceRefused as exc:
            raise refuse("decorator", str(exc)) from None
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
                if (
                    node.module == "torch"
                    and node.level == 0
                    and [(a.name, a.asname) for a in node.names] == [("nn", None)]
                ):  # `from torch import nn`: the same binding as `import torch.nn as nn`
                    self.modules["nn"] = "torch.nn"
                    continue
                if node.level == 0 and self._libdevice_import(node):
                    continue
                hint = (
                    rewrite_hint(node.module, *(a.name for a in node.names))
                    if (node.module or "").partition(".")[0] == "triton" and node.level == 0
                    else ""
                )
                raise refuse(
                    "forbidden_import",
                    f"line {node.lineno}: from {node.module or '.'} import ...: a "
                    "variant imports only with `import torch`, `import triton`, `import math` and "
                    "`import triton.language as tl`" + hint,
                )
            if not isinstance(node, ast.Import):
                continue
            for alias in node.names:
                if (
                    (alias.name, alias.asname) in IMPORTS
                    or (alias.name, None) in IMPORTS
                    and alias.asname == alias.name
                ):
                    self.modules[alias.asname or alias.name] = alias.name
                    continue
                if alias.name in {name for name, _ in IMPORTS}:
                    raise refuse(
                        "module_alias",
                        f"line {node.lineno}: `import {alias.name} as {alias.asname}`: "
                        "modules keep their own names (an alias hides what is reached through it)",
                    )
                hint = rewrite_hint(alias.name) if alias.name.partition(".")[0] == "triton" else ""
                raise refuse(
                    "forbidden_import",
                    f"line {node.lineno}: imports {alias.name}: a variant may import "
                    "only torch, triton, math and triton.language as tl" + hint,
                )

    def _libdevice_import(self, node: ast.ImportFrom) -> bool:
        """[forbidden_import] ``from triton.language.extra[.cuda] import libdevice`` binds the module;
        ``from triton.language.extra[.cuda].libdevice import rsqrt, tanh as th`` binds aliases of its functions
        (each a public function of that module, checked where it is used as ``libdevice.NAME`` would be)."""
        names = [(a.name, a.asname) for a in node.names]
        if node.module in LIBDEVICE_PARENTS and names == [("libdevice", None)]:
            self.modules["libdevice"] = f"{node.module}.libdevice"
            return True
        if node.module not in LIBDEVICE:
            return False
        for name, asname in names:
            canonical = f"{node.module}.{name}"
            if name == "*" or name.startswith("_") or is_module(canonical) or not is_callable(canonical):
                raise refuse(
                    "forbidden_import",
                    f"line {node.lineno}: from {node.module} import {name}: only its "
                    "public functions are imported by name",
                )
            self.aliases[asname or name] = canonical
            self.imported.add(asname or name)
        return True

    def _aliases(self) -> None:
        """[module_constant] ``NAME = tl.exp``, ``tanh = libdevice.tanh``, ``cdiv = triton.cdiv``: a module-level
        name bound to a function of a kernel namespace (JIT_NAMESPACES) or to triton.cdiv/next_power_of_2 is an
        alias; every use of it is checked as the dotted name it stands for would be (``canonical``). A module,
        a value that is not a function, torch's or anything else stays a literal's production."""
        for node in self.tree.body:
            if not (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Attribute)
            ):
                continue
            canonical = self.canonical(node.value)
            namespace, _, attr = canonical.rpartition(".")
            if (
                namespace == "triton"
                and attr in TRITON_CALLS
                or namespace in JIT_NAMESPACES
                and namespace != "math"
                and not attr.startswith("_")
                and not is_module(canonical)
                and is_callable(canonical)
                and canonical not in ALIAS_REFUSED
            ):
                if node.targets[0].id in self.imported:
                    raise refuse("rebinding", f"line {node.lineno}: {node.targets[0].id} is imported and bound again")
                self.aliases[node.targets[0].id] = canonical

    # -- rules that hold in every production ----------------------------------------------------
    def _everywhere(self) -> None:
        for node in ast.walk(self.tree):
            if id(node) in self.exempt:
                continue
            if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                raise refuse(
                    "private_access",
                    f"line {node.lineno}: the private attribute .{node.attr}: a variant "
                    "may not reach interpreter, torch or harness internals",
                )
            if isinstance(node, ast.Name) and (node.id in FORBIDDEN_NAMES or node.id.startswith("__")):
                raise refuse("dynamic_access", f"line {node.lineno}: uses {node.id}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in DYNAMIC_CALLS:
                raise refuse(
                    "dynamic_access",
                    f"line {node.lineno}: calls {node.func.id}(): a variant may not look "
                    "up, open or run code dynamically",
                )
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                attr = node.func.attr
                to_cpu = attr == "to" and (
                    any(isinstance(a, ast.Constant) and a.value == "cpu" for a in node.args)
                    or any(
                        k.arg == "device" and isinstance(k.value, ast.Constant) and k.value.value == "cpu"
                        for k in node.keywords
                    )
                )
                if attr in HOST_READS or to_cpu:
                    raise refuse(
                        "host_read",
                        f"line {node.lineno}: .{attr}(){' to the CPU' if to_cpu else ''}: "
                        "reading tensor memory on the host is computing outside the kernels",
                    )
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                module = self.modules.get(node.value.id)
                if module == "torch" and node.attr not in TORCH_VALUES | ALLOC_CALLS:
                    raise refuse(
                        "torch_compute_call",
                        f"line {node.lineno}: torch.{node.attr}: host code may use "
                        "torch only to allocate (" + ", ".join(sorted(ALLOC_CALLS)) + ") and name dtypes",
                    )
                if module == "torch.nn":
                    raise refuse(
                        "torch_compute_call",
                        f"line {node.lineno}: nn.{node.attr}: nn names only ModelNew's "
                        "base (nn.Module), nn.Parameter and parameter-holding modules built in its __init__ "
                        "(never called: their computation is torch's)",
                    )
                if module == "triton" and node.attr not in TRITON_CALLS | {"jit", "language"}:
                    raise refuse(
                        "forbidden_import",
                        f"line {node.lineno}: triton.{node.attr}: only triton.jit, "
                        "triton.cdiv, triton.next_power_of_2 and triton.language are part of a variant"
                        + rewrite_hint(node.attr),
                    )

    # -- module statements -------------------------------------------------------------------------
    def _collect(self) -> None:
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef):
                (self.jit if node.decorator_list else self.host).add(node.name)
                if node.decorator_list:
                    a = node.args
                    params = [p for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
                    self.jit_params[node.name] = (
                        [p.arg for p in params],
                        {p.arg for p in params if p.annotation is not None and self.is_constexpr(p.annotation)},
                    )

    def is_constexpr(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value.replace(" ", "").split(".")[-1] == "constexpr"
        return self.canonical(node) == "triton.language.constexpr"

    def _module(self) -> None:
        bound: dict[str, int] = {name: 0 for name in self.modules}
        bound |= {name: 0 for name in self.imported}
        for node in self.tree.body:
            names: list[str] = []
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if (
                isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                continue
            if isinstance(node, ast.FunctionDef):
                self.signature(node)
                names = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if isinstance(node, ast.AnnAssign) and not self._annotation(node.annotation):
                    # a module-level annotation is evaluated at import: `X: <any call> = 1` ran that call
                    raise refuse(
                        "module_constant",
                        f"line {node.lineno}: the annotation "
                        f"{ast.unparse(node.annotation)[:40]}: annotations are names, literals or "
                        "tl.constexpr",
                    )
                if len(targets) != 1 or not isinstance(targets[0], ast.Name) or node.value is None:
                    raise refuse(
                        "module_constant", f"line {node.lineno}: a module-level assignment binds one name to a literal"
                    )
                if targets[0].id in self.aliases:  # checked where it is used, as the name it stands for
                    names = [targets[0].id]
                    self._bind_once(node, names, bound)
                    continue
                if targets[0].id == "SPACE":  # typed from the tree: it becomes JSON, Optuna choices, stored rows
                    try:
                        space_from_node(node.value)
                    except SpaceRefused as exc:
                        raise refuse(exc.reason, f"line {node.lineno}: {exc}") from None
                if not self._literal(node.value):
                    raise refuse(
                        "module_constant",
                        f"line {node.lineno}: {targets[0].id} = "
                        f"{ast.unparse(node.value)[:60]}: module-level values are literals, arithmetic on "
                        "earlier constants, or dtypes",
                    )
                names = [targets[0].id]
            elif isinstance(node, ast.ClassDef) and node.name == "ModelNew":
                check_class(self, node)
                names = [node.name]
            elif isinstance(node, ast.ClassDef):
                raise refuse(
                    "module_statement",
                    f"line {node.lineno}: class {node.name}: a variant defines no "
                    "classes but KernelBench's `class ModelNew(nn.Module)`",
                )
            else:
                raise refuse(
                    "module_statement",
                    f"line {node.lineno}: a {type(node).__name__} statement at module "
                    "level: a variant module holds imports, literal constants, SPACE, constraints, "
                    "@triton.jit functions and launch only",
                )
            self._bind_once(node, names, bound)
            for name in names:
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    self.constants.add(name)
                    if not self._immutable(node.value):
                        self.mutable.add(name)

    def _bind_once(self, node: ast.stmt, names: list[str], bound: dict[str, int]) -> None:
        """[rebinding] each module-level name once (imported aliases included)."""
        for name in names:
            if name in bound:
                raise refuse(
                    "rebinding",
                    f"line {node.lineno}: {name} is bound twice at module level: each "
                    "name (jit functions and aliases included) is defined once",
                )
            bound[name] = node.lineno

    def signature(self, fn: ast.FunctionDef) -> None:
        prefix = len(decorator_prefix(self, fn))  # autotune, heuristics: grammar/idioms.py
        for dec in fn.decorator_list[prefix:]:
            call = dec if isinstance(dec, ast.Call) else None
            target = call.func if call else dec
            if dotted_name(target) != "triton.jit" or len(fn.decorator_list) != prefix + 1:
                name = (dotted_name(target) or "").rpartition(".")[2]
                raise refuse(
                    "decorator",
                    f"line {fn.lineno}: @{ast.unparse(dec)[:60]} on {fn.name}: a kernel is "
                    "decorated @triton.jit, last, with @triton.autotune(configs=..., key=...) and "
                    "@triton.heuristics({...}) above it in that order" + rewrite_hint(name),
                )
            if call and (
                call.args or any(k.arg not in JIT_OPTIONS or not self._literal(k.value) for k in call.keywords)
            ):
                raise refuse(
                    "decorator",
                    f"line {fn.lineno}: @triton.jit(...) takes only literal {', '.join(sorted(JIT_OPTIONS))}",
                )
        args = fn.args
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            if not self._literal(default) or not self._immutable(default):
                raise refuse(
                    "module_constant",
                    f"line {fn.lineno}: {fn.name}'s default {ast.unparse(default)[:40]} is not a literal",
                )
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if a is not None and a.annotation is not None and not self._annotation(a.annotation):
                raise refuse(
                    "module_statement",
                    f"line {fn.lineno}: annotation {ast.unparse(a.annotation)[:40]} "
                    f"of {fn.name}: annotations are names or tl.constexpr",
                )
        if fn.returns is not None and not self._annotation(fn.returns):
            raise refuse(
                "module_statement",
                f"line {fn.lineno}: {fn.name}'s return annotation "
                f"{ast.unparse(fn.returns)[:40]}: annotations are int, float, bool, str, tuple, dict, "
                "tl.tensor, tl.constexpr, tl.dtype or a string",
            )

    def _immutable(self, node: ast.AST | None) -> bool:
        """No list, dict or set display in ``node``, nor a mutable constant: a default or a module constant
        outlives the call, and ``calls += [1]`` on one counted calls (state across calls)."""
        return (
            not any(
                isinstance(n, (ast.List, ast.Dict, ast.Set)) or isinstance(n, ast.Name) and n.id in self.mutable
                for n in ast.walk(node)
            )
            if node is not None
            else True
        )

    def _annotation(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return True
        if isinstance(node, ast.Name):
            return node.id in {"int", "float", "bool", "str", "dict", "tuple"}
        # Triton's value types (``-> tl.tensor`` on a jit helper) are names, read once when the def runs
        return self.canonical(node) in ANNOTATION_TYPES or self._literal(node)

    def _literal(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return all(self._literal(e) for e in node.elts)
        if isinstance(node, ast.Dict):
            return all(k is not None and self._literal(k) for k in node.keys) and all(
                self._literal(v) for v in node.values
            )
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
            return (
                self.canonical(node.func) == "triton.language.constexpr"
                and not node.keywords
                and all(self._literal(a) for a in node.args)
            )
        return False

    def space_keys(self) -> set[str]:
        """The string keys of a module-level ``SPACE = {...}`` dict literal (the tuning parameters)."""
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and [dotted_name(t) for t in node.targets] == ["SPACE"]:
                # a dict of lists, or a list of configurations (each a dict: its keys are launch's keywords)
                tables = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
                return {
                    k.value
                    for d in tables
                    if isinstance(d, ast.Dict)
                    for k in d.keys
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)
                }
        return set()

    def canonical(self, node: ast.AST) -> str:
        """The dotted name with its first part resolved to the module it names ("tl.float32" ->
        "triton.language.float32"); "" when the base is not an imported module."""
        dotted = dotted_name(node)
        if dotted is None:
            return ""
        first, _, rest = dotted.partition(".")
        if first in self.aliases:  # a function alias has no members: ``tanh.fn`` is no dotted name of the grammar
            return "" if rest else self.aliases[first]
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
        modules = {
            name
            for name, mod in self.modules.items()
            if mod in ("triton", "triton.language", "math") or mod in LIBDEVICE
        }
        # scalar constants only: a list, dict or set would be Python state under the interpreter
        # (``CALLS.append(1)`` in a kernel counted calls); ``_MODE: tl.constexpr = tl.constexpr(0)`` is one
        constants = {
            name
            for name, value in self._module_values()
            if name not in self.aliases and self._literal_early(value) and name not in self._mutable_early()
        }
        allowed = local | self.jit | constants | modules | set(self.aliases) | JIT_BUILTINS | {fn.name}
        parent = {id(child): node for node in body for child in ast.iter_child_nodes(node)}
        for node in body:
            if isinstance(node, JIT_BANNED_NODES):
                raise refuse(
                    "jit_body_disallowed",
                    f"line {node.lineno}: @triton.jit '{fn.name}' contains a "
                    f"{type(node).__name__} statement: kernels are Triton code only",
                )
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
                self._jit_name_use(fn, node, parent.get(id(node)))
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in allowed:
                raise refuse(
                    "jit_body_disallowed",
                    f"line {node.lineno}: @triton.jit '{fn.name}' uses "
                    f"'{node.id}', which is not tl, triton, a parameter, a local, a constant or another "
                    "jit function (names the interpreter injects, such as np, are not)",
                )
            if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, ast.Store):
                raise refuse(
                    "jit_body_disallowed",
                    f"line {node.lineno}: @triton.jit '{fn.name}' stores into "
                    f"{ast.unparse(node)[:40]}: a kernel binds local names only (stores go through tl.store)",
                )
            if isinstance(node, ast.Attribute) and (
                isinstance(node.value, ast.Constant)
                or isinstance(node.value, ast.Name)
                and node.value.id in self.jit | set(self.aliases)
            ):
                raise refuse(
                    "jit_body_disallowed",
                    f"line {node.lineno}: @triton.jit '{fn.name}' reads "
                    f"{ast.unparse(node)[:40]}: a jit function or an alias of one is only called, a string "
                    "has no methods in a kernel",
                )
            if isinstance(node, ast.Attribute) and self.canonical(node):
                self._jit_member(fn, node, parent.get(id(node)))
            elif isinstance(node, ast.Attribute) and node.attr not in jit_value_attrs():
                raise refuse(
                    "jit_body_disallowed",
                    f"line {node.lineno}: @triton.jit '{fn.name}' reads "
                    f".{node.attr}: a kernel reads only the attributes of Triton tensors, dtypes and "
                    "constexprs (shape, dtype, to, ...)",
                )
            if isinstance(node, ast.Attribute) and node.attr in JIT_BANNED_ATTRS:
                raise refuse(
                    "jit_body_disallowed",
                    f"line {node.lineno}: @triton.jit '{fn.name}' reads .{node.attr} (the interpreter's raw buffers)",
                )

    def _jit_name_use(self, fn: ast.FunctionDef, node: ast.Name, parent: ast.AST | None) -> None:
        """[jit_body_disallowed] a module is named only as the base of a member (``l = tl`` then
        ``l.core.builtins.exec`` reached Python's builtins), a builtin only as a callee, a jit function only
        as a callee or a call's argument (``tl.reduce(x, 0, combine)``), never bound to a local."""
        name = node.id
        callee = isinstance(parent, ast.Call) and parent.func is node
        argument = isinstance(parent, ast.Call) and node in parent.args or isinstance(parent, ast.keyword)
        if (
            name in self.modules
            and not (isinstance(parent, ast.Attribute) and parent.value is node)
            or name in JIT_BUILTINS
            and not callee
            or (name in self.jit or name in self.aliases)
            and not (callee or argument)
        ):
            raise refuse(
                "jit_body_disallowed",
                f"line {node.lineno}: @triton.jit '{fn.name}' uses {name} as a "
                "value: modules are named only as tl.member, builtins and jit functions only called",
            )

    def _jit_member(self, fn: ast.FunctionDef, node: ast.Attribute, parent: ast.AST | None) -> None:
        """[jit_body_disallowed] ``module.NAME`` in a kernel: the module is one of JIT_NAMESPACES and NAME is
        not itself a module, unless it is the namespace of an enclosing ``module.NAME.MEMBER``."""
        canonical = self.canonical(node)
        namespace = canonical.rpartition(".")[0]
        if namespace == "triton" and node.attr in TRITON_CALLS | {"jit"}:
            return
        if canonical in JIT_NAMESPACES and isinstance(parent, ast.Attribute) and parent.value is node:
            return
        if namespace in JIT_NAMESPACES and not is_module(canonical):
            called = (
                isinstance(parent, ast.Call)
                and (parent.func is node or node in parent.args)
                or isinstance(parent, ast.keyword)
                or isinstance(parent, ast.AnnAssign)
                and parent.annotation is node
            )
            if called or not is_callable(canonical):
                return  # a function is called or passed; a value (tl.float32, math.pi) is a value
            raise refuse(
                "jit_body_disallowed",
                f"line {node.lineno}: @triton.jit '{fn.name}' binds "
                f"{ast.unparse(node)[:40]} as a value: functions of tl are only called (`s = tl.sum` then "
                "s.fn, s.cache, s.add_pre_run_hook reach Triton's objects)",
            )
        raise refuse(
            "jit_body_disallowed",
            f"line {node.lineno}: @triton.jit '{fn.name}' names "
            f"{ast.unparse(node)[:40]}: a kernel uses members of tl, tl.math, tl.extra.cuda.libdevice "
            "and math only (no module as a value, no other module)",
        )

    def _mutable_early(self) -> set[str]:
        """Module names bound to a list, dict or set display, or to an earlier such name (``X = CALLS``)."""
        mutable: set[str] = set()
        for n in self.tree.body:
            if not isinstance(n, (ast.Assign, ast.AnnAssign)) or n.value is None:
                continue
            if any(
                isinstance(e, (ast.List, ast.Dict, ast.Set)) or isinstance(e, ast.Name) and e.id in mutable
                for e in ast.walk(n.value)
            ):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                mutable |= {t.id for t in targets if isinstance(t, ast.Name)}
        return mutable

    def _module_values(self) -> Iterator[tuple[str, ast.expr]]:
        """Each module-level ``NAME = value`` and ``NAME: annotation = value``."""
        for n in self.tree.body:
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                yield n.targets[0].id, n.value
            elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None:
                yield n.target.id, n.value

    def _literal_early(self, node: ast.AST) -> bool:
        """A literal judged before ``constants`` is filled (jit bodies are checked before module statements)."""
        if isinstance(node, ast.Name):
            return node.id not in self.aliases and any(name == node.id for name, _ in self._module_values())
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return all(self._literal_early(e) for e in node.elts)
        if isinstance(node, ast.BinOp):
            return self._literal_early(node.left) and self._literal_early(node.right)
        if isinstance(node, ast.UnaryOp):
            return self._literal_early(node.operand)
        return self._literal(node)


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
    return any(
        isinstance(node, ast.Attribute) and g.canonical(node) == target
        for fn in jit
        for stmt in fn.body
        for node in ast.walk(stmt)
    )
