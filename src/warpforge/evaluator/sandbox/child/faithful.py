"""The compiled kernel's arithmetic in Triton's interpreter (runs in the child, before the candidate is imported).

The interpreter computes with numpy; the compiled sm_90 kernel with PTX. Where the two differ and the PTX
semantics are cheap to state, the interpreter's builder ops are replaced here by the PTX semantics (each
checked on the PTX that ``triton.compile`` emits for ``GPUTarget("cuda", 90, 32)``, Triton 3.9; the
catalogue with its evidence is docs/evaluator.md, "Interpreter and compiled kernel"):

- ``tl.dot`` on fp32 inputs with the default ``input_precision`` ("tf32"): the PTX is
  ``mma.sync...f32.tf32.tf32.f32`` fed the raw fp32 registers (no ``cvt`` before it), and the tensor core
  reads only the top 19 bits (sign, exponent, 10 mantissa bits): the inputs are truncated to TF32 here.
  "tf32x3" splits each input as ``cvt.rna.tf32.f32`` does (big = round-to-nearest-away TF32, small = TF32 of the
  rest) and sums the three products; "ieee" (``fma.rn.f32``) is exact fp32, as numpy already is.
- ``tl.dot`` on bf16 inputs: the interpreter multiplies the raw uint16 bit patterns it holds bf16 in (an error of
  ~1e9 on N(0, 1) inputs); the compiled kernel's ``mma...f32.bf16.bf16.f32`` multiplies the bf16 values exactly
  (8-bit mantissas: a product fits fp32's 24) and accumulates in fp32. Here the operands are widened to fp32 and
  multiplied in fp32 (numpy), the accumulator added: the compiled sum, up to the order of its additions.
- fp32 to bf16 (``.to(tl.bfloat16)``, and ``fp_downcast_rounding="rtne"``): the interpreter truncates (and its
  "rtne" rounds half up); the compiled ``cvt.rn.bf16.f32`` rounds to nearest even, so honest bf16 outputs were
  judged on values the GPU never writes. Converted here as the PTX does (NaN kept quiet; overflow to infinity).
- float to integer (``.to(tl.int32)``): ``cvt.rzi.s32.f32`` rounds toward zero and saturates, NaN gives 0;
  numpy's ``astype`` gives INT_MIN for out-of-range values and NaN. Narrow targets go through the PTX's own
  16-bit conversion (``cvt.rzi.u16.f32`` then truncation for uint8, likewise s16 for int8).

What is not emulated is listed on the trusted side (``evaluator.run.interpret.NOT_EMULATED``); every
interpreter ``ok`` names it.
Patching is version-tolerant and fails closed: if the builder methods are not the ones expected (Triton
3.4-3.9 name them ``create_dot`` and ``create_fp_to_si``/``create_fp_to_ui``), :func:`install` raises
:class:`InterpreterLayout` and the check ends as the evaluator's error, never as an ``ok``.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

# What an interpreter ``ok`` cannot claim about the compiled kernel (backends.InterpretBackend adds it).


class InterpreterLayout(RuntimeError):
    """The installed Triton's interpreter is not laid out as this layer expects: no faithful check is possible."""


