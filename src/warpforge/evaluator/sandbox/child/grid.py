"""Shuffled grid order for Triton's interpreter (runs in the child, before the candidate is imported).

The interpreter runs a kernel's programs one after another in grid order (``GridExecutor.__call__``
in triton/runtime/interpreter.py, Triton 3.9), so a kernel whose programs race (program i reads what
program i - 1 wrote) passes there and fails on a GPU. With ``GridOrder.shuffled`` set, the programs of
every launch run in a random order drawn from the parent's seed; the check runs alternate cases in
order and shuffled (never the identity), and both must be right.

The switch is the judge's (the parent draws the seed and picks the shuffled cases); what runs here is a
claim: every launch logs its grid and a digest of the order it ran, and the judge replays the orders from
its seed (judge.Judge._grid_orders), so a candidate that turned the shuffle off, or replaced the
executor, is refused as ``grid_order_tampered``.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from warpforge.evaluator.sandbox.child.races import Races


def order_digest(order: list[tuple[int, int, int]]) -> str:
    """What the judge compares: 16 hex digits of the SHA-256 of the program order."""
    return hashlib.sha256(repr(order).encode()).hexdigest()[:16]


def expected_order(grid: tuple[int, int, int], shuffled: bool, rng: random.Random) -> list[tuple[int, int, int]]:
    """The order a launch runs in: grid order, or ``rng``'s shuffle of it (never the identity). The
    child runs it; the judge replays it from the same seed."""
    order = [(x, y, z) for x in range(grid[0]) for y in range(grid[1]) for z in range(grid[2])]
    if shuffled and len(order) > 1:
        ordered = list(order)
        rng.shuffle(order)
        if order == ordered:  # never the grid order itself (1 in n! draws): run it backwards
            order.reverse()
    return order


# The interpreter's own torch calls while it moves a launch's arguments (``_init_args_hst`` and
# ``_restore_args_dev`` in triton/runtime/interpreter.py, Triton 3.4-3.9, as recorded on 3.9): a host view of
# each argument's storage (new_empty + set_), then the copy back (empty + set_ + copy_); fill_ is the harness's
# sentinel on new_empty. Any other torch operator during a launch, and any at all while the kernel's programs
# run, is compute the kernel did not do (``torch_compute_call``).
PLUMBING_OPS = frozenset({"new_empty", "set_", "empty", "copy_", "fill_"})


class Phase:
    """Where an interpreted launch is: ``plumbing`` (moving arguments), ``programs`` (running the kernel) or
    ``outside``; the op recorder (common.OpRecorder) reads it."""

    now = "outside"


def _fp32(value: float) -> Any:
    """A Python float argument as the compiled kernel receives it: a ``.param .f32`` (not a Python fp64)."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter as interp

    return tl.tensor(interp.TensorHandle(np.array([value], dtype=np.float32), tl.float32), tl.float32)


def check_layout() -> None:
    """Fail closed: the interpreter internals the replacement below relies on (Triton 3.4-3.9)."""
    from triton.runtime import interpreter as interp

    from warpforge.evaluator.sandbox.child.faithful import InterpreterLayout

    missing = [
        name
        for name in (
            "GridExecutor",
            "_patch_lang",
            "_implicit_cvt",
            "interpreter_builder",
            "InterpreterError",
            "TensorHandle",
        )
        if not hasattr(interp, name)
    ]
    missing += [
        f"GridExecutor.{m}"
        for m in ("_init_args_hst", "_restore_args_dev")
        if not hasattr(getattr(interp, "GridExecutor", None), m)
    ]
    missing += [
        f"interpreter_builder.{m}"
        for m in ("set_grid_dim", "set_grid_idx")
        if not hasattr(getattr(interp, "interpreter_builder", None), m)
    ]
    if missing:
        raise InterpreterLayout(
            f"triton.runtime.interpreter lacks {missing}: the evaluator cannot run kernels faithfully on this Triton"
        )


def args_hst_named(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The launch's host arguments by parameter name (where a race's address is reported)."""
    import inspect

    try:
        return dict(inspect.getcallargs(fn, *args, **kwargs))
    except TypeError:
        return {f"arg{i}": a for i, a in enumerate(args)}


class GridOrder:
    """Replaces ``GridExecutor.__call__`` with the same steps over a (possibly shuffled) program order."""

    shuffled = False
    rng = random.Random(0)
    # One entry per launch: [gx, gy, gz, shuffled, sha16 of the order run]. A claim: the judge replays
    # the order from its own seed (judge.Judge._grid_orders) and refuses a run whose claims disagree.
    log: list[list[Any]] = []

    @classmethod
    def install(cls, seed: int) -> None:
        import inspect

        import triton
        import triton.language as tl
        from triton.runtime import interpreter as interp

        check_layout()
        cls.rng = random.Random(seed)

        def call(self: Any, *args_dev: Any, **kwargs: Any) -> None:
            try:
                run(self, *args_dev, **kwargs)
            finally:
                Phase.now = "outside"

        def run(self: Any, *args_dev: Any, **kwargs: Any) -> None:
            argspec = inspect.getfullargspec(self.fn)
            kwargs = {k: v for k, v in kwargs.items() if k in argspec.args or k in argspec.kwonlyargs}
            Phase.now = "plumbing"
            args_hst, kwargs_hst = self._init_args_hst(args_dev, kwargs)
            Phase.now = "programs"
            for hook in self.pre_run_hooks:
                hook(*args_hst, **kwargs_hst)
            patch_scope = interp._patch_lang(self.fn)
            try:
                args = inspect.getcallargs(self.fn, *args_hst, **kwargs_hst)
                # a dtype constexpr reaches the kernel as the compiler passes it, a tl.constexpr (``DT.value`` in
                # a jit helper failed only on the CPU); other constexprs stay the Python values they compile to
                args = {
                    name: (tl.constexpr(arg) if isinstance(arg, tl.dtype) else arg)
                    if name in self.constexprs
                    else _fp32(arg)
                    if isinstance(arg, float)
                    else interp._implicit_cvt(arg)
                    for name, arg in args.items()
                }
                grid = self.grid(args) if callable(self.grid) else self.grid
                assert len(grid) <= 3, "grid must have at most 3 dimensions"
                grid = tuple(grid) + (1,) * (3 - len(grid))
                interp.interpreter_builder.set_grid_dim(*grid)
                order = expected_order(grid, bool(cls.shuffled), cls.rng)
                cls.log.append([*grid[:3], bool(cls.shuffled), order_digest(order)])
                Races.begin()
                try:
                    for index, (x, y, z) in enumerate(order):
                        Races.program = index
                        interp.interpreter_builder.set_grid_idx(x, y, z)
                        self.fn(**args)
                    Races.end(order, args_hst_named(self.fn, args_hst, kwargs_hst))
                except Exception as e:
                    if triton.knobs.compilation.front_end_debugging:
                        raise
                    raise interp.InterpreterError(repr(e)) from e
            finally:
                Races.recording = False
                patch_scope.restore()
                Phase.now = "plumbing"
            self._restore_args_dev(args_dev, args_hst, kwargs, kwargs_hst)

        interp.GridExecutor.__call__ = call  # type: ignore[method-assign]
