"""KernelBench's answer format in the variant grammar: ONE ``class ModelNew(nn.Module)``.

The same allowlist discipline as the rest of the grammar (checked on the exact bytes that run, before any of them
runs); the finding's ``reason`` is the rule in brackets::

    model-new   := "class ModelNew(nn.Module):" docstring? init? forward                [model_new_class]
                   (one base, nn.Module; no decorator, metaclass or keyword; no class-level statement;
                   no method but ``__init__`` and ``forward``: ``load_state_dict``, ``_load_from_state_dict``,
                   ``__setattr__``, ``state_dict``, ``__call__`` are never ModelNew's, so the harness's own
                   nn.Module functions load the state and call it; no decorator on a method     [decorator])
    init        := def __init__(self, NAME*): init-stmt*                                   [model_new_init]
    init-stmt   := "super().__init__()" (first)
                 | self.NAME "=" nn.Parameter(torch.<empty|zeros|ones|randn|rand>(value, ...))
                 | self.NAME "=" nn.<PARAM_MODULES>(value, ..., key=value)
                 | self.register_buffer("NAME", torch.<empty|zeros|ones|randn|rand>(value, ...))
                 | self.NAME "=" value (no list, dict or set: state across timed calls)
                 | NAME "=" value | pass | docstring
                   (each self.NAME bound once, never a name nn.Module has: ``self.forward = ...``)
    value       := literal | parameter | local | module constant | arithmetic | comparison | tuple/list
                 | subscript | builtin or helper call on values | torch.<dtype>
    forward     := def forward(self, inputs..., **SPACE params): host code of ``launch``'s grammar
                   (grammar.HostCheck), where ``self.P`` (a parameter or buffer) and ``self.SUB.weight``
                   (a tensor of a parameter-holding submodule) are tensors usable only as kernel arguments
                   or for shapes/strides, ``self.V`` (a plain value) and ``self.SUB.in_features`` (a
                   hyperparameter) are shape values; a submodule is never called or named as a value:
                   ``self.gemm(x)`` is torch computing the answer                        [torch_compute_call]

Whatever ModelNew's ``__init__`` initialises, the harness (evaluator/sandbox/child/model_new.py) replaces its
whole state with the reference's before ``forward`` runs; a name the reference does not have is an error
that names the reference's names.

Example::

    >>> from warpforge.evaluator.static.grammar import check_module
    >>> src = "import torch.nn as nn\\nclass ModelNew(nn.Module):\\n    def forward(self, x):\\n        return x\\n"
    >>> check_module(src) is None
    True
"""

from __future__ import annotations

import ast
import functools

from warpforge.evaluator.static.grammar.host import HostCheck
from warpforge.evaluator.static.grammar.rules import DTYPES, HOST_BUILTINS, GrammarError, GrammarView, refuse

# Modules that hold parameters and are only ever built, never called (their forward is torch's compute).
PARAM_MODULES = {
    "Linear",
    "Bilinear",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "LayerNorm",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "Embedding",
    "RMSNorm",
}
TENSOR_CTORS = {"empty", "zeros", "ones", "randn", "rand"}
# A submodule's tensors (its state) and its hyperparameters (plain values the constructor stored).
SUB_TENSORS = {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}
SUB_VALUES = {
    "in_features",
    "out_features",
    "in1_features",
    "in2_features",
    "in_channels",
    "out_channels",
    "kernel_size",
    "stride",
    "padding",
    "dilation",
    "groups",
    "output_padding",
    "eps",
    "momentum",
    "normalized_shape",
    "num_groups",
    "num_channels",
    "num_features",
    "num_embeddings",
    "embedding_dim",
    "padding_idx",
    "affine",
    "elementwise_affine",
    "track_running_stats",
}


@functools.cache
def module_names() -> frozenset[str]:
    """Every attribute nn.Module has: ModelNew never binds one (``self.forward = ...``, ``self.training``)."""
    import torch

    return frozenset(dir(torch.nn.Module)) | frozenset(dir(torch.nn.Module()))  # instance ones: training


