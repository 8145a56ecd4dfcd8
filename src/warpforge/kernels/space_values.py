"""What a variant's ``SPACE`` may hold, decided from its syntax tree before anything else reads it.

``SPACE`` is candidate text that the trusted side turns into data: it is written into child requests
(JSON), handed to Optuna as categorical choices, stored with every result and printed. So it is typed here,
on the exact tree the grammar checks, never evaluated: a dict display whose keys are distinct ASCII
identifier strings and whose values are non-empty list (or tuple) displays of ``int``, ``float``, ``bool``,
``str`` or ``None`` literals (a leading ``-``/``+`` on a number is allowed). Anything else (bytes, complex,
sets, nested containers, names, calls, a non-finite float, an int past 64 bits, a string with control
characters or lone surrogates) is refused with the rule ``space_value`` and one line naming the parameter.

Example::

    >>> import ast
    >>> space_from_node(ast.parse("{'BLOCK': [64, 128], 'num_warps': [4]}", mode="eval").body)
    {'BLOCK': [64, 128], 'num_warps': [4]}
    >>> try:
    ...     space_from_node(ast.parse("{'X': [b'ab']}", mode="eval").body)
    ... except SpaceRefused as err:
    ...     print(err)
    SPACE['X'] has b'ab' (bytes): SPACE values are int, float, bool, str or None
"""

from __future__ import annotations

import ast
import json
import math
import unicodedata
from typing import Any

REASON = "space_value"
# Triton passes an int launch argument as i32 or i64 and a larger one fails at the launch; the stores and
# Optuna keep them as JSON numbers. 64 bits is the widest value a kernel can receive.
INT_LIMIT = 1 << 63
ALLOWED = "int, float, bool, str or None"
TOO_LARGE = "space_too_large"
# The most configurations a SPACE may name (the product of its list lengths). The built-in templates' largest
# is 648 (matmul/tiled_grouped); 100,000 is 150 times that. Past it the trusted side itself would suffer:
# Variant.configs() builds every configuration as a dict in the orchestrator (~0.5 KB each: 50 MB here), the
# space stage's child reports each feasible one as a JSON row (~25 B for a matmul row: 2.5 MB of the 16 MiB
# report cap), and the child calls constraints() once per configuration and shape inside the job's 120 s.
# A SPACE of 20 parameters with 10 values each (1e20) was only a timeout of the child before, after the
# parent had started listing it.
MAX_CONFIGS = 100_000


class SpaceRefused(ValueError):
    """SPACE is not a literal dict of typed lists; the message names the parameter and what to write."""

    reason = REASON


class SpaceTooLarge(SpaceRefused):
    """SPACE's cartesian product names more than MAX_CONFIGS configurations."""

    reason = TOO_LARGE


def _shown(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:37] + "..."


def typed_value(name: str, node: ast.AST) -> Any:
    sign = 1
    inner = node
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = node.operand
        sign = -1 if isinstance(node.op, ast.USub) else 1
        if not (isinstance(inner, ast.Constant) and type(inner.value) in (int, float)):
            raise SpaceRefused(f"SPACE[{name!r}] has {_shown(node)}: a sign goes only before a number literal")
    if not isinstance(inner, ast.Constant):
        raise SpaceRefused(
            f"SPACE[{name!r}] has {_shown(node)} ({type(node).__name__}): SPACE values are "
            f"{ALLOWED}: SPACE must be a literal dict of lists (no names, calls or containers)"
        )
    value: Any = inner.value
    kind = type(value)
    if kind not in (int, float, bool, str, type(None)):
        raise SpaceRefused(f"SPACE[{name!r}] has {_shown(node)} ({kind.__name__}): SPACE values are {ALLOWED}")
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        value = sign * value
        if not -INT_LIMIT <= value < INT_LIMIT:
            raise SpaceRefused(
                f"SPACE[{name!r}] has an integer of {value.bit_length()} bits: a kernel receives at "
                "most 64-bit integers"
            )
    elif isinstance(value, float):
        value = sign * value
        if not math.isfinite(value):
            raise SpaceRefused(
                f"SPACE[{name!r}] has {_shown(node)} (not finite): SPACE floats are finite (JSON and "
                "the stores have no inf or nan)"
            )
    else:
        bad = next((ch for ch in value if unicodedata.category(ch) in ("Cc", "Cs")), None)
        if bad is not None:
            raise SpaceRefused(
                f"SPACE[{name!r}] has a string with {ascii(bad)}: SPACE strings hold no control "
                "characters or lone surrogates"
            )
    return value


