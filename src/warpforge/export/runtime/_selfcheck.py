"""The check that travels with the kernel (written by warpforge export; needs only torch).

warpforge judged each op at the shapes its campaign chose, on the device it had (often Triton's interpreter on a
CPU). A call at another shape, dtype or device is something nobody checked. So the first call of each new
signature (the op's named shape, the dtype and the device) also runs the task's reference on the same inputs and,
where the task defines them, the kernel on the task's adversarial inputs at that shape (large offsets, extreme
magnitudes, -inf), each compared as warpforge's judge compares (``_testing.assert_matches_reference``: the
reference in float64, the task's tolerance for the dtype). A mismatch, or a kernel that raises, disables the kernel
for that signature: that call and every later one with the signature run the PyTorch reference, and one warning
says why. A CPU ``ok`` is then a claim the first GPU confirms or retracts by itself.

The check costs one reference call in float64 and one in the call's dtype, plus a kernel and two reference calls
per adversarial set, once per signature; calls traced by ``torch.compile`` are not checked (no values to compare).
``<ns>.verified()`` lists each signature checked, where, and the outcome; ``<NS>_SELF_CHECK=0`` in the
environment before the package is imported, or ``<ns>.self_check(False)``, turns the check off (production after
verification).

Example::

    >>> self_check(False); enabled()
    False
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from . import _testing

# The adversarial sets are drawn with this seed: a refused signature is reproduced by calling again in a new process.
SEED = 0
CALL = "the call's own inputs"


@dataclass(frozen=True)
class Checked:
    """One signature's first-use check."""

    op: str
    shape: dict[str, int]
    dtype: str
    device: str
    ok: bool
    cases: tuple[str, ...] = ()  # what agreed, in order: the call's own inputs, then each adversarial set
    why: str = ""  # the first disagreement (the set and the comparison's first line); "" when ok
    extra: dict[str, Any] = field(default_factory=dict)


_records: dict[tuple[str, str, str, str], Checked] = {}


def _env_name() -> str:
    package = __name__.rpartition(".")[0] or "WARPFORGE_OPS"
    return package.replace(".", "_").upper() + "_SELF_CHECK"


_switch: list[bool] = [os.environ.get(_env_name(), "1").strip().lower() not in ("0", "false", "no", "off")]


def enabled() -> bool:
    """Whether new signatures are checked: ``self_check()``'s last word, else the environment at import (on by
    default). Read on every call of an op, so nothing is looked up here."""
    return _switch[-1]


def self_check(on: bool = True) -> None:
    """Turn the first-use check on or off for this process (signatures already refused stay refused)."""
    _switch[:] = [bool(on)]


def verified() -> list[Checked]:
    """Every signature checked in this process, in the order first called."""
    return list(_records.values())


def _key(op: str, shape: Mapping[str, int], dtype: str, device: Any) -> tuple[str, str, str, str]:
    return op, ",".join(f"{k}={v}" for k, v in sorted(shape.items())), dtype, str(device)


def refused(op: str, shape: Mapping[str, int], dtype: str, device: Any) -> bool:
    """The check disagreed at this signature: run the reference."""
    record = _records.get(_key(op, shape, dtype, device))
    return record is not None and not record.ok


def _real(value: Any) -> bool:
    # Tracing (torch.compile, torch.export, opcheck's fake tensors) hands the body tensor subclasses with no
    # values to compare; a Parameter is a plain tensor with a flag.
    return not isinstance(value, torch.Tensor) or type(value) in (torch.Tensor, torch.nn.Parameter)


def pending(op: str, shape: Mapping[str, int], dtype: str, device: Any, inputs: Sequence[Any], out: Any) -> bool:
    """This call should be checked: the check is on, the signature new, and the values real (not traced)."""
    if not enabled() or _key(op, shape, dtype, device) in _records:
        return False
    compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if compiling is not None and compiling():
        return False
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return all(_real(v) for v in (*inputs, *outs))


def check(
    op: str,
    shape: Mapping[str, int],
    dtype: str,
    device: Any,
    out: Any,
    inputs: Sequence[Any],
    kernel: Callable[..., Any],
    reference_module: Any,
    tolerance: tuple[float, float],
) -> bool:
    """Judge the kernel's ``out`` on the call's ``inputs`` and ``kernel`` on the task's adversarial inputs at this
    shape against the reference; record the outcome (warn once when it disagrees) and return it."""
    atol, rtol = tolerance
    reference = reference_module.reference
    cases: list[str] = []
    why = ""
    with torch.no_grad():
        try:
            _testing.assert_matches_reference(out, reference, inputs, atol, rtol)
            cases.append(CALL)
            adversarial = getattr(reference_module, "adversarial_inputs", None)
            sets = adversarial(dict(shape), getattr(torch, dtype), SEED, str(device)) if adversarial else {}
            for name, values in sets.items():
                why = f"adversarial inputs {name!r}"
                _testing.assert_matches_reference(kernel(*values), reference, values, atol, rtol)
                cases.append(name)
            why = ""
        except Exception as exc:  # noqa: BLE001 - an AssertionError, or the kernel raising on those inputs
            message = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            why = f"{why or CALL}: {type(exc).__name__}: {message}"[:400]
    record = Checked(op, dict(shape), dtype, str(device), not why, tuple(cases), why)
    _records[_key(op, shape, dtype, device)] = record
    if why:
        warnings.warn(
            f"{op}: the kernel disagrees with the reference at {dict(shape)} {dtype} on {device} ({why}); this "
            "signature runs the PyTorch reference from now on",
            RuntimeWarning,
            stacklevel=3,
        )
    return record.ok
