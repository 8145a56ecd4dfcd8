"""A token embedding ``out = weight[ids]``, exactly ``torch.nn.functional.embedding``, forward and backward.

``ids`` is int64 ``[M]`` with values in ``[0, V)`` (a batch's tokens, leading dimensions flattened); ``weight``
is ``[V, N]`` (an ``nn.Embedding`` weight: vocabulary x hidden); ``out`` is ``[M, N]`` in the weight's dtype,
row ``i`` a copy of row ``ids[i]``. The forward is a gather: no rounding, so it is judged bit-exact. The
gradient is of the weight only (the ids are indices): ``dW[v] = sum of grad_out[i] over every i with
ids[i] == v`` (zero for rows no id hits), accumulated in fp32 and rounded once to the weight's dtype.

Example::

    >>> import torch
    >>> from warpforge.kernels.tasks import embedding
    >>> ids, weight = embedding.make_inputs({"M": 4, "V": 10, "N": 3}, torch.float32, seed=0, device="cpu")
    >>> torch.equal(embedding.reference(ids, weight), weight[ids])
    True
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

NAME = "embedding"
KIND = "embedding"
DESCRIPTION = (
    "out = weight[ids] (torch.nn.functional.embedding), int64 ids [M] in [0, V), weight [V, N]; "
    "fp16/bf16/fp32, bit-exact gather; backward dW = fp32 index-add of grad rows (ids repeat)"
)

# Llama-3's 128256-token vocabulary at hidden 4096 (Llama-3-8B) over 4096 and 8192 tokens, and Llama-2 /
# Mistral-7B's 32000 x 4096. The weight is 1 GiB in bf16 at V = 128256 (V * N = 525M elements, a quarter of
# int32's range: row offsets are computed in int64, so a 256k x 8192 table, 2.1G elements, stays right).
SHAPES: list[dict[str, int]] = [
    {"M": 4096, "V": 128256, "N": 4096},
    {"M": 8192, "V": 128256, "N": 4096},
    {"M": 4096, "V": 32000, "N": 4096},
]

# M = 1; primes for N (131, 257: one past a 128- and a 256-wide tile) and V (1031, past 1024); V below M
# (50 rows for 130 ids: every row hit ~2.6 times) so the backward must accumulate; every weight under 20k
# elements so the interpreter stays fast.
CHECK_SHAPES: list[dict[str, int]] = [
    {"M": 1, "V": 300, "N": 64},
    {"M": 67, "V": 97, "N": 131},
    {"M": 130, "V": 50, "N": 257},
    {"M": 33, "V": 1031, "N": 13},
]

SMALL_SHAPES: list[dict[str, int]] = [{"M": 512, "V": 4099, "N": 256}]

DTYPES: list[torch.dtype] = [torch.float16, torch.bfloat16, torch.float32]

# A gather copies bits: any difference from weight[ids] is a wrong row or a rounding that should not exist.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (0.0, 0.0),
    torch.bfloat16: (0.0, 0.0),
    torch.float32: (0.0, 0.0),
}

# Training: the gradient of the weight only (the ids are indices).
GRAD_INPUTS = (1,)
# dW is an fp32 sum of the grad rows of each id, in an order the kernel chooses (atomics, or by position),
# rounded once: half an ulp of the output (2^-11 fp16, 2^-8 bf16; the interpreter truncates bf16, 2^-7) plus
# fp32 reordering (~1e-7 relative for the tens of terms of a hot row); 0, the forward's, would refuse the
# reordering itself. The judge also allows the reference's own rounding: torch's CPU backward sums fp16/bf16
# rows in fp16/bf16 (so a CPU judgement lets that through), its CUDA one accumulates in fp32.
GRAD_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (8e-3, 8e-3),
    torch.float32: (1e-5, 1e-5),
}


def reference(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    # a gather is exact in any dtype: no upcast (float64 weights give the float64 reference)
    return F.embedding(ids.long(), weight)


def make_inputs(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    m, v, n = shape["M"], shape["V"], shape["N"]
    gen = torch.Generator().manual_seed(seed)
    # nn.Embedding's own init, N(0, 1)
    weight = torch.randn(v, n, generator=gen, dtype=torch.float32)
    # Token streams repeat (Zipf): half the positions draw from a hot set of max(1, M // 4) ids, so from M = 3 on
    # some id is certain to repeat (ceil(M / 2) draws from fewer ids) and a backward that overwrites instead of
    # adding loses rows; the other half are uniform over the vocabulary (rows near 0 and V - 1 included).
    uniform = torch.randint(0, v, (m,), generator=gen, dtype=torch.int64)
    hot = torch.randint(0, v, (max(1, m // 4),), generator=gen, dtype=torch.int64)
    picks = hot[torch.randint(0, hot.numel(), (m,), generator=gen, dtype=torch.int64)]
    is_hot = torch.randperm(m, generator=gen) < (m + 1) // 2
    ids = torch.where(is_hot, picks, uniform)
    return ids.to(device), weight.to(dtype).to(device)


def adversarial_inputs(
    shape: dict[str, int], dtype: torch.dtype, seed: int, device: str
) -> dict[str, tuple[torch.Tensor, ...]]:
    """Inputs that break fragile kernels, checked besides random ones (evaluator/judge/judge.py).

    - ``one_id``: every id is V - 1: the farthest row (offset (V - 1) * N, past 2^31 bytes at the benchmark
      sizes), and dW's last row is the sum of all M grad rows (a backward that stores instead of adding keeps
      one of them; one whose atomics race on a single address shows here first);
    - ``edge_ids``: ids alternate 0 and V - 1 (an off-by-one in the row offset or in a ``< V`` guard).
    """
    m, v = shape["M"], shape["V"]
    _, weight = make_inputs(shape, dtype, seed, "cpu")
    last = torch.full((m,), v - 1, dtype=torch.int64)
    edges = torch.where(torch.arange(m) % 2 == 0, 0, v - 1).to(torch.int64)
    return {"one_id": (last.to(device), weight.to(device)), "edge_ids": (edges.to(device), weight.to(device))}


def flops(shape: dict[str, int], dtype: torch.dtype) -> float:
    # the forward computes nothing; counted as one operation per output element (the backward's M x N adds) so
    # that the compute side of the roofline never sets the floor
    return float(shape["M"] * shape["N"])


def bytes_moved(shape: dict[str, int], dtype: torch.dtype) -> float:
    # ids read once, out written once, and the weight rows the gather reads: at least the distinct ids' rows,
    # counted as min(M, V) / 2 (make_inputs draws half the ids uniformly over V >= 32000 at the benchmark
    # shapes: over 94% of them distinct), never the whole V x N weight, which a gather does not read
    m, v, n = shape["M"], shape["V"], shape["N"]
    size = torch.tensor([], dtype=dtype).element_size()
    return float(m * 8 + m * n * size + (min(m, v) // 2) * n * size)
