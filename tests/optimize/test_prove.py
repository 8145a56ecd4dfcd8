"""The proof's check of an exported op at its region's own shape, on a stub package: an op that computes its
task's contract (here the embedding: a bit-exact gather, dW summed in fp32 and rounded once) passes it."""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F

from warpforge.optimize.patch_spec import PatchSpec
from warpforge.optimize.prove import check_at_shape


def test_an_fp32_accumulated_embedding_gradient_passes_at_the_regions_shape() -> None:
    # the upstream gradient reaches the op in fp16: the float64 truth is computed from those same values, as the
    # judge does, not from the float64 draw (every term of a dW row would differ by its rounding)
    package = types.SimpleNamespace(embedding=lambda ids, w: F.embedding(ids, w.float()).to(w.dtype))
    spec = PatchSpec(
        region="embed",
        module="embed",
        op="embedding",
        shape={"M": 32, "V": 512, "N": 64},
        order=[0, 1],
        flatten=[True, False],
        ranks=[1, 2],
        dtypes=["float16"],
    )
    assert check_at_shape(package, spec, torch.float16, train=True) == ""
    wrong = types.SimpleNamespace(embedding=lambda ids, w: F.embedding(ids, w.float()).to(w.dtype) * 1.01)
    assert check_at_shape(wrong, spec, torch.float16, train=False).startswith("its kernel is wrong")
