"""The reduction family: first-index ties of argmax/argmin built by hand, and every member on every template
under the interpreter (tiny shapes; fp32 in the default tier, fp16 in the slow one)."""

from __future__ import annotations

import pytest
import torch
from family_harness import run_members

from warpforge.kernels.task import get_task
from warpforge.kernels.variant import builtin_variants

TASK = get_task("reduce")
VARIANTS = {v.name: v for v in builtin_variants("reduce")}


def test_members_cover_the_ops_with_and_without_keepdim() -> None:
    names = {m.name for m in TASK.members}
    for op in ("sum", "mean", "max", "min", "prod", "argmax", "argmin"):
        assert {op, f"{op}_keepdim"} <= names
    x = torch.zeros(2, 5, 3)
    assert TASK.as_member("max_keepdim").reference(x).shape == (2, 1, 3)
    assert TASK.as_member("argmin").reference(x).dtype == torch.int64


def test_arg_members_return_the_first_index_of_a_tie() -> None:
    x = torch.tensor([[[0.0], [2.0], [1.0], [2.0]]])  # [1, 4, 1]: the max 2 at rows 1 and 3
    assert TASK.as_member("argmax").reference(x).item() == 1
    assert TASK.as_member("argmin").reference(-x).item() == 1


@pytest.mark.parametrize("dtype", [torch.float32, pytest.param(torch.float16, marks=pytest.mark.slow)], ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_member_on_every_template(name: str, dtype: torch.dtype) -> None:
    # R = 37 is past the looped template's smallest chunks and odd; ties come with the adversarial inputs.
    failures = run_members(TASK, VARIANTS[name], [{"M": 2, "R": 37, "N": 5}], dtype)
    assert not failures, "\n".join(failures[:5])
