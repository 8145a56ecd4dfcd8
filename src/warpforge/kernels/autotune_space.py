"""An autotuned kernel's configurations as the variant's space, read from the syntax tree (never evaluated).

``@triton.autotune(configs=[triton.Config({'BLOCK': 128}, num_warps=4), ...], key=[...])`` names the
configurations a user wants tried; here they become the space as a list of configurations: one parameter,
AUTOTUNE_PARAM (kernels/space_values.CONFIG_PARAM), whose values label them in order. The trusted side chooses one
as it chooses any point of a space (``eval`` the first that fits, the search any); the child hands the autotuner
only that one (evaluator/sandbox/child/autotune.py). The parameter is no identifier, so no SPACE dict can name it.

Example::

    >>> import ast
    >>> src = ("@triton.autotune(configs=[triton.Config({'B': 64}, num_warps=2), triton.Config({'B': 128})], "
    ...        "key=['n'])\\n@triton.jit\\ndef k(x, n, B: tl.constexpr):\\n    pass\\n")
    >>> autotune_space(ast.parse(src))
    {'@config': ['#0 {"B":64,"num_warps":2}', '#1 {"B":128}']}
"""

from __future__ import annotations

import ast
from typing import Any

from warpforge.kernels.space_values import CONFIG_PARAM, SpaceRefused, config_label, typed_value

AUTOTUNE_PARAM = CONFIG_PARAM
CONFIG_OPTIONS = {"num_warps", "num_stages"}


def autotune_decorator(fn: ast.FunctionDef) -> ast.Call | None:
    """``fn``'s ``@triton.autotune(...)`` call, if it has one."""
    for dec in fn.decorator_list:
        if (
            isinstance(dec, ast.Call)
            and isinstance(dec.func, ast.Attribute)
            and dec.func.attr == "autotune"
            and isinstance(dec.func.value, ast.Name)
            and dec.func.value.id == "triton"
        ):
            return dec
    return None


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def config_values(config: ast.Call) -> dict[str, Any]:
    """One ``triton.Config({...}, num_warps=.., num_stages=..)`` as data; SpaceRefused for anything else."""
    if len(config.args) != 1 or not isinstance(config.args[0], ast.Dict):
        raise SpaceRefused(
            f"{ast.unparse(config)[:60]}: a configuration is triton.Config({{'NAME': literal, ...}}, "
            "num_warps=INT, num_stages=INT)"
        )
    out: dict[str, Any] = {}
    for k, v in zip(config.args[0].keys, config.args[0].values):
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value.isidentifier()):
            raise SpaceRefused(f"{ast.unparse(k) if k else '**'} in a triton.Config: its keys are parameter names")
        if k.value in out:
            raise SpaceRefused(f"{k.value!r} twice in a triton.Config")
        out[k.value] = typed_value(k.value, v)
    for kw in config.keywords:
        if kw.arg not in CONFIG_OPTIONS:
            raise SpaceRefused(
                f"triton.Config takes num_warps and num_stages only ({kw.arg or '**'} is a hook or an "
                "option the search does not tune)"
            )
        value = typed_value(kw.arg, kw.value)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise SpaceRefused(f"{kw.arg}={ast.unparse(kw.value)[:20]}: a positive integer")
        out[kw.arg] = value
    return out


def autotune_space(tree: ast.Module) -> dict[str, list[str]] | None:
    """``{AUTOTUNE_PARAM: [label, ...]}`` for the module's autotuned kernel; None when none is. SpaceRefused for
    a second autotuned kernel (one decides the space) or a configuration that is not literal data."""
    found: list[list[str]] = []
    for fn in tree.body:
        dec = autotune_decorator(fn) if isinstance(fn, ast.FunctionDef) else None
        if dec is None:
            continue
        configs = keyword(dec, "configs")
        if not isinstance(configs, (ast.List, ast.Tuple)) or not configs.elts:
            raise SpaceRefused("@triton.autotune's configs is a non-empty list of triton.Config(...) written out")
        found.append(
            [config_label(i, config_values(c) if isinstance(c, ast.Call) else {}) for i, c in enumerate(configs.elts)]
        )
    if len(found) > 1:
        raise SpaceRefused(
            "two @triton.autotune kernels: a variant autotunes one kernel (its configurations are "
            "the variant's space); pass the other's values as tl.constexpr arguments from launch"
        )
    return {AUTOTUNE_PARAM: found[0]} if found else None
