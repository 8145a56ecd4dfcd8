"""The fused linear cross-entropy task (reference, inputs, cost and memory model) and its templates, forward
and backward, under the interpreter against torch autograd in float64.

The interpreter computes tl.dot on bfloat16 wrongly (docs/design.md §8): CPU template runs use fp16."""

from __future__ import annotations

import sys

import pytest
import torch
import torch.nn.functional as F
from newtask_harness import DEVICE, check_training, load, module_from, representative, valid_configs

from warpforge.kernels.task import get_task
from warpforge.kernels.variant import builtin_variants

TASK = get_task("fused_linear_cross_entropy")
VARIANTS = {v.name: v for v in builtin_variants("fused_linear_cross_entropy")}
CPU_DTYPES = [torch.float16] if DEVICE == "cpu" else TASK.dtypes
MODULE = sys.modules["warpforge.kernels.tasks.fused_linear_cross_entropy"]  # loaded by get_task


def test_reference_matches_torch_cross_entropy() -> None:
    # Independent route: F.linear + F.cross_entropy(reduction='none', ignore_index=-100), in float64.
    for shape in TASK.check_shapes:
        h, w, t = TASK.make_inputs(shape, torch.float64, 3, "cpu")
        expected = F.cross_entropy(F.linear(h, w), t, reduction="none", ignore_index=-100)
        torch.testing.assert_close(TASK.reference(h, w, t), expected)
    h, w, t = TASK.make_inputs({"M": 64, "H": 16, "V": 50}, torch.bfloat16, 0, "cpu")
    out = TASK.reference(h, w, t)
    assert out.dtype == torch.float32 and bool((out[t == -100] == 0).all())
    assert 0 < int((t == -100).sum()) < 32  # some rows ignored, most not


def test_cost_and_memory_model() -> None:
    assert TASK.grad_inputs == (0, 1)
    shape = {"M": 8192, "H": 4096, "V": 128256}
    assert TASK.flops(shape, torch.bfloat16) == 2 * 8192 * 128256 * 4096 + 4 * 8192 * 128256
    assert TASK.bytes_moved(shape, torch.bfloat16) == (8192 * 4096 + 128256 * 4096) * 2 + 12 * 8192
    peak = MODULE.peak_memory(shape, torch.bfloat16)
    assert peak["logits"] == 8192 * 128256 * 4  # 4.2 GB of fp32 logits
    for variant in VARIANTS.values():
        module = load(variant)
        for params in valid_configs(variant, module, shape):
            # every configuration needs less than a third of the unfused path's logits alone
            assert module.peak_extra_bytes(params, shape) < peak["logits"] / 3, (variant.name, params)
        assert variant.has_backward and 100 <= variant.space_size <= 400


def _run(name: str, dtype: torch.dtype, every: bool) -> None:
    module = load(VARIANTS[name])
    for shape in TASK.check_shapes:
        inputs = TASK.make_inputs(shape, dtype, 0, DEVICE)
        configs = valid_configs(VARIANTS[name], module, shape)
        for params in representative(configs) if every else [configs[len(configs) // 2]]:
            check_training(TASK, module, params, inputs, dtype, 0, f"{name} {params} {shape} {dtype}")


@pytest.mark.parametrize("dtype", CPU_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_forward_and_backward(name: str, dtype: torch.dtype) -> None:
    _run(name, dtype, every=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_first_middle_last_configs(name: str) -> None:
    _run(name, CPU_DTYPES[0], every=True)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_on_adversarial_inputs_and_many_slabs(name: str) -> None:
    """Adversarial inputs, with a vocabulary slab of 128 (not in SPACE: the launchers are called directly)
    so the backward runs several slabs, the last one partial, as it does at V = 128256."""
    module = load(VARIANTS[name])
    shape = TASK.check_shapes[2]
    params = {**valid_configs(VARIANTS[name], module, shape)[0], "VOCAB_SLAB": 128}
    adversarial = TASK.adversarial_inputs
    assert adversarial is not None
    for label, inputs in adversarial(shape, CPU_DTYPES[0], 0, DEVICE).items():
        check_training(TASK, module, params, inputs, CPU_DTYPES[0], 0, f"{name} {label}")


def test_wrong_kernels_fail() -> None:
    """Deliberately wrong backwards fail: one that forgets grad_out's per-row scale (Liger's trick applied
    to a per-row loss), and one that does not zero the ignored rows' gradient."""
    source = VARIANTS["row_blocks"].source
    module = load(VARIANTS["row_blocks"])
    shape = TASK.check_shapes[1]
    params = valid_configs(VARIANTS["row_blocks"], module, shape)[0]
    inputs = TASK.make_inputs(shape, torch.float16, 0, DEVICE)
    for i, (old, new) in enumerate([("* g[:, None]", "* 1.0"), ("g = tl.where(tgt != -100, g, 0.0)", "g = g + 0.0")]):
        assert old in source
        wrong = module_from(source.replace(old, new), f"wrong_flce_{i}")
        with pytest.raises(AssertionError, match="grad of input"):
            check_training(TASK, wrong, params, inputs, torch.float16, 0, "wrong")
