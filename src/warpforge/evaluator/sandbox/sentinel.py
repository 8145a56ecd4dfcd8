"""What a fresh integer or boolean allocation holds under a case's (float) sentinel: the sandboxed child fills
outputs with it (child/common.py ``Sentinel``), the judge reads it back (judge/judge.py). Below both.

Example::

    >>> exact_sentinel(torch.int32, float("nan")), exact_sentinel(torch.bool, 0.0)
    (-2147483648, False)
"""

from __future__ import annotations

import math

import torch


def exact_sentinel(dtype: torch.dtype, sentinel: float) -> int | bool:
    """What a fresh integer or boolean allocation holds under a case's (float) sentinel: the dtype's
    minimum under NaN, its maximum under a finite one (bool: True, False). An unfilled integer output held
    whatever the allocator returned, which under the interpreter was a freed copy of the right answer: an
    honest argmax was judged ``kernel_bypass`` in 2 of 5 runs. No argmax or count is ever the minimum of
    int64/int32 and the maximum in the rerun, so an element that is both was never written."""
    if dtype == torch.bool:
        return math.isnan(sentinel)
    info = torch.iinfo(dtype)
    return int(info.min if math.isnan(sentinel) else info.max)
