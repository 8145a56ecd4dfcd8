"""Patched calls return what the original returns, in shape and dtype: against a stub exported package (each op
its task's contract in plain PyTorch, every configuration fitting), so what is tested is the patch's plumbing."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F

from warpforge.optimize.patch_spec import PatchSpec
from warpforge.optimize.patching import apply_patches

NS = "wf_test_patch_stub"


@pytest.fixture()
def package() -> Iterator[types.ModuleType]:
    ops = {
        "embedding": lambda ids, w: w[ids],  # ids [M], weight [V, N]
        "rmsnorm": lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
    }  # x [M, N]
    pkg = types.ModuleType(NS)
    for name, fn in ops.items():
        op = types.ModuleType(f"{NS}.{name}")
        op._params = lambda inputs: {"BLOCK": 1}  # type: ignore[attr-defined]  # the configuration for any call
        sys.modules[op.__name__] = op
        setattr(pkg, name, fn)
    sys.modules[NS] = pkg
    yield pkg
    for name in [NS, *(f"{NS}.{n}" for n in ops)]:
        sys.modules.pop(name, None)


def _spec(module: str, op: str, ranks: list[int], function: str = "") -> PatchSpec:
    region = f"{module}::{function}#0" if function else module
    return PatchSpec(
        region=region,
        module=module,
        function=function,
        op=op,
        shape={},
        order=[0, 1],
        flatten=[True, False],
        ranks=ranks,
        dtypes=["float32"],
    )


def test_an_embedding_on_2d_ids_returns_batch_seq_hidden_in_the_weights_dtype(package: types.ModuleType) -> None:
    model = torch.nn.Sequential(torch.nn.Embedding(50, 8))
    ids = torch.randint(0, 50, (2, 5))
    want = model(ids)
    counters = apply_patches(model, [_spec("0", "embedding", [1, 2])], package)
    got = model(ids)
    assert counters.kernel == {"0": 1}
    assert got.shape == (2, 5, 8) and got.dtype == torch.float32 and torch.equal(got, want)


def test_a_functional_embedding_inside_a_module_is_reshaped_too(package: types.ModuleType) -> None:
    class Tied(torch.nn.Module):  # a GPT-style forward that calls F.embedding on its own table
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.nn.Parameter(torch.randn(50, 8))

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return F.embedding(ids, self.table) * 2

    model = torch.nn.Sequential(Tied())
    ids = torch.randint(0, 50, (3, 4))
    want = model(ids)
    counters = apply_patches(model, [_spec("0", "embedding", [1, 2], function="embedding")], package)
    got = model(ids)
    assert counters.kernel == {"0::embedding#0": 1}
    assert got.shape == (3, 4, 8) and torch.equal(got, want)


def test_a_norm_on_3d_input_keeps_its_layout_and_dtype(package: types.ModuleType) -> None:
    model = torch.nn.Sequential(torch.nn.RMSNorm(8, eps=1e-6)).half()
    x = torch.randn(2, 5, 8).half()
    want = model(x)
    apply_patches(model, [_spec("0", "rmsnorm", [2, 1])], package)
    got = model(x)
    assert got.shape == (2, 5, 8) and got.dtype == torch.float16
    torch.testing.assert_close(got, want, atol=2e-3, rtol=2e-3)
