"""The rotary task (reference, inputs, cost model) and its templates, forward and backward, under the
interpreter against torch autograd in float64."""

from __future__ import annotations

import math

import pytest
import torch
from newtask_harness import DEVICE, autograd64, check_training, load, module_from, representative, valid_configs

from warpforge.kernels.task import get_task
from warpforge.kernels.variant import builtin_variants, parse_variant

TASK = get_task("rotary")
VARIANTS = {v.name: v for v in builtin_variants("rotary")}


def test_reference_is_a_rotation_of_each_pair() -> None:
    # Independent route: complex multiplication of (x1 + i x2) by e^{i theta} (the RoPE definition).
    x, cos, sin = TASK.make_inputs({"B": 1, "H": 2, "S": 5, "D": 8}, torch.float64, 0, "cpu")
    z = torch.complex(x[..., :4], x[..., 4:]) * torch.polar(
        torch.ones(5, 4, dtype=torch.float64), torch.atan2(sin[:, :4], cos[:, :4])
    )
    out = TASK.reference(x, cos, sin)
    torch.testing.assert_close(out, torch.cat((z.real, z.imag), dim=-1))
    # Norms are preserved (a rotation), and the backward of a rotation is its inverse.
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))
    _, (dx,) = autograd64(TASK, (x, cos, sin), out)
    torch.testing.assert_close(dx, x)


def test_shapes_and_cost_model() -> None:
    assert TASK.has_backward and TASK.grad_inputs == (0,)
    shape = {"B": 1, "H": 32, "S": 4096, "D": 128}
    assert TASK.bytes_moved(shape, torch.bfloat16) == 2 * (2 * 32 * 4096 * 128 + 2 * 4096 * 128)
    assert TASK.flops(shape, torch.float16) == 3 * 32 * 4096 * 128
    assert {s["D"] for s in TASK.check_shapes} >= {64, 128}
    assert any(s["S"] > 2 and all(s["S"] % p for p in range(2, int(math.sqrt(s["S"])) + 1)) for s in TASK.check_shapes)


def _run(name: str, dtype: torch.dtype, every: bool) -> None:
    module = load(VARIANTS[name])
    for shape in TASK.check_shapes:
        inputs = TASK.make_inputs(shape, dtype, 0, DEVICE)
        configs = valid_configs(VARIANTS[name], module, shape)
        for params in representative(configs) if every else [configs[-1]]:
            check_training(TASK, module, params, inputs, dtype, 0, f"{name} {params} {shape} {dtype}")


@pytest.mark.slow
@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_first_middle_last_configs(name: str, dtype: torch.dtype) -> None:
    _run(name, dtype, every=True)


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_forward_and_backward(name: str, dtype: torch.dtype) -> None:
    """One configuration per check shape (the largest blocks: fewest interpreted programs), every dtype."""
    _run(name, dtype, every=False)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_on_adversarial_inputs(name: str) -> None:
    dtype = torch.float16
    module = load(VARIANTS[name])
    adversarial = TASK.adversarial_inputs
    assert adversarial is not None
    shape = TASK.check_shapes[1]
    params = valid_configs(VARIANTS[name], module, shape)[-1]
    for label, inputs in adversarial(shape, dtype, 0, DEVICE).items():
        check_training(TASK, module, params, inputs, dtype, 0, f"{name} {label} {dtype}")


def test_wrong_backward_fails() -> None:
    """A backward that rotates by -sin with Llama's convention only (cat(-g2*s, g1*s) on the first half's
    angles) passes duplicated angles but must fail general ones: the check can fail."""
    source = VARIANTS["rows"].source.replace("o1 = x1 * c1 + x2 * s2", "o1 = x1 * c1 + x2 * s1")
    assert source != VARIANTS["rows"].source
    wrong = parse_variant(source, name="wrong_rows")
    module = module_from(source, "wrong_rotary_rows")
    assert wrong.has_backward
    adversarial = TASK.adversarial_inputs
    assert adversarial is not None
    inputs = adversarial(TASK.check_shapes[1], torch.float32, 0, DEVICE)["general_angles"]
    with pytest.raises(AssertionError, match="grad of input 0"):
        check_training(
            TASK, module, {"BLOCK_ROWS": 4, "num_warps": 1, "num_stages": 1}, inputs, torch.float32, 0, "wrong"
        )
