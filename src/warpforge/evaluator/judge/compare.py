"""Output comparison on the trusted side: full tensors, dtype- and magnitude-aware tolerances.

The allowed error of each element is ``atol * scale + rtol * |ref64| + |ref_lowp - ref64|``: the
task's tolerance for the dtype, scaled by the reference's RMS magnitude (a 4096-deep fp16 matmul has
outputs near 64, a 32k-wide softmax near 3e-5), plus the error the reference itself makes when it
runs in the task's dtype, measured against float64. A candidate may be as inexact as PyTorch is; where a
few elements miss, :func:`compare_with_spread` asks whether PyTorch's rounding there was merely lucky.

A mismatch's reason follows from the evidence (:func:`refine`): ``precision_downgrade`` only when an fp32
output is what a precision loss produces (the reference rounded to bf16/fp16, or computed from inputs
rounded to tf32/bf16/fp16), never because the error happens to be small; anything else stays ``wrong_values``.

Example::

    >>> x = torch.randn(64, generator=torch.Generator().manual_seed(0))
    >>> r64, rlp = references(lambda t: t * 2 + 1, (x,))
    >>> probe = PrecisionProbe(lambda t: t * 2 + 1, (x,), 1e-4, 1e-4)
    >>> bf16 = [(x.bfloat16().float() * 2 + 1)]  # computed through bf16
    >>> refine(compare_outputs(bf16, r64, rlp, 1e-4, 1e-4), bf16, r64, rlp, float("nan"), probe).reason
    'precision_downgrade'
    >>> off = [rlp[0] * 1.01]  # 1% off everywhere: wrong, whatever its size
    >>> refine(compare_outputs(off, r64, rlp, 1e-4, 1e-4), off, r64, rlp, float("nan"), probe).reason
    'wrong_values'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Mismatch:
    # shape_mismatch, dtype_mismatch, non_finite_output, wrong_values; refined by refine():
    # output_unwritten, constant_output, precision_downgrade
    reason: str
    message: str
    # elements out of tolerance and elements compared (wrong_values only): a handful is what rounding looks like
    bad: int = 0
    total: int = 0

    @property
    def rare(self) -> bool:
        return self.reason == "wrong_values" and 0 < self.bad <= max(SPREAD_RARE_COUNT, self.total // 100)


def upcast(inputs: Sequence[object]) -> tuple[object, ...]:
    """Float tensors to float64, others unchanged: the inputs of the float64 reference."""
    return tuple(x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs)


def as_tuple(value: object) -> tuple[torch.Tensor, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)  # type: ignore[return-value]


def compare_outputs(
    outs: Sequence[torch.Tensor],
    ref64: Sequence[torch.Tensor],
    ref_lowp: Sequence[torch.Tensor],
    atol: float,
    rtol: float,
    scale_floor: float = 0.0,
    ref_error: Sequence[torch.Tensor] | None = None,
) -> Mismatch | None:
    """None when every output matches; else the first mismatch with a readable message. ``scale_floor``: the
    least magnitude atol is scaled by (a task's ``grad_scales``), else the reference's RMS. ``ref_error``: per
    output, the reference's rounding error to allow where it exceeds this draw's (:func:`reference_spread`)."""
    if len(outs) != len(ref64):
        return Mismatch("wrong_output_count", f"returned {len(outs)} outputs, the reference returns {len(ref64)}")
    for i, (out, r64, rlp) in enumerate(zip(outs, ref64, ref_lowp)):
        if tuple(out.shape) != tuple(r64.shape):
            return Mismatch("shape_mismatch", f"output {i} has shape {tuple(out.shape)}, expected {tuple(r64.shape)}")
        if out.dtype != rlp.dtype:
            return Mismatch("dtype_mismatch", f"output {i} is {out.dtype}, expected {rlp.dtype}")
        if not out.is_floating_point():
            if not torch.equal(out, rlp):
                return Mismatch("wrong_values", f"output {i}: integer values differ from the reference")
            continue
        o = out.double()
        r = r64.double()
        finite_ref = torch.isfinite(r)
        bad_finite = finite_ref & ~torch.isfinite(o)
        if bool(bad_finite.any()):
            n = int(bad_finite.sum())
            return Mismatch(
                "non_finite_output",
                f"output {i}: {n} NaN/Inf values where the reference is finite (unwritten output is NaN-filled)",
            )
        # Where the reference is not finite the output must be the same value: NaN where it is NaN, the same
        # infinity where it is infinite (a masked log-softmax writing 0.0 where the reference is -inf is wrong).
        ro, oo = r[~finite_ref], o[~finite_ref]
        differ = ~((torch.isnan(ro) & torch.isnan(oo)) | (ro == oo))
        if bool(differ.any()):
            k = int(torch.nonzero(differ)[0])
            return Mismatch(
                "wrong_values",
                f"output {i}: {int(differ.sum())} values differ where the reference is not finite; got "
                f"{float(oo[k]):g}, expected {float(ro[k]):g}",
            )
        rf, of = r[finite_ref], o[finite_ref]
        if rf.numel() == 0:
            continue
        scale = max(float(rf.pow(2).mean().sqrt()), scale_floor, 1e-12)
        own = (rlp.double()[finite_ref] - rf).abs()
        if ref_error is not None:
            own = torch.maximum(own, ref_error[i].double()[finite_ref])
        allowed = atol * scale + rtol * rf.abs() + own
        err = (of - rf).abs()
        excess = err > allowed
        if bool(excess.any()):
            n = int(excess.sum())
            worst = int(torch.argmax(err - allowed))
            return Mismatch(
                "wrong_values",
                f"output {i}: {n}/{rf.numel()} elements out of tolerance; worst got {float(of[worst]):.6g}, "
                f"expected {float(rf[worst]):.6g} (allowed error {float(allowed[worst]):.3g})",
                bad=n,
                total=rf.numel(),
            )
    return None


def references(
    reference: Callable[..., object], inputs: Sequence[object], device: str = "cpu"
) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """(float64 reference, reference in the task's dtype), both on the CPU, computed from copies of
    the trusted inputs on ``device`` (a GPU makes a float64 reference of a 16k x 4k x 4k matmul cheap)."""
    moved = tuple(x.detach().clone().to(device) if isinstance(x, torch.Tensor) else x for x in inputs)
    lowp = as_tuple(reference(*moved))
    r64 = as_tuple(reference(*upcast(moved)))
    return tuple(t.cpu() for t in r64), tuple(t.cpu() for t in lowp)


# The reference's rounding at one element is one draw of a random error: where torch's summation happens to land
# next to the exact value, an equally accurate kernel that sums in another order misses there. On x1e4 inputs to
# a conv3d + mish + tanh (2x32x6x10x10, 864-term sums), an fp32 im2col kernel accumulating chunks of 32 failed 6
# of 20 seeds at 1-4 of 8192 elements, though its RMS error before the activations was lower than torch's
# (0.49e-3 vs 1.2e-3). The second opinion resamples that error: the reference in the task's dtype and in float64
# on inputs scaled by 1 + U(-2^-16, 2^-16) (that moves each product's low bits past the accumulator's ulp, so
# the rounding pattern changes, and leaves the element's conditioning as it was), SPREAD_DRAWS times, and allows
# SPREAD_FACTOR x the worst draw. Same 20 seeds: the chunked kernel 0 fails (chunks of 128: 0, was 11); a naive
# one-term-at-a-time fp32 sum 1; a bf16 computation 20 of 20. Half-precision inputs move by one ulp at least.
SPREAD_DRAWS = 4
SPREAD_FACTOR = 2.0
SPREAD_JITTER = 2.0**-16
SPREAD_RARE_COUNT = 4  # more elements out than this and 1% of the output: not rounding, no second opinion


def _jittered(x: object, gen: torch.Generator) -> object:
    if not (isinstance(x, torch.Tensor) and x.is_floating_point()):
        return x
    rel = max(SPREAD_JITTER, float(torch.finfo(x.dtype).eps))
    noise = (torch.rand(x.shape, generator=gen, dtype=torch.float64) * 2 - 1) * rel
    return (x.detach().double() * (1 + noise.to(x.device))).to(x.dtype)


References = Callable[[Sequence[object]], tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]]]


def reference_spread(refs_of: References, inputs: Sequence[object], seed: int = 0) -> tuple[torch.Tensor, ...] | None:
    """Per output, SPREAD_FACTOR x the worst rounding error of the reference in its dtype over SPREAD_DRAWS
    resamplings of its inputs (see above), or None when the reference refuses the resampled inputs.
    ``refs_of(inputs)`` is (float64 reference, reference in the task's dtype), e.g. :func:`references`."""
    gen = torch.Generator().manual_seed(seed)
    worst: list[torch.Tensor] | None = None
    for _ in range(SPREAD_DRAWS):
        try:
            r64, rlp = refs_of(tuple(_jittered(x, gen) for x in inputs))
        except (RuntimeError, ValueError, AssertionError):  # it checks its inputs' exact values: stay strict
            return None
        errs = [
            torch.nan_to_num((lp.double() - r).abs(), nan=0.0, posinf=0.0)
            if lp.is_floating_point()
            else torch.zeros(r.shape, dtype=torch.float64)
            for r, lp in zip(r64, rlp)
        ]
        worst = errs if worst is None else [torch.maximum(a, b) for a, b in zip(worst, errs)]
    return None if worst is None else tuple(SPREAD_FACTOR * w for w in worst)


# An adversarial input can be ill-conditioned for the problem itself: a constant row into a layer norm has zero
# variance, so (x - mean) / sqrt(var + 1e-5) multiplies any error in the mean by 316; torch's fp32 mean of a
# constant row is exact by accident, a standard two-pass kernel's is a few ulp off, and 100% of the row misses
# (no second opinion: not rare). What any implementation must be allowed there is what the problem does to an
# error of the inputs' own resolution, as a backward-stable kernel makes it (a few ulps, grown by its sums): the
# float64 reference on inputs moved by up to CONDITION_ULPS ulps of their dtype (x * (1 + U(-k eps, k eps)),
# rounded back), CONDITION_DRAWS times; each element is allowed CONDITION_FACTOR x the larger of its own largest
# change and the output's RMS change (an element the draws happened to leave still is as ill-conditioned as its
# row). On constant rows (16 x 1031, values near 3) that allows ~1e-3 where a blocked two-pass mean is 3e-4 off;
# on random rows it is ~1e-6, nothing a wrong kernel could use.
CONDITION_DRAWS = 4
CONDITION_ULPS = 16
CONDITION_FACTOR = 2.0


def _moved(x: object, gen: torch.Generator) -> object:
    if not (isinstance(x, torch.Tensor) and x.is_floating_point()):
        return x
    eps = CONDITION_ULPS * float(torch.finfo(x.dtype).eps)
    noise = (torch.rand(x.shape, generator=gen, dtype=torch.float64) * 2 - 1) * eps
    return (x.detach().double() * (1 + noise.to(x.device))).to(x.dtype)


def input_conditioning(
    refs_of: References, inputs: Sequence[object], ref64: Sequence[torch.Tensor], seed: int = 0
) -> tuple[torch.Tensor, ...] | None:
    """Per output, CONDITION_FACTOR x the largest change of the float64 reference when the inputs move by their
    dtype's resolution (see above); None when the reference refuses the moved inputs or changes shape."""
    gen = torch.Generator().manual_seed(seed + 1)
    worst: list[torch.Tensor] | None = None
    for _ in range(CONDITION_DRAWS):
        try:
            moved64, _ = refs_of(tuple(_moved(x, gen) for x in inputs))
        except (RuntimeError, ValueError, AssertionError):
            return None
        if len(moved64) != len(ref64) or any(m.shape != r.shape for m, r in zip(moved64, ref64)):
            return None
        changes = [
            torch.nan_to_num((m.double() - r.double()).abs(), nan=0.0, posinf=0.0)
            if r.is_floating_point()
            else torch.zeros(r.shape, dtype=torch.float64)
            for m, r in zip(moved64, ref64)
        ]
        worst = changes if worst is None else [torch.maximum(a, b) for a, b in zip(worst, changes)]
    if worst is None:
        return None
    return tuple(
        CONDITION_FACTOR * torch.clamp_min(w, float(w.pow(2).mean().sqrt()) if w.numel() else 0.0) for w in worst
    )


def compare_with_spread(
    outs: Sequence[torch.Tensor],
    ref64: Sequence[torch.Tensor],
    ref_lowp: Sequence[torch.Tensor],
    atol: float,
    rtol: float,
    refs_of: References,
    inputs: Sequence[object],
    seed: int = 0,
    scale_floor: float = 0.0,
    conditioned: bool = False,
) -> Mismatch | None:
    """:func:`compare_outputs`, and where only a few elements miss, again with the reference's resampled
    rounding allowed (:func:`reference_spread`, seeded by ``seed`` so a verdict replays). ``conditioned`` (the
    task's adversarial inputs): what the problem's conditioning at these inputs allows is allowed too
    (:func:`input_conditioning`), however many elements it concerns."""
    mismatch = compare_outputs(outs, ref64, ref_lowp, atol, rtol, scale_floor)
    if mismatch is None or mismatch.reason != "wrong_values":
        return mismatch
    allowed: list[torch.Tensor] | None = None
    if conditioned:
        condition = input_conditioning(refs_of, inputs, ref64, seed)
        if condition is not None:
            allowed = list(condition)
            mismatch = compare_outputs(outs, ref64, ref_lowp, atol, rtol, scale_floor, ref_error=allowed)
            if mismatch is None:
                return None
    if not mismatch.rare:
        return mismatch
    spread = reference_spread(refs_of, inputs, seed)
    if spread is None or len(spread) != len(ref64) or any(s.shape != r.shape for s, r in zip(spread, ref64)):
        return mismatch
    both = spread if allowed is None else tuple(torch.maximum(a, b) for a, b in zip(allowed, spread))
    return compare_outputs(outs, ref64, ref_lowp, atol, rtol, scale_floor, ref_error=both)


def forward_references(reference: Callable[..., object], device: str = "cpu") -> References:
    """:func:`references` of ``reference`` on given inputs: what :func:`compare_with_spread` resamples."""
    return lambda inputs: references(reference, inputs, device)


def is_sentinel(out: torch.Tensor, sentinel: float) -> torch.Tensor:
    if math.isnan(sentinel):
        return torch.isnan(out)
    return out == torch.tensor(sentinel, dtype=out.dtype)


@dataclass(frozen=True)
class PrecisionProbe:
    """What :func:`refine` needs to test the precision-loss hypotheses of an fp32 case: the reference, the
    case's trusted inputs, the fp32 tolerance and where the reference runs."""

    reference: Callable[..., object]
    inputs: Sequence[object]
    atol: float
    rtol: float
    device: str = "cpu"


# Unit roundoff (half an ulp, relative) of the precisions an fp32 kernel is quietly computed through:
# tf32 and fp16 keep 10 explicit mantissa bits (2**-11), bf16 keeps 7 (2**-8).
LOWER_PRECISIONS: tuple[tuple[str, float], ...] = (("tf32", 2.0**-11), ("fp16", 2.0**-11), ("bf16", 2.0**-8))


def round_to(x: torch.Tensor, precision: str) -> torch.Tensor:
    """fp32 ``x`` rounded to ``precision`` and back: what a kernel holds after converting to it.

    bf16/fp16: PyTorch's round-to-nearest-even (Triton's ``.to()`` rounds the same way on a GPU); tf32: round
    to nearest, ties away from zero, on the 13 low mantissa bits (``cvt.rna.tf32.f32``, what Triton emits);
    ``bf16-rtz``: truncation to bf16 (``fp_downcast_rounding="rtz"``, and what Triton's interpreter does for
    ``.to(tl.bfloat16)``: 100% of 100,000 normal inputs matched truncation, 49.9% round-to-nearest).
    """
    if precision == "bf16-rtz":
        bits = x.float().contiguous().view(torch.int32)
        truncated = (bits & ~0xFFFF).view(torch.float32)
        return torch.where(torch.isfinite(x), truncated, x.float()).to(x.dtype)
    if precision == "bf16":
        return x.to(torch.bfloat16).to(x.dtype)
    if precision == "fp16":
        return x.to(torch.float16).to(x.dtype)
    bits = x.float().contiguous().view(torch.int32)
    rounded = ((bits + 0x1000) & ~0x1FFF).view(torch.float32)
    return torch.where(torch.isfinite(x), rounded, x.float()).to(x.dtype)


def _within(
    outs: Sequence[torch.Tensor],
    model: Sequence[torch.Tensor],
    ref64: Sequence[torch.Tensor],
    ref_lowp: Sequence[torch.Tensor],
    atol: float,
    rtol: float,
    precision: str,
    u: float,
) -> bool:
    """Every output equals ``model`` within the fp32 allowance, plus one rounding to ``precision`` where the
    output is exactly representable there (the kernel rounded its result to that precision)."""
    for out, m, r, rlp in zip(outs, model, ref64, ref_lowp):
        if not out.is_floating_point():
            continue
        o, m, r = out.double(), m.double(), r.double()
        finite = torch.isfinite(r) & torch.isfinite(m)
        if not bool(torch.isfinite(o[finite]).all()):
            return False
        o, m, r, lp = o[finite], m[finite], r[finite], rlp.double()[finite]
        if o.numel() == 0:
            continue
        scale = max(float(r.pow(2).mean().sqrt()), 1e-12)
        allowed = atol * scale + rtol * r.abs() + (lp - r).abs()
        if precision != "tf32" and bool((round_to(out[finite.to(out.device)].float(), precision).double() == o).all()):
            allowed = allowed + u * m.abs()
        if bool(((o - m).abs() > allowed).any()):
            return False
    return True


def precision_loss(
    outs: Sequence[torch.Tensor], ref64: Sequence[torch.Tensor], ref_lowp: Sequence[torch.Tensor], probe: PrecisionProbe
) -> str | None:
    """The lower precision whose loss explains the outputs exactly, or None (then the values are just wrong).

    Two hypotheses per precision, each a specific pattern rather than an error size:
    - the output rounded: every value representable in bf16/fp16 and within one rounding of the reference;
    - the inputs rounded: the outputs match the float64 reference computed from inputs rounded to that
      precision, within the fp32 tolerance (plus one rounding if the output is rounded too).
    An output 1% off everywhere, or shifted by a constant, matches neither.
    """
    if len(outs) != len(ref64) or any(tuple(o.shape) != tuple(r.shape) for o, r in zip(outs, ref64)):
        return None
    for precision, u in LOWER_PRECISIONS:
        if precision != "tf32" and _within(outs, ref64, ref64, ref_lowp, probe.atol, probe.rtol, precision, u):
            return precision
    for precision, u in LOWER_PRECISIONS + (("bf16-rtz", 2.0**-8),):  # inputs truncated, modelled exactly
        rounded = tuple(
            round_to(x, precision) if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x
            for x in probe.inputs
        )
        model, _ = references(probe.reference, rounded, probe.device)
        if len(model) == len(outs) and _within(outs, model, ref64, ref_lowp, probe.atol, probe.rtol, precision, u):
            return precision
    return None


def refine(
    mismatch: Mismatch,
    outs: Sequence[torch.Tensor],
    ref64: Sequence[torch.Tensor],
    ref_lowp: Sequence[torch.Tensor],
    sentinel: float,
    probe: PrecisionProbe | None = None,
) -> Mismatch:
    """A more specific reason for a mismatch, from the shape of the error.

    - ``output_unwritten``: an output still holds the allocation sentinel everywhere (nothing wrote it,
      e.g. a launch that returns ``torch.empty`` hoping for the reference's freed memory);
    - ``constant_output``: every element is the same value (zeros included);
    - ``precision_downgrade``: an fp32 result that :func:`precision_loss` explains (``probe`` is given only
      for fp32 cases); an error merely small enough for half-precision tolerances is not evidence.
    """
    floats = [o for o in outs if o.is_floating_point() and o.numel()]
    for i, out in enumerate(outs):
        # A NaN sentinel cannot be told from a computed NaN; the rerun pair (judge/judge.py) decides those.
        if math.isnan(sentinel):
            break
        if out.is_floating_point() and out.numel() and bool(is_sentinel(out, sentinel).all()):
            return Mismatch(
                "output_unwritten",
                f"output {i} still holds the allocation sentinel ({sentinel}) "
                "everywhere: launch returned memory that no kernel wrote",
            )
    for i, out in enumerate(floats):
        if out.numel() >= 2 and bool((out == out.reshape(-1)[0]).all()):
            value = float(out.reshape(-1)[0])
            return Mismatch("constant_output", f"output {i} is the constant {value:g} everywhere; {mismatch.message}")
    # Integer and boolean outputs are judged exactly: no rounding explains them (precision_loss skips them,
    # so a wrong argmax alone was "explained" by fp16 and named precision_downgrade).
    exact = any(not o.is_floating_point() for o in outs)
    if probe is not None and mismatch.reason == "wrong_values" and not exact:
        precision = precision_loss(outs, ref64, ref_lowp, probe)
        if precision is not None:
            return Mismatch(
                "precision_downgrade",
                f"an fp32 result that is exactly what computing through "
                f"{precision} gives (its inputs or its output rounded to {precision}): keep fp32 "
                f"(e.g. tl.dot(..., input_precision='ieee')); {mismatch.message}",
            )
    return mismatch


_LINT: dict[tuple[str, str], str | None] = {}


def lint_task(task: Any) -> str | None:
    """Why the task cannot tell a kernel from a constant, or None.

    A task on which an all-zeros output, or the best constant (the mean of the float64 reference, for outputs of
    more than one element), passes every check shape is in error: a candidate writing that constant would be
    'correct'. Typical causes: tolerances far too loose, or a reference that is constant on the check shapes.
    Cached per task file.
    """
    key = (str(task.path), task.source_hash)
    if key in _LINT:
        return _LINT[key]
    shapes = list(task.check_shapes or task.small_shapes or task.shapes)
    dtype = task.dtypes[0]
    atol, rtol = task.tolerance(dtype)
    zeros_pass = const_pass = True
    const_seen = False
    for shape in shapes:
        for seed in (1, 2):
            r64, rlp = references(task.reference, task.make_inputs(dict(shape), dtype, seed, "cpu"))
            zeros = [torch.zeros_like(r) for r in rlp]
            consts = [
                torch.full_like(r, float(q.double().mean()))
                if r.is_floating_point() and r.numel()
                else torch.zeros_like(r)
                for r, q in zip(rlp, r64)
            ]
            zeros_pass = zeros_pass and compare_outputs(zeros, r64, rlp, atol, rtol) is None
            # A one-element output's mean is its answer, not a constant standing in for one: such a case says
            # nothing about constants (a loss reduced to a scalar was "degenerate" on every check shape).
            if any(r.is_floating_point() and r.numel() == 1 for r in rlp):
                continue
            const_seen = True
            const_pass = const_pass and compare_outputs(consts, r64, rlp, atol, rtol) is None
    problem = None
    if zeros_pass or (const_pass and const_seen):
        what = "an all-zeros output" if zeros_pass else "a constant output (the reference's mean)"
        problem = (
            f"task {task.name}: {what} passes every check shape with tolerance (atol={atol}, rtol={rtol}) "
            f"for {dtype}; tighten TOLERANCES or use check shapes whose reference varies"
        )
    _LINT[key] = problem
    return problem
