"""Shuffled grid order for Triton's interpreter (runs in the child, before the candidate is imported).

The interpreter runs a kernel's programs one after another in grid order (``GridExecutor.__call__``
in triton/runtime/interpreter.py, Triton 3.9), so a kernel whose programs race (program i reads what
program i - 1 wrote) passes there and fails on a GPU. With ``GridOrder.shuffled`` set, the programs of
every launch run in a random order drawn from the parent's seed; the check runs alternate cases in
order and shuffled (never the identity), and both must be right.
"""

from __future__ import annotations

import random
from typing import Any


class GridOrder:
    """Replaces ``GridExecutor.__call__`` with the same steps over a (possibly shuffled) program order."""

    shuffled = False
    rng = random.Random(0)

    @classmethod
    def install(cls, seed: int) -> None:
        import inspect

        import triton
        from triton.runtime import interpreter as interp

        cls.rng = random.Random(seed)

        def call(self: Any, *args_dev: Any, **kwargs: Any) -> None:
            argspec = inspect.getfullargspec(self.fn)
            kwargs = {k: v for k, v in kwargs.items() if k in argspec.args or k in argspec.kwonlyargs}
            args_hst, kwargs_hst = self._init_args_hst(args_dev, kwargs)
            for hook in self.pre_run_hooks:
                hook(*args_hst, **kwargs_hst)
            patch_scope = interp._patch_lang(self.fn)
            try:
                args = inspect.getcallargs(self.fn, *args_hst, **kwargs_hst)
                args = {name: arg if name in self.constexprs else interp._implicit_cvt(arg)
                        for name, arg in args.items()}
                grid = self.grid(args) if callable(self.grid) else self.grid
                assert len(grid) <= 3, "grid must have at most 3 dimensions"
                grid = tuple(grid) + (1,) * (3 - len(grid))
                interp.interpreter_builder.set_grid_dim(*grid)
                order = [(x, y, z) for x in range(grid[0]) for y in range(grid[1]) for z in range(grid[2])]
                if cls.shuffled and len(order) > 1:
                    ordered = list(order)
                    cls.rng.shuffle(order)
                    if order == ordered:  # never the grid order itself (1 in n! draws): run it backwards
                        order.reverse()
                try:
                    for x, y, z in order:
                        interp.interpreter_builder.set_grid_idx(x, y, z)
                        self.fn(**args)
                except Exception as e:
                    if triton.knobs.compilation.front_end_debugging:
                        raise
                    raise interp.InterpreterError(repr(e)) from e
            finally:
                patch_scope.restore()
            self._restore_args_dev(args_dev, args_hst, kwargs, kwargs_hst)

        interp.GridExecutor.__call__ = call  # type: ignore[method-assign]
