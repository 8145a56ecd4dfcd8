"""What the static rule sets share (checks.py's ``core`` blocklist, grammar/'s ``strict`` grammar): the
finding type, the torch names the ``core`` blocklist lets a launch use, and how a ``@triton.jit`` function
is recognised.

Its own module so that the two rule sets import it and not each other (checks.py runs the strict rules
first, grammar/ needs this vocabulary).

Example::

    >>> import ast
    >>> is_jit(ast.parse("@triton.jit\ndef k(x): pass").body[0])
    True
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

# torch.* names a launch may use: allocation, dtypes, shapes, devices, streams.
ALLOWED_TORCH = {
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "full",
    "full_like",
    "ones",
    "ones_like",
    "Size",
    "dtype",
    "device",
    "is_tensor",
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
    "float8_e4m3fn",
    "float8_e5m2",
    "finfo",
    "iinfo",
    "get_default_dtype",
    "cuda",
    "Tensor",
    "library",
    "no_grad",
    "inference_mode",
    "promote_types",
}
JIT_DECORATORS = {"jit", "autotune", "heuristics"}


@dataclass(frozen=True)
class StaticFinding:
    reason: str  # e.g. "torch_compute_call"
    message: str


def is_jit(fn: ast.FunctionDef) -> bool:
    """True for a function decorated with `@triton.jit`, `@triton.autotune` or `@triton.heuristics` (called or not)."""
    for dec in fn.decorator_list:
        node = dec.func if isinstance(dec, ast.Call) else dec
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
        if name in JIT_DECORATORS:
            return True
    return False
