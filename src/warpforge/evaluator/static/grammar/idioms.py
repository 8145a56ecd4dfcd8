"""The Triton idioms users write that take callables or configurations: ``lambda META`` grids,
``@triton.heuristics`` and ``@triton.autotune`` with ``triton.Config`` lists.

Each is accepted in one literal shape and checked by the rules of the code it stands for (the finding's
``reason`` is the rule in brackets)::

    grid-lambda := "lambda" NAME ":" "(" expr, ... ")"                                       [kernel_use]
                   where expr is host code (grammar.host) and NAME appears only as NAME["P"], P a parameter of
                   the launched kernel that receives no tensor (a constexpr, a scalar, an autotuned value); bound
                   to a local it is used only as ``kernel[grid]``
    decorators  := ("@triton.autotune(configs=[config, ...], key=[STR, ...])")?
                   ("@triton.heuristics({STR: heuristic, ...})")? "@triton.jit"             [decorator]
    config      := "triton.Config(" {STR: literal, ...} ("," num_warps=INT)? ("," num_stages=INT)? ")"
                   each key a tl.constexpr parameter of the kernel, values int/float/bool/str/None literals
    heuristic   := "lambda" NAME ":" expr, host code where NAME appears only as NAME["P"], P a parameter of the
                   kernel or an earlier heuristic; each key a tl.constexpr parameter of the kernel

Autotune's other arguments (``prune_configs_by``, ``pre_hook``, ``reset_to_zero``, ``do_bench``, ...) are hooks or
decide what runs from measurements the candidate's process makes: refused. The configurations are read here, as
literal data (kernels/autotune_space.py), and become the variant's space: the trusted side chooses one, and the child
hands the autotuner only that one (sandbox/child/autotune.py), so nothing in the candidate's process benchmarks or
decides.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from warpforge.evaluator.static.grammar.host import HostCheck
from warpforge.evaluator.static.grammar.rules import _fail
from warpforge.kernels.autotune_space import config_values, keyword
from warpforge.kernels.space_values import SpaceRefused

if TYPE_CHECKING:
    from warpforge.evaluator.static.grammar.kernels import Grammar

AUTOTUNE_ARGS = {"configs", "key"}


class LambdaCheck(HostCheck):
    """One lambda's body as host code, its parameter read only as ``PARAM["KEY"]`` for the keys given
    (each mapped to whether it is a tensor)."""

    def __init__(self, outer: HostCheck | None, g: Grammar, lam: ast.Lambda, keys: dict[str, bool], what: str) -> None:
        args = lam.args
        if args.posonlyargs or args.kwonlyargs or args.vararg or args.kwarg or args.defaults \
                or len(args.args) != 1:
            raise _fail("kernel_use" if what == "grid" else "decorator",
                        f"line {lam.lineno}: {ast.unparse(lam)[:60]}: a {what} lambda takes one parameter "
                        "(`lambda META: ...`), no defaults")
        fn = ast.FunctionDef(name=f"a {what} lambda", args=ast.arguments(posonlyargs=[], args=[], vararg=None,
                             kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]), body=[], decorator_list=[],
                             returns=None, type_comment=None, lineno=lam.lineno, col_offset=lam.col_offset)
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
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str) \
                    and node.slice.value in self.keys:
                return node.slice.value
            raise self.fail("kernel_use" if self.what == "grid" else "decorator", node,
                            f"{ast.unparse(node)[:60]}: a {self.what} lambda reads {self.param}[\"NAME\"] only for "
                            f"{', '.join(sorted(self.keys)) or 'no name'}")
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
            raise self.fail("kernel_use" if self.what == "grid" else "decorator", node,
                            f"{self.param} used as a value: a {self.what} lambda reads only {self.param}[\"NAME\"]")
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
        raise check.fail("kernel_use", lam, f"grid {ast.unparse(lam)[:60]}: a grid lambda returns a tuple "
                         "(`lambda META: (triton.cdiv(n, META['BLOCK']),)`)")
    for e in lam.body.elts:
        check.untensored(e, "in a grid (a grid is read on the host)", "host_read")
        check.expr(e)


def decorator_prefix(g: Grammar, fn: ast.FunctionDef) -> list[ast.Call]:
    """The decorators above ``@triton.jit`` that this production covers: ``@triton.autotune(...)`` then
    ``@triton.heuristics(...)``, each at most once, in that order (anything else is the signature rule's)."""
    order = ["triton.autotune", "triton.heuristics"]
    out: list[ast.Call] = []
    for dec in fn.decorator_list[:-1]:
        name = g.canonical(dec.func) if isinstance(dec, ast.Call) else ""
        if name not in order:
            break
        order = order[order.index(name) + 1:]
        assert isinstance(dec, ast.Call)
        out.append(dec)
    return out


def decorator_nodes(g: Grammar, fn: ast.FunctionDef) -> set[int]:
    """The ``triton.autotune``/``triton.heuristics``/``triton.Config`` attribute nodes of ``fn``'s decorator
    prefix: the everywhere-rule refuses them anywhere else."""
    out: set[int] = set()
    for dec in decorator_prefix(g, fn):
        out.add(id(dec.func))
        configs = keyword(dec, "configs")
        if isinstance(configs, (ast.List, ast.Tuple)):
            out |= {id(c.func) for c in configs.elts if isinstance(c, ast.Call)
                    and g.canonical(c.func) == "triton.Config"}
    return out


def check_decorators(g: Grammar, fn: ast.FunctionDef) -> None:
    """[decorator] the autotune and heuristics decorators of ``fn`` (after the module's names are known)."""
    for dec in decorator_prefix(g, fn):
        if g.canonical(dec.func) == "triton.autotune":
            _check_autotune(g, fn, dec)
        else:
            _check_heuristics(g, fn, dec)


def _params(fn: ast.FunctionDef, g: Grammar) -> tuple[list[str], set[str]]:
    a = fn.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    return [p.arg for p in params], {p.arg for p in params if p.annotation is not None
                                     and g._is_constexpr(p.annotation)}


def _check_autotune(g: Grammar, fn: ast.FunctionDef, dec: ast.Call) -> None:
    where = f"line {dec.lineno}: @triton.autotune on {fn.name}"
    extra = [k.arg or "**" for k in dec.keywords if k.arg not in AUTOTUNE_ARGS]
    if dec.args or extra:
        raise _fail("decorator", f"{where}: takes configs=[triton.Config(...), ...] and key=[...] only (by keyword); "
                    f"{', '.join(extra) or 'positional arguments'} would run hooks or decide from the candidate's "
                    "own measurements: the trusted side chooses the configuration")
    names, constexprs = _params(fn, g)
    key = keyword(dec, "key")
    if key is None or not isinstance(key, (ast.List, ast.Tuple)) or not all(
            isinstance(e, ast.Constant) and e.value in names for e in key.elts):
        raise _fail("decorator", f"{where}: key=[...] lists {fn.name}'s parameter names as strings")
    configs = keyword(dec, "configs")
    if not isinstance(configs, (ast.List, ast.Tuple)) or not configs.elts:
        raise _fail("decorator", f"{where}: configs is a non-empty list of triton.Config(...) written out")
    for c in configs.elts:
        if not (isinstance(c, ast.Call) and g.canonical(c.func) == "triton.Config" and len(c.args) == 1
                and isinstance(c.args[0], ast.Dict)):
            raise _fail("decorator", f"{where}: {ast.unparse(c)[:60]}: each configuration is "
                        "triton.Config({'NAME': literal, ...}, num_warps=INT, num_stages=INT)")
        _config_values(c, constexprs, where)


def _config_values(c: ast.Call, constexprs: set[str], where: str) -> None:
    """One triton.Config is literal data (kernels/autotune_space.py) whose keys are the kernel's constexprs."""
    try:
        values = config_values(c)
    except SpaceRefused as exc:
        raise _fail("decorator", f"{where}: {exc}") from None
    stray = sorted(set(values) - constexprs - {"num_warps", "num_stages"})
    if stray:
        raise _fail("decorator", f"{where}: {stray[0]!r} in a triton.Config: its keys are tl.constexpr parameters "
                    "of the kernel")


def _check_heuristics(g: Grammar, fn: ast.FunctionDef, dec: ast.Call) -> None:
    where = f"line {dec.lineno}: @triton.heuristics on {fn.name}"
    if len(dec.args) != 1 or dec.keywords or not isinstance(dec.args[0], ast.Dict):
        raise _fail("decorator", f"{where}: takes one dict literal {{'NAME': lambda args: ..., ...}}")
    names, constexprs = _params(fn, g)
    keys = {p: False for p in names}
    table = dec.args[0]
    for k, v in zip(table.keys, table.values):
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value in constexprs):
            raise _fail("decorator", f"{where}: {ast.unparse(k) if k else '**'}: a heuristic computes a tl.constexpr "
                        f"parameter of {fn.name}")
        if not isinstance(v, ast.Lambda):
            raise _fail("decorator", f"{where}: {ast.unparse(v)[:40]}: each heuristic is written as "
                        "`lambda args: expression`")
        check = LambdaCheck(None, g, v, keys, "heuristic")
        check.untensored(v.body, "returned by a heuristic (it computes a tl.constexpr)")
        check.expr(v.body)
