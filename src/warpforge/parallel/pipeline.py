"""Pipeline schedules: stage layout, 1F1B / interleaved step time and in-flight activations.

With ``m`` micro-batches, ``p`` stages and ``v`` model chunks per stage (v = 1: plain 1F1B), and
per-micro-batch stage times ``T_i`` (forward + backward of all chunks on rank i), the pipeline takes
``m * max(T) + (sum(T) - max(T)) / v``: for equal stages that is ``(m + (p - 1) / v) * T``, so the bubble
is ``(p - 1) / (m + p - 1)`` of the step for 1F1B (Narayanan et al., SC'21, eq. 1 and 2).

Example::

    >>> pipeline_time([1.0] * 4, m=8, v=1)
    (11.0, 3.0)
    >>> stage_layers(61, 16)[:3], sum(stage_layers(61, 16))
    ([2, 4, 4], 61)
"""

from __future__ import annotations


def stage_layers(layers: int, pp: int, first: int | None = None, last: int | None = None) -> list[int]:
    """Layers per pipeline rank. Even when divisible; otherwise every middle stage takes ceil(L/p) and the
    first and last stages (which also hold the embedding and the LM head) share the remainder, as
    Megatron-LM's ``--decoder-first/last-pipeline-num-layers`` allow. ``first`` / ``last`` set those two
    stages explicitly; the middle stages then split the rest evenly (ValueError when they cannot)."""
    if pp == 1:
        return [layers]
    if first is not None or last is not None:
        f = first if first is not None else 0
        la = last if last is not None else 0
        mid_n = pp - (first is not None) - (last is not None)
        rest = layers - f - la
        if rest < 0 or (mid_n == 0 and rest) or (mid_n and (rest % mid_n or rest // mid_n < 1)):
            raise ValueError(
                f"first {first} / last {last} stage layers leave {rest} layers that do not split "
                f"evenly over the other {mid_n} stages"
            )
        middle = [rest // mid_n] * mid_n if mid_n else []
        return ([f] if first is not None else []) + middle + ([la] if last is not None else [])
    if layers % pp == 0:
        return [layers // pp] * pp
    mid = -(-layers // pp)
    rest = layers - mid * (pp - 2)
    if pp == 2 or rest < 2:
        base, extra = divmod(layers, pp)
        return [base + (1 if i >= pp - extra else 0) for i in range(pp)]
    head = rest // 2
    return [head] + [mid] * (pp - 2) + [rest - head]


def pipeline_time(stage_times: list[float], m: int, v: int) -> tuple[float, float]:
    """(pipeline seconds, bubble seconds) for per-micro-batch stage times (fwd + bwd of all chunks)."""
    t_max = max(stage_times)
    fill = (sum(stage_times) - t_max) / v
    return m * t_max + fill, fill


def in_flight_chunks(rank: int, pp: int, m: int, v: int) -> int:
    """Model chunks whose activations rank ``rank`` holds at the 1F1B peak (Megatron's warm-up count + 1):
    ``p - r`` micro-batches for 1F1B; ``2(p - 1 - r) + (v - 1)p + 1`` chunks when interleaved."""
    if v == 1:
        return min(m, pp - rank)
    return min(m * v, 2 * (pp - 1 - rank) + (v - 1) * pp + 1)


def bubble_fraction(pp: int, m: int, v: int = 1) -> float:
    """Idle fraction of the step for equal stages: (p - 1) / (v m + p - 1)."""
    return (pp - 1) / (v * m + pp - 1)
