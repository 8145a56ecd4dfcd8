"""The chain reader's (kernels/fx_chain.py) wider steps and the KernelBench level-2 problems they let match:
a min or max with a 0-d constant (``torch.min(x, torch.tensor(c))``, a scalar ``nn.Parameter``), read as a
clamp step with the constant's value; real problem files end ok through the real judge (skipped without
../shared/kernelbench)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from warpforge.kernels.fx_chain import read_chain


class _Head(nn.Module):
    """A Linear, a scalar parameter and a 0-d constant, then ``fn(self, z)``."""

    def __init__(self, fn) -> None:
        super().__init__()
        self.gemm = nn.Linear(8, 6)
        self.constant = nn.Parameter(torch.tensor(2.0))
        self.fn = fn

    def forward(self, x):
        return self.fn(self, self.gemm(x))


@pytest.mark.parametrize(("fn", "steps"), [
    # KernelBench 31: a constant made in the forward (fx lifts it to an attribute)
    (lambda m, z: torch.min(z, torch.tensor(0.5)) * 2.0, (("min", 0.5, 0.0), ("mul", 2.0, 0.0))),
    # KernelBench 93: made on the value's device (``v.device`` only passed on to torch.tensor)
    (lambda m, z: F.gelu(torch.min(z + 0.5, torch.tensor(0.0, device=z.device))),
     (("add", 0.5, 0.0), ("min", 0.0, 0.0), ("gelu", 0.0, 0.0))),
    # KernelBench 68: a scalar parameter, read with the value the module holds, in a min and a subtraction
    (lambda m, z: torch.min(z, m.constant) - m.constant, (("min", 2.0, 0.0), ("add", -2.0, 0.0))),
    (lambda m, z: torch.maximum(torch.tensor(-1.0), z) / m.constant, (("max", -1.0, 0.0), ("div", 2.0, 0.0))),
    (lambda m, z: torch.max(z, torch.tensor(0.25)), (("max", 0.25, 0.0),)),
    # a 0-d constant does not promote the [M, N] value: a half-precision one is its value
    (lambda m, z: torch.min(z, torch.tensor(0.5, dtype=torch.float16)), (("min", 0.5, 0.0),)),
    # not a step: the min of two tensors, a constant that is no scalar, an integer constant
    (lambda m, z: torch.min(z, z * 2.0), None),
    (lambda m, z: torch.min(z, torch.tensor([0.5])), None),
    (lambda m, z: torch.min(z, torch.tensor(1)), None),
])
def test_a_min_or_max_with_a_0d_constant_reads_as_a_clamp_step(fn, steps) -> None:
    model = _Head(fn)
    chain = read_chain(model)
    assert (None if chain is None else chain.steps) == steps
    if steps is not None:  # the steps compute the forward
        from warpforge.kernels.fx_chain import apply_steps

        x = torch.randn(5, 8)
        with torch.no_grad():
            torch.testing.assert_close(apply_steps(model.gemm(x), steps), model(x))
