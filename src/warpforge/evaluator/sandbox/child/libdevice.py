"""libdevice in Triton's interpreter (runs in the child, before the candidate is imported).

``triton.language.extra.libdevice`` is a module of stubs (``def tanh(arg0): ...``) that the compiler maps to
CUDA's libdevice (``__nv_tanhf``); ``triton.language.extra.cuda.libdevice`` holds the ``extern_elementwise``
builtins themselves. Under ``TRITON_INTERPRET`` the first return None and the second raise (no ``_semantic``),
so a kernel that is fine on the GPU fails on the CPU. Here both modules' functions are replaced, before the
candidate imports them (``from ...libdevice import rsqrt`` binds the replacement), by numpy with the compiled
semantics: the compiled kernel dispatches on the argument dtypes, fp32 (``__nv_*f``) or fp64 (``__nv_*``) only,
Python floats taken as fp32; the result is computed in float64 and rounded to the argument dtype (libdevice's
functions are within 1-2 ulp of that). A function not in the table, or called with other dtypes (fp16, int),
raises :class:`LibdeviceRefused` naming the function and why (the compiler too refuses other dtypes).

The replacements live in this harness module and in the two Triton modules' namespaces; the grammar keeps the
candidate from storing into either (no attribute stores, no private names).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

MODULES = ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice")


def _vec(fn: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    return np.vectorize(fn, otypes=[np.float64])


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)  # __nv_roundf: halfway cases away from zero


UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "sqrt": np.sqrt,
    "cbrt": np.cbrt,
    "rcbrt": lambda x: 1.0 / np.cbrt(x),
    "exp": np.exp,
    "exp2": np.exp2,
    "exp10": lambda x: np.power(10.0, x),
    "expm1": np.expm1,
    "log": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "log1p": np.log1p,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "erf": _vec(math.erf),
    "erfc": _vec(math.erfc),
    "lgamma": _vec(math.lgamma),
    "tgamma": _vec(math.gamma),
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
    "rint": np.rint,
    "nearbyint": np.rint,
    "round": _round_half_away,
    "fabs": np.abs,
    "abs": np.abs,
    "fast_expf": np.exp,
    "fast_logf": np.log,
    "fast_log2f": np.log2,
    "fast_log10f": np.log10,
    "fast_sinf": np.sin,
    "fast_cosf": np.cos,
    "fast_tanf": np.tan,
    "rcp_rn": lambda x: 1.0 / x,
    "sqrt_rn": np.sqrt,
}
BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "pow": np.power,
    "powf": np.power,
    "atan2": np.arctan2,
    "fmod": np.fmod,
    "hypot": np.hypot,
    "fmin": np.fmin,
    "fmax": np.fmax,
    "copysign": np.copysign,
    "fdim": lambda a, b: np.maximum(a - b, 0.0),
    "div_rn": np.divide,
    "fast_dividef": np.divide,
    "add_rn": np.add,
    "sub_rn": np.subtract,
    "mul_rn": np.multiply,
    "remainder": lambda a, b: a - b * np.rint(a / b),
}
INT_RESULT: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "isnan": np.isnan,
    "isinf": np.isinf,
    "signbit": np.signbit,
    "finitef": np.isfinite,
    "isfinited": np.isfinite,
}


class LibdeviceRefused(TypeError):
    """A libdevice call the interpreter does not run as the compiled kernel would."""


def _arrays(name: str, args: tuple[Any, ...]) -> tuple[list[np.ndarray], Any, tuple[int, ...]]:
    import triton.language as tl

    arrays, dtypes, shape = [], set(), ()
    for a in args:
        a = a.value if isinstance(a, tl.constexpr) else a
        if isinstance(a, tl.tensor):
            dtypes.add(str(a.dtype.scalar if hasattr(a.dtype, "scalar") else a.dtype))
            arrays.append(np.asarray(a.handle.data))
            shape = tuple(a.shape) if a.type.is_block() and len(a.shape) > len(shape) else shape
        elif isinstance(a, float):
            dtypes.add("fp32")  # the compiled kernel's to_tensor of a Python float
            arrays.append(np.asarray(a, dtype=np.float32))
        else:
            raise LibdeviceRefused(
                f"libdevice.{name} got {type(a).__name__}: the compiled kernel takes tensors or "
                "floats of one float dtype"
            )
    if len(dtypes) != 1 or dtypes - {"fp32", "fp64"}:
        raise LibdeviceRefused(
            f"libdevice.{name} on {', '.join(sorted(dtypes))}: the compiled kernel dispatches on "
            "fp32 or fp64 arguments of one dtype only (cast with .to(tl.float32))"
        )
    return arrays, dtypes.pop(), shape


def emulated(name: str) -> Callable[..., Any]:
    """The interpreter's ``libdevice.<name>``: numpy with the compiled dispatch, or a refusal naming it."""

    def call(*args: Any, **_: Any) -> Any:
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        table = UNARY if name in UNARY else BINARY if name in BINARY else INT_RESULT if name in INT_RESULT else None
        if table is None:
            raise LibdeviceRefused(
                f"libdevice.{name} is not run by warpforge's interpreter (its compiled semantics "
                "are not emulated): write it with tl functions, or judge it on a GPU "
                "(--backend cuda)"
            )
        arity = 2 if table is BINARY else 1
        if len(args) != arity:
            raise LibdeviceRefused(f"libdevice.{name} takes {arity} argument(s), got {len(args)}")
        arrays, dtype, shape = _arrays(name, args)
        with np.errstate(all="ignore"):  # inf and nan are values here, as on the GPU
            out = table[name](*(a.astype(np.float64) for a in arrays))  # type: ignore[operator]
        if table is INT_RESULT:
            data, scalar = np.asarray(out).astype(np.int32), tl.int32
        else:
            scalar = tl.float32 if dtype == "fp32" else tl.float64
            data = np.asarray(out).astype(np.float32 if dtype == "fp32" else np.float64)
        data = np.broadcast_to(data, shape).copy() if shape else data.reshape(1) if data.ndim == 0 else data
        ty = tl.block_type(scalar, list(shape)) if shape else scalar
        return tl.tensor(TensorHandle(data, scalar), ty)

    call.__name__ = call.__qualname__ = name
    call.__module__ = MODULES[0]  # Triton's dependency walk treats libdevice's stubs as no Python dependency
    return call


def install() -> None:
    """Replace every public function of both libdevice modules with its emulation (idempotent)."""
    import importlib

    for module_name in MODULES:
        module = importlib.import_module(module_name)
        if getattr(module, "_warpforge_emulated", False):
            continue
        for attr, value in list(vars(module).items()):
            if (
                not attr.startswith("_")
                and callable(value)
                and not isinstance(value, type)
                and getattr(value, "__module__", "") in MODULES
            ):
                setattr(module, attr, emulated(attr))
        module._warpforge_emulated = True  # type: ignore[attr-defined]
