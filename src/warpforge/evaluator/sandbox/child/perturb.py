"""Perturbed arithmetic for Triton's interpreter (runs in the child): a CPU verdict the kernel cannot decide.

The interpreter computes some things differently from the compiled kernel (``a*b + c`` rounded twice where the
compiler contracts it to ``fma.rn.f32``; ``tl.exp`` exact where ``ex2.approx.f32`` is not; a conversion's rounding),
and any bit that differs is a detector: a kernel that compares such a result with what the interpreter gives is
honest here and something else on a GPU. Emulating each case closes instances, not the class. So, as Monte Carlo
arithmetic (Verificarlo, CADNA) does, the judge also runs a case with every inexact floating-point result of
the kernel's arithmetic moved within the compiled op's error bound, drawn from a seed the judge chose, in two
runs with different seeds: the correctly rounded ops (add, subtract, multiply, divide, fma, ``tl.dot``'s outputs)
rounded randomly (to the neighbour on either side of the true value, so always one of its two roundings), the
approximate ones (exp, exp2, log, log2, sin, cos, sqrt, rsqrt: ``.approx.f32`` on sm_90) moved by up to two
ulps. An honest kernel's result moves by rounding noise and stays within tolerance of the reference; one whose
path depends on the last bits of a result gets the interpreter's bits in neither run, and answers as it would
anywhere else (``incorrect: arithmetic_dependent``, judge/judge.py). Exact results are never moved (the GPU
computes them exactly too: a moved ``1.0 * 1.0`` would tell a kernel it is being perturbed), nor are infinities
and NaNs.

A run's seed is the judge's; what runs here is the child's claim, protected as the grid log is (no name reaches
this module from a candidate under the grammar).
"""

from __future__ import annotations

from typing import Any

import numpy as np

APPROXIMATE = 2  # ulps: the .approx.f32 ops (ex2, lg2, sin, cos, rsqrt) are within ~2 ulp on sm_90


class Perturb:
    """Switched on by the harness around one launch of a perturbed case; ``rng`` is seeded by the judge."""

    active = False
    rng = np.random.default_rng(0)

    @classmethod
    def start(cls, seed: int) -> None:
        cls.rng, cls.active = np.random.default_rng(seed), True

    @classmethod
    def stop(cls) -> None:
        cls.active = False


def _floating(data: Any) -> np.ndarray | None:
    array = np.asarray(data)
    return array if array.dtype in (np.float32, np.float16) else None


def rounded_randomly(result: Any, exact: Any) -> Any:
    """A correctly rounded op's ``result`` where it is inexact (differs from ``exact``, the value in float64)
    replaced, with probability 1/2 each, by the neighbour on the other side of ``exact``: random rounding, so
    the result is always one of the two roundings of the true value. Exact results are never moved (a GPU
    computes them exactly too, and a moved exact value would say "perturbed")."""
    array = _floating(result)
    if array is None or not Perturb.active:
        return result
    exact = np.asarray(exact, dtype=np.float64)
    inexact = np.isfinite(array) & np.isfinite(exact) & (array.astype(np.float64) != exact)
    toward = np.where(exact > array.astype(np.float64), np.inf, -np.inf).astype(array.dtype)
    other = np.nextafter(array, toward)
    flip = inexact & (Perturb.rng.random(array.shape) < 0.5) & np.isfinite(other)
    return np.where(flip, other, array).astype(array.dtype)


def moved(result: Any, ulps: int) -> Any:
    """An approximate op's inexact ``result`` moved by a random whole number of ulps in [-ulps, ulps] (0 included:
    an approximation is often right); zeros, infinities and NaNs kept, never moved onto an infinity."""
    array = _floating(result)
    if array is None or not Perturb.active:
        return result
    ints = np.int32 if array.dtype == np.float32 else np.int16
    steps = Perturb.rng.integers(-ulps, ulps + 1, size=array.shape).astype(ints)
    finite = np.isfinite(array) & (array != 0)
    out = np.where(finite, (array.view(ints) + steps).view(array.dtype), array)
    return np.where(np.isfinite(out) | ~finite, out, array).astype(array.dtype)


