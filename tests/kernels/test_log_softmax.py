"""log_softmax: the reference against a formula written out here, and both templates on the check shapes under
the interpreter (fp32 in the default tier, fp16/bf16 in the slow one)."""

from __future__ import annotations

import pytest
import torch
from newtask_harness import DEVICE, load, nan_allocations, representative, valid_configs

from warpforge.evaluator.judge.compare import compare_outputs
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import builtin_variants

TASK = get_task("log_softmax")
VARIANTS = {v.name: v for v in builtin_variants("log_softmax")}


def test_reference_is_x_minus_logsumexp() -> None:
    x = torch.randn(3, 11, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 5
    want = x - x.exp().sum(dim=1, keepdim=True).log()
    torch.testing.assert_close(TASK.reference(x), want, rtol=1e-12, atol=1e-12)


# The default tier: fp32 on the two smallest check shapes; the slow tier: every check shape in every dtype.
CASES = [
    pytest.param(d, shapes, id=f"{d}-{tag}", marks=[] if (i, tag) == (0, "small") else [pytest.mark.slow])
    for i, d in enumerate(TASK.dtypes)
    for tag, shapes in (("small", TASK.check_shapes[:2]), ("all", TASK.check_shapes))
]


@pytest.mark.parametrize(("dtype", "shapes"), CASES)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_correct_on_check_shapes(name: str, dtype: torch.dtype, shapes: list) -> None:
    variant = VARIANTS[name]
    module = load(variant)
    for shape in shapes:
        assert TASK.adversarial_inputs is not None
        cases = {
            "random": TASK.make_inputs(shape, dtype, 0, DEVICE),
            **TASK.adversarial_inputs(shape, dtype, 0, DEVICE),
        }
        for params in representative(valid_configs(variant, module, shape))[:1]:
            for kind, (x,) in cases.items():
                with nan_allocations():
                    out = module.launch(x, **params)
                atol, rtol = TASK.tolerance(dtype)
                bad = compare_outputs(
                    [out.cpu()], [TASK.reference(x.cpu().double())], [TASK.reference(x.cpu())], atol, rtol
                )
                assert bad is None, f"{name} {shape} {kind} {params}: {bad.message}"