def _model_new(g: GrammarView) -> ast.ClassDef | None:
    return next((n for n in g.tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _is_super_init(stmt: ast.stmt) -> bool:
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    call = stmt.value
    func = call.func
    return (
        not call.args
        and not call.keywords
        and isinstance(func, ast.Attribute)
        and func.attr == "__init__"
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name)
        and func.value.func.id == "super"
        and not func.value.args
        and not func.value.keywords
    )


def _self_attr(node: ast.AST, me: str) -> str | None:
    """``NAME`` when ``node`` is ``self.NAME``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == me:
        return node.attr
    return None


def exempt_nodes(g: GrammarView) -> set[int]:
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
        elif (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and _self_attr(stmt.value.func, "self") == "register_buffer"
            and len(stmt.value.args) == 2
        ):
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


def check_class(g: GrammarView, cls: ast.ClassDef) -> None:
    """[model_new_class] the class statement and its body's shape (the methods are checked by check_methods)."""
    where = f"line {cls.lineno}: class ModelNew"
    if cls.decorator_list:
        raise refuse("decorator", f"{where}: a decorator on ModelNew (it could replace the class)")
    if cls.keywords:
        raise refuse(
            "model_new_class",
            f"{where}: keywords in the class statement (a metaclass runs code and "
            "shapes the class): ModelNew is `class ModelNew(nn.Module):`",
        )
    if len(cls.bases) != 1 or g.canonical(cls.bases[0]) != "torch.nn.Module":
        raise refuse("model_new_class", f"{where}: its one base is nn.Module (`import torch.nn as nn`)")
    seen: set[str] = set()
    for i, node in enumerate(cls.body):
        if (
            i == 0
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            continue
        if isinstance(node, ast.FunctionDef) and node.decorator_list:
            raise refuse(
                "decorator",
                f"line {node.lineno}: @{ast.unparse(node.decorator_list[0])[:40]} on "
                f"ModelNew.{node.name}: ModelNew's methods are plain (no property, staticmethod, jit)",
            )
        if not isinstance(node, ast.FunctionDef) or node.name not in {"__init__", "forward"} or node.name in seen:
            what = (
                f"def {node.name}"
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                else f"a {type(node).__name__} statement"
            )
            raise refuse(
                "model_new_class",
                f"line {node.lineno}: {what} in ModelNew: it defines only __init__ and "
                "forward, once each (the harness loads the state and calls it with nn.Module's own "
                "functions; no class attribute, no override)",
            )
        seen.add(node.name)
        args = node.args
        if (
            not args.args
            or args.posonlyargs
            or node.name == "__init__"
            and (args.vararg or args.kwarg or args.kwonlyargs)
        ):
            raise refuse(
                "model_new_class",
                f"line {node.lineno}: ModelNew.{node.name}'s parameters: "
                "`def __init__(self, a, b)` (the init inputs) and `def forward(self, x, ...)`",
            )
        g.signature(node)
    if "forward" not in seen:
        raise refuse("model_new_class", f"{where}: defines no forward(self, ...)")


def check_methods(g: GrammarView) -> None:
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

    def __init__(self, g: GrammarView, fn: ast.FunctionDef) -> None:
        self.g, self.fn = g, fn
        self.me = fn.args.args[0].arg
        self.locals = {a.arg for a in fn.args.args[1:]}
        self.state = ModelState()

    def fail(self, node: ast.AST, what: str, reason: str = "model_new_init") -> GrammarError:
        return refuse(reason, f"line {getattr(node, 'lineno', self.fn.lineno)}: in ModelNew.__init__: {what}")

    def check(self) -> ModelState:
        shadow = self.locals & (set(self.g.modules) | self.g.constants | self.g.jit | self.g.host)
        if shadow:
            raise self.fail(self.fn, f"parameter {sorted(shadow)[0]} shadows a module-level name", "host_name")
        body = [
            s
            for s in self.fn.body
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str))
        ]
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
                {"tensor": self.state.tensors, "module": self.state.submodules, "value": self.state.values}[kind].add(
                    name
                )
                return
        if (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and _self_attr(stmt.value.func, self.me) == "register_buffer"
        ):
            call = stmt.value
            name_node = call.args[0] if call.args else None
            if (
                len(call.args) != 2
                or call.keywords
                or not isinstance(name_node, ast.Constant)
                or not isinstance(name_node.value, str)
                or not name_node.value.isidentifier()
            ):
                raise self.fail(
                    stmt,
                    "register_buffer takes a literal name and a torch constructor, no keywords "
                    "(a non-persistent buffer would be state the reference's does not replace)",
                )
            self.own(stmt, name_node.value)
            self.ctor(call.args[1])
            self.state.tensors.add(name_node.value)
            return
        raise self.fail(
            stmt,
            f"{ast.unparse(stmt)[:60]!r}: __init__ calls super().__init__(), binds "
            "self.NAME to nn.Parameter(torch.empty/zeros/ones/randn/rand(...)), to a parameter-holding "
            f"module ({', '.join(sorted(PARAM_MODULES))}) or to a value of its init inputs, and "
            "registers buffers",
        )

    def own(self, node: ast.AST, name: str) -> None:
        if name.startswith("_") or name in module_names():
            raise self.fail(
                node, f"self.{name}: a name nn.Module has (it would replace the harness's own)", "model_new_class"
            )
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
            raise self.fail(
                value,
                f"self.NAME = {ast.unparse(value)[:40]}: a list, dict or set on the model would "
                "carry state from one call to the next; use a tuple",
            )
        self.value(value)
        return "value"

    def ctor(self, node: ast.expr) -> None:
        if not (
            isinstance(node, ast.Call)
            and self.g.canonical(node.func).removeprefix("torch.") in TENSOR_CTORS
            and self.g.canonical(node.func).startswith("torch.")
        ):
            raise self.fail(
                node,
                f"{ast.unparse(node)[:60]}: a parameter or buffer is made by "
                f"torch.{{{', '.join(sorted(TENSOR_CTORS))}}}(shape...) (the harness then loads the "
                "reference's values into it)",
            )
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
        elif (
            isinstance(node, ast.Attribute)
            and self.g.canonical(node).removeprefix("torch.") in DTYPES
            and self.g.canonical(node).startswith("torch.")
        ):
            return
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and (node.func.id in HOST_BUILTINS or node.func.id in self.g.host)
            and not node.keywords
        ):
            for a in node.args:
                self.value(a.value if isinstance(a, ast.Starred) else a)
        else:
            raise self.fail(
                node,
                f"{ast.unparse(node)[:60]}: __init__ computes plain values from its init "
                "inputs only (literals, arithmetic, tuples, builtins, this module's helpers)",
            )