def _tf32_truncate(x: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    return np.where(special, bits, bits & np.uint32(0xFFFFE000)).view(np.float32)


def _tf32_rna(x: np.ndarray) -> np.ndarray:
    """cvt.rna.tf32.f32: round to nearest, ties away from zero, at 10 mantissa bits (Inf/NaN kept)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    rounded = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    return np.where(special, bits, rounded).view(np.float32)


def bf16_rne(x: np.ndarray) -> np.ndarray:
    """cvt.rn.bf16.f32: fp32 to bf16 bits (uint16, as the interpreter holds bf16), rounded to nearest even."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    quiet = (bits >> np.uint32(16)) | np.uint32(0x40)
    return np.where(np.isnan(x), quiet, rounded).astype(np.uint16)


def _precision_name(value: Any) -> str:
    return str(getattr(value, "name", value)).rsplit(".", 1)[-1].lower()


def tf32_dot(a: np.ndarray, b: np.ndarray, precision: str) -> np.ndarray | None:
    """The product the sm_90 kernel computes for fp32 ``a @ b``; None where numpy's fp32 is already it."""
    if precision == "ieee":
        return None
    if precision == "tf32":
        return np.matmul(_tf32_truncate(a), _tf32_truncate(b), dtype=np.float32)
    if precision == "tf32x3":
        a_big, b_big = _tf32_rna(a), _tf32_rna(b)
        a_small, b_small = _tf32_rna(a - a_big), _tf32_rna(b - b_big)
        small = np.matmul(a_small, b_big, dtype=np.float32) + np.matmul(a_big, b_small, dtype=np.float32)
        return small + np.matmul(a_big, b_big, dtype=np.float32)
    raise InterpreterLayout(
        f"tl.dot input_precision {precision!r} on fp32 inputs: the interpreter layer knows "
        "tf32, tf32x3 and ieee only; check this kernel on a GPU"
    )


def saturate(data: np.ndarray, np_dtype: np.dtype) -> np.ndarray:
    """cvt.rzi.<int>.f32: toward zero, clamped to the target's range, NaN to 0 (8-bit targets via 16 bits)."""
    target = np.dtype(np_dtype)
    via = target
    if target.itemsize == 1:  # the PTX converts to 16 bits and keeps the low byte (cvt.rzi.u16.f32)
        via = np.dtype(np.uint16 if target.kind == "u" else np.int16)
    info = np.iinfo(via)
    x = np.asarray(data, dtype=np.float64)
    clamped = np.clip(np.trunc(np.nan_to_num(x, nan=0.0, posinf=info.max, neginf=info.min)), info.min, info.max)
    return clamped.astype(via).astype(target)


def install() -> None:
    """Replace the interpreter builder's dot and float-to-int ops (idempotent)."""
    from triton.runtime import interpreter as interp

    builder = getattr(interp, "InterpreterBuilder", None)
    handle = getattr(interp, "TensorHandle", None)
    if builder is None or handle is None:
        raise InterpreterLayout("triton.runtime.interpreter has no InterpreterBuilder/TensorHandle")
    if getattr(builder, "_warpforge_faithful", False):
        return
    for name in ("create_dot", "create_fp_to_si", "create_fp_to_ui", "cast_impl", "create_fp_to_fp"):
        if not callable(getattr(builder, name, None)):
            raise InterpreterLayout(f"InterpreterBuilder.{name} is missing")
    dot_params = list(inspect.signature(builder.create_dot).parameters)
    if dot_params[:5] != ["self", "a", "b", "d", "input_precision"]:
        raise InterpreterLayout(
            f"InterpreterBuilder.create_dot takes {dot_params}, not (self, a, b, d, input_precision, ...)"
        )
    original_dot = builder.create_dot
    get_np_dtype = getattr(interp, "_get_np_dtype", None)
    if get_np_dtype is None:
        raise InterpreterLayout("triton.runtime.interpreter has no _get_np_dtype")

    convert_float = getattr(interp, "_convert_float", None)

    def widened(x: Any) -> np.ndarray:
        import triton.language as tl

        if convert_float is None:
            raise InterpreterLayout("triton.runtime.interpreter has no _convert_float for bf16")
        return np.asarray(convert_float(x.data, tl.bfloat16, tl.float32, None)).view(np.float32)

    def create_dot(self: Any, a: Any, b: Any, d: Any, input_precision: Any, *rest: Any, **kw: Any) -> Any:
        if a.data.dtype == np.float32 and b.data.dtype == np.float32:
            product = tf32_dot(a.data, b.data, _precision_name(input_precision))
            if product is not None:
                return handle(product.astype(d.data.dtype) + d.data, d.dtype.scalar)
        if str(a.dtype.scalar) == "bf16" and str(b.dtype.scalar) == "bf16":
            if d.data.dtype != np.float32:
                raise InterpreterLayout(f"tl.dot on bf16 accumulating in {d.dtype.scalar}: not emulated")
            return handle(np.matmul(widened(a), widened(b)) + d.data, d.dtype.scalar)
        return original_dot(self, a, b, d, input_precision, *rest, **kw)

    def fp_to_int(self: Any, src: Any, dst_type: Any) -> Any:
        data = src.data
        if str(src.dtype.scalar) == "bf16":  # held as its uint16 bits by the interpreter
            import triton.language as tl

            if convert_float is None:
                raise InterpreterLayout("triton.runtime.interpreter has no _convert_float for bf16")
            data = convert_float(data, tl.bfloat16, tl.float32, None).view(np.float32)
        return handle(saturate(data, get_np_dtype(dst_type)), dst_type.scalar)

    cast, fp_to_fp = builder.cast_impl, builder.create_fp_to_fp

    def to_bf16(src: Any, dst_type: Any) -> bool:
        return str(src.dtype.scalar) == "fp32" and str(dst_type.scalar) == "bf16"

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        if to_bf16(src, dst_type):
            return handle(bf16_rne(src.data), dst_type.scalar)
        return cast(self, src, dst_type)

    def create_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        if to_bf16(src, dst_type) and _precision_name(rounding_mode) == "rtne":
            return handle(bf16_rne(src.data), dst_type.scalar)
        return fp_to_fp(self, src, dst_type, rounding_mode)

    builder.cast_impl = cast_impl
    builder.create_fp_to_fp = create_fp_to_fp
    builder.create_dot = create_dot
    builder.create_fp_to_si = fp_to_int
    builder.create_fp_to_ui = fp_to_int
    builder._warpforge_faithful = True
    _strict_truth(interp)


class BlockTruthRefused(TypeError):
    """``and``/``or``/``not`` (or ``if``) on a block tensor in a kernel."""


BLOCK_TRUTH = (
    "and/or/not on a block tensor in a kernel: the compiled kernel combines both operands elementwise "
    "(andi/ori), the interpreter keeps one of them; rewrite: (a) & (b), (a) | (b), ~a or a == 0"
)


def _strict_truth(interp: Any) -> None:
    """The truth value of a block tensor raises (BLOCK_TRUTH): under the interpreter ``mask_a and mask_b`` was
    ``mask_b`` (``tensor.__bool__`` is True for any block), so the CPU checked another mask than the GPU runs.
    A scalar keeps its truth value (``if x > 0:`` on a loaded scalar). Patched where the interpreter patches
    ``__bool__`` at each launch (``_patch_lang_tensor``), after it."""
    original = getattr(interp, "_patch_lang_tensor", None)
    if original is None:
        raise InterpreterLayout("triton.runtime.interpreter has no _patch_lang_tensor")

    import sys
    from pathlib import Path

    triton_dir = str(Path(interp.__file__).parents[1])

    def truth(self: Any) -> bool:
        data = self.handle.data
        if data.size == 1:
            return bool(data)
        # Triton's own code asks whether an optional block is there (``other.handle if other else None``)
        if sys._getframe(1).f_code.co_filename.startswith(triton_dir):
            return True
        raise BlockTruthRefused(BLOCK_TRUTH)

    def patch_lang_tensor(tensor: Any, scope: Any) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__bool__", truth)

    interp._patch_lang_tensor = patch_lang_tensor
