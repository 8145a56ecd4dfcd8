"""``@triton.autotune`` with the trusted side's choice (runs in the child, before the candidate is imported).

The grammar reads an autotuned kernel's ``triton.Config`` list as literal data and makes it the variant's space
(kernels/autotune_space.py: one parameter, AUTOTUNE_PARAM, whose values label the configurations by position).
The trusted side chooses one and sends its label among the job's parameters; here it is taken out of them
(``launch`` never sees it) and ``triton.autotune`` is replaced by a decorator that builds Triton's own
``Autotuner`` with that one configuration, so nothing in the candidate's process benchmarks or decides: with one
configuration the autotuner runs it (its launch goes through the kernel gate like any other).
"""

from __future__ import annotations

from typing import Any

from warpforge.kernels.autotune_space import AUTOTUNE_PARAM, config_index


class AutotuneRefused(RuntimeError):
    """An autotuned kernel without a configuration chosen by the trusted side, or one it does not have."""


def install(params: dict[str, Any]) -> None:
    """Take the chosen configuration out of ``params`` (in place) and replace ``triton.autotune``."""
    import triton

    label = params.pop(AUTOTUNE_PARAM, None)
    original = triton.autotune

    def autotune(configs: list[Any], key: list[str], **kwargs: Any) -> Any:
        if label is None:
            raise AutotuneRefused("@triton.autotune without a configuration chosen by the evaluator (the variant's "
                                  f"space is its configurations: pass {AUTOTUNE_PARAM})")
        index = config_index(str(label))
        if not 0 <= index < len(configs):
            raise AutotuneRefused(f"configuration {label!r} is not one of the kernel's {len(configs)}")
        return original(configs=[configs[index]], key=key, **kwargs)

    autotune.__module__ = original.__module__
    triton.autotune = autotune