class ForwardCheck(HostCheck):
    """ModelNew.forward: the host productions of ``launch``, with self's tensors and values typed."""

    def __init__(self, g: GrammarView, fn: ast.FunctionDef, model: ModelState) -> None:
        super().__init__(g, fn)
        self.model = model
        self.me = fn.args.args[0].arg
        self.entry = True
        self.entry_tensors(fn.args, skip=1)
        self.locals.discard(self.me)

    def _self_kind(self, node: ast.AST) -> str | None:
        """ "tensor", "value", "module" or "other" for ``self.X`` / ``self.SUB.Y``; None when not rooted at self."""
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
            raise self.fail(
                "host_name",
                node,
                f"{ast.unparse(node)} as a value: a submodule is read only "
                f"through its tensors ({', '.join(sorted(SUB_TENSORS))}) and hyperparameters",
            )
        if kind == "other":
            raise self.fail(
                "host_name",
                node,
                f"{ast.unparse(node)}: forward reads on self only what __init__ "
                "bound (parameters, buffers, plain values, a submodule's weight/bias and "
                "hyperparameters)",
            )
        super().attribute(node)

    def expr(self, node: ast.expr) -> None:
        if isinstance(node, ast.Name) and node.id == self.me:
            raise self.fail(
                "host_name",
                node,
                f"{self.me} as a value: forward reads self's parameters and "
                "values by name (self.weight), never the module itself",
            )
        super().expr(node)

    def callee(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            receiver = self._self_kind(func.value) if isinstance(func.value, ast.Attribute) else None
            if _self_attr(func, self.me) is not None or receiver in ("module", "other"):
                raise self.fail(
                    "torch_compute_call",
                    node,
                    f"calls {ast.unparse(func)[:60]}(): a submodule or "
                    "method of the model called is torch computing the answer; launch a @triton.jit "
                    "kernel on its tensors (self.gemm.weight) instead",
                )
        super().callee(node)
