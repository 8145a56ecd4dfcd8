"""The host productions: ``launch`` (and a training variant's ``launch_forward``/``launch_backward``),
``constraints`` and plain helpers, typed so that tensors are used only as kernel arguments, templates,
views and shape reads (the package docstring states them)."""

from __future__ import annotations

import ast

from warpforge.evaluator.static.grammar.rules import (
    ALLOC_CALLS,
    DTYPES,
    HOST_BUILTINS,
    HOST_ERRORS,
    LAUNCHERS,
    MATH_CALLS,
    MATH_VALUES,
    SHAPE_RESULTS,
    TEMPLATE_ARG,
    TENSOR_ALLOC,
    TENSOR_ATTRS,
    TENSOR_METHODS,
    TORCH_VALUES,
    TRITON_CALLS,
    GrammarError,
    GrammarView,
    dotted_name,
    refuse,
)


class HostCheck:
    """Host code (launch, constraints, helpers) against the host productions."""

    def __init__(self, grammar: GrammarView, fn: ast.FunctionDef) -> None:
        self.g, self.fn = grammar, fn
        args = fn.args
        self.locals = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs] if a}
        self.locals |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        self.read_only: set[int] = set()  # ids of Name nodes in a read-only position (`v in NAME`, len(NAME))
        self.module_names = set(grammar.modules) | grammar.constants | grammar.jit | grammar.host | set(grammar.aliases)
        # locals bound to a ``lambda META: (...)`` grid: used only as ``kernel[NAME]`` (checked there, per kernel)
        self.grid_lambdas: dict[str, ast.Lambda] = {}
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
        self.tensors |= {
            a.arg for a in positional[n_plain:] if a.arg not in self.g.space_keys() or a in args.posonlyargs
        }
        if args.vararg is not None:
            self.tensors.add(args.vararg.arg)

    def fail(self, reason: str, node: ast.AST, what: str) -> GrammarError:
        line = getattr(node, "lineno", self.fn.lineno)
        return refuse(reason, f"line {line}: in {self.fn.name}: {what}")

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
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in self.g.aliases:
            return False  # an alias stands for a triton or tl function: no tensor comes out on the host
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
            raise self.fail(
                reason,
                node,
                f"{ast.unparse(node)[:60]} is a tensor, {what}: host code computes only "
                "on shapes and parameters; the values are the kernels' work",
            )

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
            values = (
                value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) else None
            )
            for i, e in enumerate(target.elts):
                self.bind(e, values[i] if values else None, tensor=values is None and self.is_tensor(value))
        else:
            raise self.fail(
                "host_statement",
                target,
                f"assigns to {ast.unparse(target)[:60]}: host code binds "
                "local names only (no attribute or element stores: hooks and in-place compute)",
            )

    def stmt(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            target = node.targets[0]
            if (
                len(node.targets) != 1
                or not isinstance(target, ast.Name)
                or target.id in self.module_names
                or target.id in self.locals
            ):
                raise self.fail(
                    "kernel_use",
                    node,
                    "a lambda is bound once, to a new local name, as a grid "
                    "(`grid = lambda META: (triton.cdiv(n, META['BLOCK']),)`)",
                )
            self.grid_lambdas[target.id] = node.value
        elif isinstance(node, ast.Assign):
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
        elif (
            isinstance(node, ast.Raise)
            and node.cause is None
            and isinstance(node.exc, ast.Call)
            and isinstance(node.exc.func, ast.Name)
            and node.exc.func.id in HOST_ERRORS
            and not node.exc.keywords
        ):
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
                raise self.fail(
                    "host_statement",
                    node,
                    f"the expression statement {ast.unparse(node)[:60]}: a "
                    "bare expression in host code is a kernel launch `kernel[grid](...)`",
                )
        else:
            raise self.fail(
                "host_statement",
                node,
                f"a {type(node).__name__} statement: host code is assignments, "
                "if, for, assert, raise, return and kernel launches (no while, with, try, import, "
                "def, lambda, global, del)",
            )

    def message(self, node: ast.expr) -> None:
        if isinstance(node, ast.JoinedStr):
            for part in node.values:
                if isinstance(part, ast.FormattedValue):
                    self.untensored(part.value, "formatted into a message (formatting reads its values)", "host_read")
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
            if node.id in self.grid_lambdas:
                raise self.fail(
                    "kernel_use",
                    node,
                    f"the grid lambda {node.id} used as a value: it appears only as kernel[{node.id}](...)",
                )
            if node.id in self.g.mutable and node.id not in self.locals and id(node) not in self.read_only:
                raise self.fail(
                    "host_name",
                    node,
                    f"{node.id} is a list, dict or set bound at module level: host "
                    "code reads it only as `v in NAME` or len(NAME) (an alias of it would carry state "
                    "from one call to the next: `c = NAME; c += [1]`)",
                )
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
            self.read_only |= {
                id(c)
                for op, c in zip(node.ops, node.comparators)
                if isinstance(op, (ast.In, ast.NotIn)) and isinstance(c, ast.Name)
            }
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
                raise self.fail(
                    "kernel_use",
                    node,
                    f"{node.value.id}[...] outside a launch: a kernel is used only as kernel[grid](args)",
                )
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
                raise self.fail(
                    "kernel_use",
                    node,
                    "a launch used as a value: kernel[grid](args) is a statement "
                    "(its result is the compiled kernel, with its hooks)",
                )
            self.call(node)
        else:
            raise self.fail(
                "host_statement",
                node,
                f"a {type(node).__name__} expression "
                f"({ast.unparse(node)[:60]}): not part of the host grammar (no lambda, comprehension, "
                "f-string outside messages, walrus, await or yield)",
            )

    def _name_use(self, name: str) -> str:
        if name in self.g.aliases:
            return f"the alias {name} (of {self.g.aliases[name]}) used as a value: functions are only called"
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
        dotted = dotted_name(node)
        canonical = self.g.canonical(node)
        if canonical:
            module = canonical.rpartition(".")[0]
            allowed = {"torch": TORCH_VALUES, "triton.language": DTYPES, "math": MATH_VALUES}.get(module, set())
            if node.attr in allowed:
                return
            raise self.fail(
                "host_name",
                node,
                f"{dotted} as a value: host code names only dtypes "
                "(torch.float16, tl.float32) and math constants; functions are only called",
            )
        if isinstance(node.value, ast.Name) and node.value.id in self.g.jit:
            raise self.fail(
                "kernel_use", node, f"{dotted}: a kernel's attributes (hooks, run, warmup) are not part of a variant"
            )
        if node.attr not in TENSOR_ATTRS:
            raise self.fail(
                "host_name",
                node,
                f".{node.attr} as a value: host code reads only "
                f"{', '.join(sorted(TENSOR_ATTRS))} (a bound method would be a callable value)",
            )
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
                raise self.fail(
                    "kernel_use",
                    node,
                    "a launch outside launch(): constraints and helpers compute on shape values only",
                )
            if not (isinstance(func.value, ast.Name) and func.value.id in self.g.jit):
                raise self.fail(
                    "kernel_use",
                    node,
                    f"{ast.unparse(func)[:60]}(...): only a @triton.jit function "
                    "of this module is launched with [grid]",
                )
            self.launch_args(func.value.id, node)
            self.grid(func.slice, func.value.id, node)
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
            if func.id in self.g.aliases:
                self.allowlisted_call(node, func.id, self.g.aliases[func.id])
                return
            if func.id in self.g.jit:
                raise self.fail(
                    "kernel_use", node, f"{func.id}(...) without a grid: launch kernels as {func.id}[grid](...)"
                )
            raise self.fail(
                "host_name",
                node,
                f"calls {func.id}(): host code calls triton.cdiv, "
                "triton.next_power_of_2, math functions, torch allocation, the builtins "
                f"{', '.join(sorted(HOST_BUILTINS))} and its own helpers",
            )
        if not isinstance(func, ast.Attribute):
            raise self.fail("host_name", node, f"calls {ast.unparse(func)[:60]}: not a name of the host grammar")
        dotted = dotted_name(func)
        canonical = self.g.canonical(func)
        if canonical:
            self.allowlisted_call(node, dotted or "", canonical)
            return
        if isinstance(func.value, ast.Name) and func.value.id in self.g.jit:
            raise self.fail(
                "kernel_use",
                node,
                f"{dotted}(): a kernel's methods (add_pre_run_hook, run, warmup) are not part of a variant",
            )
        self.expr(func.value)  # the receiver first: np.asarray(x) is about np, not asarray
        if func.attr not in TENSOR_METHODS:
            raise self.fail(
                "torch_compute_call",
                node,
                f".{func.attr}() on a value: host code may call only "
                f"{', '.join(sorted(TENSOR_METHODS))}; compute belongs in a @triton.jit kernel",
            )
        self.shape_args(node, func.attr)

    def allowlisted_call(self, node: ast.Call, dotted: str, canonical: str) -> None:
        """A call of a module's function (``torch.empty``, ``triton.cdiv``, ``math.ceil``), written out or through
        an alias (``cdiv = triton.cdiv``): the same allowlist either way."""
        module, _, attr = canonical.rpartition(".")
        allowed = {"torch": ALLOC_CALLS, "triton": TRITON_CALLS, "math": MATH_CALLS}.get(module, set())
        if attr in allowed:
            if module == "torch" and attr in TENSOR_ALLOC and not self.entry:
                raise self.fail(
                    "tensor_use",
                    node,
                    f"{dotted}() outside launch(): constraints and helpers "
                    "compute on shape values only (no allocation)",
                )
            self.shape_args(node, attr if module == "torch" else "")
            return
        raise self.fail(
            "torch_compute_call" if module == "torch" else "host_name",
            node,
            f"calls {dotted}(): host code may call torch.{{{', '.join(sorted(ALLOC_CALLS))}}}, "
            f"triton.cdiv/next_power_of_2 and math.{{{', '.join(sorted(MATH_CALLS))}}} only",
        )

    def launch_args(self, kernel: str, node: ast.Call) -> None:
        """[kernel_argument] a tensor reaches only a pointer parameter (one without tl.constexpr: under the
        interpreter a constexpr receives the object itself, and a torch tensor there is torch computing inside
        the kernel); a constexpr gets a literal, a SPACE parameter, a shape integer or arithmetic on them; no
        argument is a list, dict or set (no kernel parameter receives one)."""
        names, constexprs = self.g.jit_params.get(kernel, ([], set()))
        given: list[tuple[str | None, ast.expr]] = []
        for i, a in enumerate(node.args):
            if isinstance(a, ast.Starred):
                raise self.fail(
                    "kernel_argument",
                    a,
                    f"*{ast.unparse(a.value)[:40]} in a launch of {kernel}: "
                    "pass each kernel argument by position or name",
                )
            given.append((names[i] if i < len(names) else None, a))
        for kw in node.keywords:
            if kw.arg is None:
                raise self.fail(
                    "kernel_argument",
                    kw.value,
                    f"**{ast.unparse(kw.value)[:40]} in a launch of {kernel}: pass each kernel argument by name",
                )
            given.append((kw.arg, kw.value))
        for name, value in given:
            if isinstance(value, (ast.List, ast.Dict, ast.Set)):
                raise self.fail(
                    "kernel_argument",
                    value,
                    f"{ast.unparse(value)[:40]} passed to {kernel}: a kernel "
                    "argument is a tensor, a scalar or a tuple, never a list, dict or set",
                )
            if name in constexprs and self.is_tensor(value):
                raise self.fail(
                    "constexpr_tensor",
                    value,
                    f"the tensor {ast.unparse(value)[:40]} passed to {kernel}'s "
                    f"tl.constexpr parameter {name}: a tensor goes only to a pointer parameter (a "
                    "constexpr gets a literal, a SPACE parameter or arithmetic on shapes)",
                )

    def shape_args(self, node: ast.Call, name: str) -> None:
        """[tensor_use] an allowlisted call takes shape values; only the template of ``*_like``/``view_as``
        (its first positional argument) is a tensor (``triton.cdiv(x, 1)`` computed on x, a tensor size or
        fill value is read on the host)."""
        args = [a.value if isinstance(a, ast.Starred) else a for a in node.args]
        if name in TEMPLATE_ARG and args and not isinstance(node.args[0], ast.Starred):
            args = args[1:]
        for a in [*args, *(k.value for k in node.keywords)]:
            self.untensored(
                a,
                f"passed to {name or dotted_name(node.func)}() (it takes shape values; only a "
                "*_like/view_as template is a tensor)",
            )

    def grid(self, node: ast.expr, kernel: str = "", launch: ast.Call | None = None) -> None:
        """[kernel_use] a grid is a tuple of arithmetic, a local holding one, or ``lambda META: (...)`` (written
        there or bound to a local) whose tuple reads ``META["NAME"]`` only for a parameter of the launched kernel
        that gets no tensor (check_grid_lambda)."""
        if isinstance(node, ast.Name) and node.id in self.grid_lambdas:
            node = self.grid_lambdas[node.id]
        if isinstance(node, ast.Lambda):
            check_grid_lambda(self, node, kernel, launch)
            return
        if isinstance(node, ast.Tuple):
            for e in node.elts:
                self.untensored(e, "in a grid (a grid is read on the host)", "host_read")
                self.expr(e)
            return
        if isinstance(node, ast.Name) and node.id in self.locals:
            self.untensored(node, "used as a grid (a grid is read on the host)", "host_read")
            return  # a local holds a value of this grammar, never a callable
        raise self.fail(
            "kernel_use",
            node,
            f"grid {ast.unparse(node)[:60]}: a grid is a tuple of arithmetic on "
            "shapes and parameters (no lambda, no function)",
        )


class LambdaCheck(HostCheck):
    """One lambda's body as host code, its parameter read only as ``PARAM["KEY"]`` for the keys given
    (each mapped to whether it is a tensor)."""

    def __init__(
        self, outer: HostCheck | None, g: GrammarView, lam: ast.Lambda, keys: dict[str, bool], what: str
    ) -> None:
        args = lam.args
        if args.posonlyargs or args.kwonlyargs or args.vararg or args.kwarg or args.defaults or len(args.args) != 1:
            raise refuse(
                "kernel_use" if what == "grid" else "decorator",
                f"line {lam.lineno}: {ast.unparse(lam)[:60]}: a {what} lambda takes one parameter "
                "(`lambda META: ...`), no defaults",
            )
        fn = ast.FunctionDef(
            name=f"a {what} lambda",
            args=ast.arguments(
                posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
            ),
            body=[],
            decorator_list=[],
            returns=None,
            type_comment=None,
            lineno=lam.lineno,
            col_offset=lam.col_offset,
        )
        super().__init__(g, fn)
        self.param = args.args[0].arg
        self.keys = keys
        self.what = what
        if outer is not None:  # a grid lambda reads launch's locals (a closure)
            self.locals |= outer.locals
            self.tensors |= outer.tensors
        if self.param in self.module_names or self.param in self.locals:
            raise self.fail("host_name", lam, f"the lambda's parameter {self.param} shadows a name")

    def key(self, node: ast.AST) -> str | None:
        """``KEY`` when ``node`` is ``PARAM["KEY"]``."""
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == self.param:
            if (
                isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
                and node.slice.value in self.keys
            ):
                return node.slice.value
            raise self.fail(
                "kernel_use" if self.what == "grid" else "decorator",
                node,
                f'{ast.unparse(node)[:60]}: a {self.what} lambda reads {self.param}["NAME"] only for '
                f"{', '.join(sorted(self.keys)) or 'no name'}",
            )
        return None

    def is_tensor(self, node: ast.AST | None) -> bool:
        name = self.key(node) if node is not None else None
        if name is not None:
            return self.keys[name]
        return super().is_tensor(node)

    def expr(self, node: ast.expr) -> None:
        if self.key(node) is not None:
            return
        if isinstance(node, ast.Name) and node.id == self.param:
            raise self.fail(
                "kernel_use" if self.what == "grid" else "decorator",
                node,
                f'{self.param} used as a value: a {self.what} lambda reads only {self.param}["NAME"]',
            )
        super().expr(node)


def check_grid_lambda(host: HostCheck, lam: ast.Lambda, kernel: str, launch: ast.Call | None) -> None:
    """[kernel_use] ``kernel[lambda META: (...)](...)``: each element host arithmetic on launch's locals and
    ``META["P"]`` for P a parameter of ``kernel`` that the launch (or the autotuner) gives no tensor."""
    names, constexprs = host.g.jit_params.get(kernel, ([], set()))
    given: dict[str, ast.expr] = {}
    if launch is not None:
        given = {names[i]: a for i, a in enumerate(launch.args) if i < len(names)}
        given |= {k.arg: k.value for k in launch.keywords if k.arg is not None}
    keys = {p: p not in constexprs and p in given and host.is_tensor(given[p]) for p in names}
    keys = {p: tensor for p, tensor in keys.items() if not tensor}
    check = LambdaCheck(host, host.g, lam, keys, "grid")
    if not isinstance(lam.body, ast.Tuple) or not lam.body.elts:
        raise check.fail(
            "kernel_use",
            lam,
            f"grid {ast.unparse(lam)[:60]}: a grid lambda returns a tuple "
            "(`lambda META: (triton.cdiv(n, META['BLOCK']),)`)",
        )
    for e in lam.body.elts:
        check.untensored(e, "in a grid (a grid is read on the host)", "host_read")
        check.expr(e)
