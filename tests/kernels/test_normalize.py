"""The normalization family (x / stat over dim 1, no weight): references against formulas written out here,
and every member on every template under the interpreter (tiny shapes; fp32 default, fp16 slow)."""

from __future__ import annotations

import pytest
import torch
from family_harness import run_members

from warpforge.kernels.task import get_task
from warpforge.kernels.variant import builtin_variants

TASK = get_task("normalize")
VARIANTS = {v.name: v for v in builtin_variants("normalize")}


def test_member_references_match_formulas() -> None:
    x = torch.randn(2, 7, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    col = x[1, :, 2]
    expected = {
        "l2": col / col.pow(2).sum().sqrt(),
        "l1": col / col.abs().sum(),
        "l1_mean": col / (col.abs().sum() / 7),
        "rms(1e-05)": col / (col.pow(2).sum() / 7 + 1e-5).sqrt(),
    }
    for name, want in expected.items():
        torch.testing.assert_close(TASK.as_member(name).reference(x)[1, :, 2], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, pytest.param(torch.float16, marks=pytest.mark.slow)], ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_member_on_every_template(name: str, dtype: torch.dtype) -> None:
    failures = run_members(TASK, VARIANTS[name], [{"M": 2, "R": 37, "N": 5}, {"M": 3, "R": 13, "N": 1}], dtype)
    assert not failures, "\n".join(failures[:5])


# looped only: single_pass must keep one configuration for every benchmark shape, and R=65535 with N=1 needs
# BLOCK_N=1 (its constraints say so).
@pytest.mark.parametrize("name", ["looped"])
def test_wide_rows_never_take_narrow_column_blocks(name: str) -> None:
    # An RMSNorm over 64 features of 112 x 64 x 512 x 512 (N = 512 * 512 columns per m): a program of fewer than
    # 16 fp32 columns reads under 64 bytes a row, and on the interpreter's check shapes BLOCK_N = 1 ran past the
    # check budget. A single column (N = 1) and a narrow N still leave configurations.
    from newtask_harness import load, valid_configs

    variant = VARIANTS[name]
    module = load(variant)
    wide = valid_configs(variant, module, {"M": 112, "R": 64, "N": 512 * 512})
    assert wide and min(c["BLOCK_N"] for c in wide) >= 16
    for n in (1, 2, 5, 30):
        assert valid_configs(variant, module, {"M": 128, "R": 4096, "N": n}), n
