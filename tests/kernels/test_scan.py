"""The scan family: member references against torch written out (KernelBench's exclusive and reverse forms),
every member on every template under the interpreter (tiny shapes; fp32 in the default tier, fp16 in the
slow one), and variants that drop the chunk carry or accumulate in fp16 refused."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from family_harness import run_members
from newtask_harness import DEVICE, nan_allocations

from warpforge.evaluator.judge.compare import compare_outputs
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import builtin_variants

TASK = get_task("scan")
VARIANTS = {v.name: v for v in builtin_variants("scan")}
# L = 67 is odd and past the looped template's middle chunk (64), so the carry crosses a chunk boundary.
SHAPE = {"M": 2, "L": 67, "N": 5}


def test_member_references_are_torchs_scans() -> None:
    x = torch.randn(3, 11, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ref = {m.name: m.reference for m in TASK.members}
    torch.testing.assert_close(ref["cumsum"](x), torch.cumsum(x, dim=1))
    torch.testing.assert_close(ref["cumprod"](x), torch.cumprod(x, dim=1))
    torch.testing.assert_close(ref["cumsum_reverse"](x), torch.cumsum(x.flip(1), dim=1).flip(1))
    torch.testing.assert_close(ref["cumprod_reverse"](x), torch.cumprod(x.flip(1), dim=1).flip(1))
    # KernelBench level 1, 92_cumsum_exclusive: zeros, then the cumsum of every input but the last.
    exclusive = torch.cat((torch.zeros_like(x[:, :1]), torch.cumsum(x.narrow(1, 0, x.size(1) - 1), dim=1)), dim=1)
    torch.testing.assert_close(ref["cumsum_exclusive"](x), exclusive)
    torch.testing.assert_close(ref["cumprod_exclusive"](x)[:, 1:], torch.cumprod(x[:, :-1], dim=1))
    assert bool((ref["cumprod_exclusive"](x)[:, 0] == 1).all())
    reverse_exclusive = torch.cumsum(x.flip(1), dim=1).flip(1) - x  # the sum of the inputs after each one
    torch.testing.assert_close(ref["cumsum_reverse_exclusive"](x), reverse_exclusive)
    assert ref["cumsum_exclusive"](x[:, :1]).abs().max() == 0  # L = 1: the identity alone


def test_half_references_are_torchs_own_half_scans() -> None:
    # torch's CPU cumsum on fp16 accumulates in fp32 and rounds each output once, as the reference does; its
    # cumprod stays within one fp16 ulp of that (4 of 4000 outputs differ by one ulp), where a product kept in
    # fp16 is 0.075 off after 2000 factors near 1.
    x = (1.0 + 0.01 * torch.randn(2, 2000, 1, generator=torch.Generator().manual_seed(1))).half()
    assert torch.equal(TASK.reference(x), torch.cumsum(x, dim=1))
    prod = TASK.as_member("cumprod").reference(x).double()
    torch.testing.assert_close(prod, torch.cumprod(x, dim=1).double(), rtol=2.0**-10, atol=0.0)


@pytest.mark.parametrize("dtype", [torch.float32, pytest.param(torch.float16, marks=pytest.mark.slow)], ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_member_on_every_template(name: str, dtype: torch.dtype) -> None:
    failures = run_members(TASK, VARIANTS[name], [SHAPE], dtype)
    assert not failures, "\n".join(failures[:5])


def _edited_looped(tmp_path: Path, edits: list[tuple[str, str]], member: str):  # type: ignore[no-untyped-def]
    """The looped template with each (old, new) line edit applied, computing ``member``."""
    source = VARIANTS["looped"].path.read_text()  # type: ignore[union-attr]
    for old, new in edits:
        assert old in source
        source = source.replace(old, new)
    path = tmp_path / f"edited_{len(list(tmp_path.iterdir()))}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"wf_edited_scan_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for key, value in next(m for m in TASK.members if m.name == member).constants.items():
        setattr(module, key, value)
    return module


def _mismatch(module, member: str, inputs: tuple[torch.Tensor, ...], params: dict[str, int]) -> str | None:  # type: ignore[no-untyped-def]
    with nan_allocations():
        out = module.launch(*inputs, **params)
    reference = TASK.as_member(member).reference
    ref64 = reference(*(t.cpu().double() for t in inputs))
    ref = reference(*(t.cpu() for t in inputs))
    atol, rtol = TASK.tolerance(inputs[0].dtype)
    bad = compare_outputs([out.cpu()], [ref64], [ref], atol, rtol)
    return None if bad is None else bad.message


@pytest.mark.parametrize("member", ["cumsum", "cumprod_reverse"])
def test_a_looped_scan_that_drops_the_carry_is_wrong(tmp_path: Path, member: str) -> None:
    line = "carry = carry + tl.sum(" if member == "cumsum" else "carry = carry * tl.sum("
    (x,) = TASK.make_inputs(SHAPE, torch.float32, 0, DEVICE)
    params = {"BLOCK_L": 16, "BLOCK_N": 8, "num_warps": 1, "num_stages": 1}  # 5 chunks of 16 over L = 67
    dropped = _edited_looped(tmp_path, [(line, "carry = carry + 0.0 * tl.sum(")], member)
    assert _mismatch(dropped, member, (x,), params) is not None
    assert _mismatch(_edited_looped(tmp_path, [], member), member, (x,), params) is None  # unedited


@pytest.mark.slow
def test_a_running_sum_kept_in_fp16_fails_the_third_inputs(tmp_path: Path) -> None:
    # Loads kept in fp16, a carry of the input's dtype and one element a chunk: every partial sum is rounded to
    # fp16, 14 off after 1031 terms of ~1/3 (allowed: 2.2). Wider chunks in fp16 round once a chunk and pass.
    edits = [
        ("other=fill).to(tl.float32)", "other=fill)"),
        ("carry = tl.full([BLOCK_N], fill, tl.float32)", "carry = tl.full([BLOCK_N], fill, x_ptr.dtype.element_ty)"),
    ]
    shape = {"M": 1, "L": 1031, "N": 1}
    (third,) = TASK.adversarial_inputs(shape, torch.float16, 0, DEVICE)["third"]  # type: ignore[misc]
    params = {"BLOCK_L": 1, "BLOCK_N": 1, "num_warps": 1, "num_stages": 1}
    why = _mismatch(_edited_looped(tmp_path, edits, "cumsum"), "cumsum", (third,), params)
    assert why is not None and "out of tolerance" in why, why
    assert _mismatch(_edited_looped(tmp_path, [], "cumsum"), "cumsum", (third,), params) is None
