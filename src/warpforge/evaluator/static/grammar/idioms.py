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

from warpforge.evaluator.static.grammar.host import LambdaCheck
from warpforge.evaluator.static.grammar.rules import GrammarView, refuse
from warpforge.kernels.autotune_space import config_values, keyword
from warpforge.kernels.space_values import SpaceRefused

AUTOTUNE_ARGS = {"configs", "key"}


def decorator_prefix(g: GrammarView, fn: ast.FunctionDef) -> list[ast.Call]:
    """The decorators above ``@triton.jit`` that this production covers: ``@triton.autotune(...)`` then
    ``@triton.heuristics(...)``, each at most once, in that order (anything else is the signature rule's)."""
    order = ["triton.autotune", "triton.heuristics"]
    out: list[ast.Call] = []
    for dec in fn.decorator_list[:-1]:
        name = g.canonical(dec.func) if isinstance(dec, ast.Call) else ""
        if name not in order:
            break
        order = order[order.index(name) + 1 :]
        assert isinstance(dec, ast.Call)
        out.append(dec)
    return out


def decorator_nodes(g: GrammarView, fn: ast.FunctionDef) -> set[int]:
    """The ``triton.autotune``/``triton.heuristics``/``triton.Config`` attribute nodes of ``fn``'s decorator
    prefix: the everywhere-rule refuses them anywhere else."""
    out: set[int] = set()
    for dec in decorator_prefix(g, fn):
        out.add(id(dec.func))
        configs = keyword(dec, "configs")
        if isinstance(configs, (ast.List, ast.Tuple)):
            out |= {
                id(c.func) for c in configs.elts if isinstance(c, ast.Call) and g.canonical(c.func) == "triton.Config"
            }
    return out


def check_decorators(g: GrammarView, fn: ast.FunctionDef) -> None:
    """[decorator] the autotune and heuristics decorators of ``fn`` (after the module's names are known)."""
    for dec in decorator_prefix(g, fn):
        if g.canonical(dec.func) == "triton.autotune":
            _check_autotune(g, fn, dec)
        else:
            _check_heuristics(g, fn, dec)


def _params(fn: ast.FunctionDef, g: GrammarView) -> tuple[list[str], set[str]]:
    a = fn.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    return [p.arg for p in params], {p.arg for p in params if p.annotation is not None and g.is_constexpr(p.annotation)}


def _check_autotune(g: GrammarView, fn: ast.FunctionDef, dec: ast.Call) -> None:
    where = f"line {dec.lineno}: @triton.autotune on {fn.name}"
    extra = [k.arg or "**" for k in dec.keywords if k.arg not in AUTOTUNE_ARGS]
    if dec.args or extra:
        raise refuse(
            "decorator",
            f"{where}: takes configs=[triton.Config(...), ...] and key=[...] only (by keyword); "
            f"{', '.join(extra) or 'positional arguments'} would run hooks or decide from the candidate's "
            "own measurements: the trusted side chooses the configuration",
        )
    names, constexprs = _params(fn, g)
    key = keyword(dec, "key")
    if (
        key is None
        or not isinstance(key, (ast.List, ast.Tuple))
        or not all(isinstance(e, ast.Constant) and e.value in names for e in key.elts)
    ):
        raise refuse("decorator", f"{where}: key=[...] lists {fn.name}'s parameter names as strings")
    configs = keyword(dec, "configs")
    if not isinstance(configs, (ast.List, ast.Tuple)) or not configs.elts:
        raise refuse("decorator", f"{where}: configs is a non-empty list of triton.Config(...) written out")
    for c in configs.elts:
        if not (
            isinstance(c, ast.Call)
            and g.canonical(c.func) == "triton.Config"
            and len(c.args) == 1
            and isinstance(c.args[0], ast.Dict)
        ):
            raise refuse(
                "decorator",
                f"{where}: {ast.unparse(c)[:60]}: each configuration is "
                "triton.Config({'NAME': literal, ...}, num_warps=INT, num_stages=INT)",
            )
        _config_values(c, constexprs, where)


def _config_values(c: ast.Call, constexprs: set[str], where: str) -> None:
    """One triton.Config is literal data (kernels/autotune_space.py) whose keys are the kernel's constexprs."""
    try:
        values = config_values(c)
    except SpaceRefused as exc:
        raise refuse("decorator", f"{where}: {exc}") from None
    stray = sorted(set(values) - constexprs - {"num_warps", "num_stages"})
    if stray:
        raise refuse(
            "decorator", f"{where}: {stray[0]!r} in a triton.Config: its keys are tl.constexpr parameters of the kernel"
        )


def _check_heuristics(g: GrammarView, fn: ast.FunctionDef, dec: ast.Call) -> None:
    where = f"line {dec.lineno}: @triton.heuristics on {fn.name}"
    if len(dec.args) != 1 or dec.keywords or not isinstance(dec.args[0], ast.Dict):
        raise refuse("decorator", f"{where}: takes one dict literal {{'NAME': lambda args: ..., ...}}")
    names, constexprs = _params(fn, g)
    keys = {p: False for p in names}
    table = dec.args[0]
    for k, v in zip(table.keys, table.values):
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value in constexprs):
            raise refuse(
                "decorator",
                f"{where}: {ast.unparse(k) if k else '**'}: a heuristic computes a tl.constexpr parameter of {fn.name}",
            )
        if not isinstance(v, ast.Lambda):
            raise refuse(
                "decorator", f"{where}: {ast.unparse(v)[:40]}: each heuristic is written as `lambda args: expression`"
            )
        check = LambdaCheck(None, g, v, keys, "heuristic")
        check.untensored(v.body, "returned by a heuristic (it computes a tl.constexpr)")
        check.expr(v.body)