# A space given as a list of configurations (``SPACE = [{'BLOCK': 64, 'num_warps': 4}, ...]``, or an autotuned
# kernel's triton.Config list: kernels/autotune_space.py) is one parameter, CONFIG_PARAM, whose values label the
# configurations in order (``#1 {"BLOCK":128,"num_warps":4}``); the child turns the label chosen back into the
# keyword parameters launch receives (evaluator/sandbox/child/autotune.py). CONFIG_PARAM is no identifier: no
# SPACE written as a dict can name it.
CONFIG_PARAM = "@config"


def config_label(index: int, values: dict[str, Any]) -> str:
    """A configuration as the space shows it, its position first (``#1 {"BLOCK":128,"num_warps":4}``)."""
    return f"#{index} " + json.dumps(values, separators=(",", ":"))


def label_values(label: str) -> tuple[int, dict[str, Any]]:
    """The position and values a label names; ValueError for anything else."""
    head, _, body = str(label).partition(" ")
    values = json.loads(body) if body else None
    if not head.startswith("#") or not head[1:].isdigit() or not isinstance(values, dict):
        raise ValueError(f"{label!r} is not a configuration label")
    return int(head[1:]), values


def expand(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with a configuration label replaced by the values it names (constraints and launch see those)."""
    if CONFIG_PARAM not in params:
        return params
    rest = {k: v for k, v in params.items() if k != CONFIG_PARAM}
    return {**rest, **label_values(params[CONFIG_PARAM])[1]}


def configuration(node: ast.AST, index: int) -> dict[str, Any]:
    """One ``{'NAME': literal, ...}`` configuration of a list-form SPACE."""
    if not isinstance(node, ast.Dict):
        raise SpaceRefused(
            f"SPACE[{index}] = {_shown(node)}: a list-form SPACE holds dict literals, e.g. "
            "[{'BLOCK': 64, 'num_warps': 4}, {'BLOCK': 128, 'num_warps': 8}]"
        )
    out: dict[str, Any] = {}
    for key, value in zip(node.keys, node.values):
        if not (
            isinstance(key, ast.Constant)
            and isinstance(key.value, str)
            and key.value.isascii()
            and key.value.isidentifier()
        ):
            raise SpaceRefused(
                f"SPACE[{index}] key {_shown(key) if key else '**'}: parameter names are ASCII identifier strings"
            )
        if key.value in out:
            raise SpaceRefused(f"SPACE[{index}] names {key.value!r} twice")
        out[key.value] = typed_value(key.value, value)
    return out


def space_from_node(node: ast.AST) -> dict[str, list[Any]]:
    """The SPACE dict from its syntax node (never evaluated); SpaceRefused when it is not one. A list of dict
    literals is the list-of-configurations form: ``{CONFIG_PARAM: [label, ...]}``, tried in order."""
    if isinstance(node, (ast.List, ast.Tuple)):
        if not node.elts or len(node.elts) > MAX_CONFIGS:
            raise SpaceRefused(f"SPACE = {_shown(node)}: a list-form SPACE holds 1 to {MAX_CONFIGS} configurations")
        return {CONFIG_PARAM: [config_label(i, configuration(e, i)) for i, e in enumerate(node.elts)]}
    if not isinstance(node, ast.Dict):
        raise SpaceRefused(
            f"SPACE = {_shown(node)}: SPACE must be a literal dict of lists (no names or calls), e.g. "
            "{'BLOCK': [64, 128], 'num_warps': [4, 8]}"
        )
    space: dict[str, list[Any]] = {}
    for key, values in zip(node.keys, node.values):
        if key is None:
            raise SpaceRefused(f"SPACE has **{_shown(values)}: SPACE is a literal dict, no unpacking")
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            raise SpaceRefused(f"SPACE key {_shown(key)}: parameter names are strings, e.g. 'BLOCK'")
        name = key.value
        if not (name.isascii() and name.isidentifier()):
            raise SpaceRefused(
                f"SPACE key {name!r}: a parameter name is an ASCII identifier (launch takes it as a keyword)"
            )
        if name in space:
            raise SpaceRefused(f"SPACE names {name!r} twice: each parameter once")
        if not isinstance(values, (ast.List, ast.Tuple)) or not values.elts:
            raise SpaceRefused(
                f"SPACE[{name!r}] = {_shown(values)}: each parameter maps to a non-empty list of {ALLOWED} literals"
            )
        space[name] = [typed_value(name, element) for element in values.elts]
    size = math.prod(len(v) for v in space.values())  # lengths only: the product itself is never built
    if size > MAX_CONFIGS:
        sizes = " x ".join(str(len(v)) for v in space.values())
        raise SpaceTooLarge(
            f"SPACE names {size:.3g} configurations ({sizes}), over the {MAX_CONFIGS:,} a variant "
            "may name: split it into variants or prune values (constraints() runs on every one)"
        )
    return space