def _exact(op: Any, *args: Any) -> np.ndarray:
    """``op`` on the operands in float64: exact for a product of two fp32 values, and otherwise closer to the
    true value than any fp32 rounding of it."""
    with np.errstate(all="ignore"):
        return op(*(np.asarray(a, dtype=np.float64) for a in args))


_BINARY = {np.add, np.subtract, np.multiply, np.divide}
_UNARY = {np.exp: APPROXIMATE, np.exp2: APPROXIMATE, np.log: APPROXIMATE, np.log2: APPROXIMATE}
_UNARY.update({np.sin: APPROXIMATE, np.cos: APPROXIMATE, np.sqrt: APPROXIMATE})


def install() -> None:
    """Wrap the interpreter builder's floating-point ops (idempotent); call after faithful.install()."""
    from triton.runtime import interpreter as interp

    from warpforge.evaluator.sandbox.child.faithful import InterpreterLayout

    builder = getattr(interp, "InterpreterBuilder", None)
    handle = getattr(interp, "TensorHandle", None)
    needed = ("binary_op", "unary_op", "create_fma", "create_dot", "create_rsqrt")
    if builder is None or handle is None or not all(callable(getattr(builder, m, None)) for m in needed):
        raise InterpreterLayout(f"InterpreterBuilder lacks one of {needed}: no perturbed runs on this Triton")
    if getattr(builder, "_warpforge_perturb", False):
        return
    binary, unary, fma, dot = builder.binary_op, builder.unary_op, builder.create_fma, builder.create_dot
    rsqrt = builder.create_rsqrt

    def binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        out = binary(self, lhs, rhs, op)
        if not Perturb.active or op not in _BINARY or _floating(out.data) is None:
            return out
        return handle(rounded_randomly(out.data, _exact(op, lhs.data, rhs.data)), out.dtype)

    def unary_op(self: Any, arg: Any, op: Any) -> Any:
        out = unary(self, arg, op)
        ulps = _UNARY.get(op)
        if not Perturb.active or not ulps or _floating(out.data) is None:
            return out
        inexact = out.data.astype(np.float64) != _exact(op, arg.data)
        return handle(np.where(inexact, moved(out.data, ulps), out.data).astype(out.data.dtype), out.dtype)

    def create_fma(self: Any, x: Any, y: Any, z: Any) -> Any:
        out = fma(self, x, y, z)
        if not Perturb.active:
            return out
        exact = _exact(lambda a, b, c: a * b + c, x.data, y.data, z.data)
        return handle(rounded_randomly(out.data, exact), out.dtype)

    def create_dot(self: Any, a: Any, b: Any, d: Any, *rest: Any, **kw: Any) -> Any:
        out = dot(self, a, b, d, *rest, **kw)
        if not Perturb.active or _floating(out.data) is None:
            return out
        # a GPU sums the products in another order: each output within an ulp of the interpreter's, exact ones kept
        exact = out.data.astype(np.float64)
        if a.data.dtype in (np.float16, np.float32) and b.data.dtype == a.data.dtype:
            exact = _exact(np.matmul, a.data, b.data) + np.asarray(d.data, dtype=np.float64)
        return handle(rounded_randomly(out.data, exact), out.dtype)

    def create_rsqrt(self: Any, arg: Any) -> Any:
        out = rsqrt(self, arg)
        if not Perturb.active or _floating(out.data) is None:
            return out
        inexact = out.data.astype(np.float64) != _exact(lambda v: 1.0 / np.sqrt(v), arg.data)
        return handle(np.where(inexact, moved(out.data, APPROXIMATE), out.data).astype(out.data.dtype), out.dtype)

    builder.binary_op = binary_op
    builder.unary_op = unary_op
    builder.create_fma = create_fma
    builder.create_dot = create_dot
    builder.create_rsqrt = create_rsqrt
    builder._warpforge_perturb = True
