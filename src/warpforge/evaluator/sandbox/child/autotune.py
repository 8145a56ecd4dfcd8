"""A configuration chosen by the trusted side, and ``@triton.autotune`` with it (runs in the child, before the
candidate is imported).

A list-form SPACE and an autotuned kernel's ``triton.Config`` list are one space parameter, CONFIG_PARAM, whose
values label the configurations (kernels/space_values.py; the autotuner's are read from the tree the grammar
checked, kernels/autotune_space.py). The label the trusted side chose is taken out of the job's parameters here
and replaced by the values it names, which ``constraints`` and ``launch`` receive as keywords. If the candidate
autotunes a kernel, ``triton.autotune`` (replaced here) builds Triton's own ``Autotuner`` with the chosen
configuration alone and takes its values back out of launch's parameters (the autotuner passes them), so nothing in
the candidate's process benchmarks or decides: with one configuration the autotuner runs it, through the kernel
gate like any other launch.
"""

from __future__ import annotations

from typing import Any

from warpforge.kernels.space_values import CONFIG_PARAM, label_values


class AutotuneRefused(RuntimeError):
    """An autotuned kernel without a configuration chosen by the trusted side, or one it does not have."""


def install(params: dict[str, Any]) -> None:
    """Replace a configuration label in ``params`` (in place) by its values, and replace ``triton.autotune``."""
    import triton

    label = params.pop(CONFIG_PARAM, None)
    index, values = label_values(label) if label is not None else (-1, {})
    params.update(values)
    original = triton.autotune

    def autotune(configs: list[Any], key: list[str], **kwargs: Any) -> Any:
        if label is None:
            raise AutotuneRefused(
                "@triton.autotune without a configuration chosen by the evaluator (the variant's "
                f"space is its configurations: {CONFIG_PARAM})"
            )
        if not 0 <= index < len(configs):
            raise AutotuneRefused(f"configuration {label!r} is not one of the kernel's {len(configs)}")
        for name in values:  # the autotuner passes them to the kernel; launch never sees them
            params.pop(name, None)
        return original(configs=[configs[index]], key=key, **kwargs)

    autotune.__module__ = original.__module__
    triton.autotune = autotune
