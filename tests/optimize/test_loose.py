"""Loose regions: a run of a module's own tensor ops (minGPT's inline attention) cut from its trace, matched by
its numbers, and patched through the module's call stream; the step's own loss as a region; the reference
backward of an op exported without one. Patches run against a stub package (each op its task's reference, every
configuration fitting): what is tested is the cut and the plumbing, the kernels are tested with their tasks."""

from __future__ import annotations

import functools
import math
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from warpforge.evaluator.gpus import peaks_for
from warpforge.kernels.task import get_task
from warpforge.optimize.flow import _specs_for
from warpforge.optimize.patch_spec import PatchSpec
from warpforge.optimize.patching import apply_patches, op_of
from warpforge.optimize.regions import Region, coverage, cut_regions, model_coverage
from warpforge.optimize.trace import trace_step

NS = "wf_test_loose_stub"
B, T, C, H = 2, 8, 32, 2  # head dim 16


class InlineAttention(torch.nn.Module):
    """minGPT's CausalSelfAttention: the attention is loose tensor ops of its forward."""

    def __init__(self, mask: torch.Tensor | None = None, peek: bool = False) -> None:
        super().__init__()
        self.c_attn = torch.nn.Linear(C, 3 * C)
        self.c_proj = torch.nn.Linear(C, C)
        self.drop = torch.nn.Dropout(0.0)
        self.register_buffer("bias", torch.tril(torch.ones(16, 16)).view(1, 1, 16, 16) if mask is None else mask)
        self.peek = peek

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(b, t, H, c // H).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        if self.peek and bool(att.isnan().any()):  # data-dependent Python: no run of this forward is cut
            att = att.nan_to_num()
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class Block(torch.nn.Module):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self.attn = InlineAttention(**kwargs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.attn(x)


def _regions(model: torch.nn.Module, x: torch.Tensor, loss: Any = None) -> list[Region]:
    peaks = peaks_for("H100")
    assert peaks is not None
    return cut_regions(model, trace_step(model, (x,), loss or (lambda out: out.sum()), peaks))


def _x(seed: int = 0, t: int = T) -> torch.Tensor:
    return torch.randn(B, t, C, generator=torch.Generator().manual_seed(seed))


@functools.cache
def _block_regions() -> list[Region]:
    """The plain block's regions (read only: two tests look at them, and a cut costs ~10 s here)."""
    torch.manual_seed(0)
    return _regions(Block(), _x())


def test_an_inline_causal_attention_is_one_region_of_q_k_v() -> None:
    regions = _block_regions()
    assert abs(sum(r.share for r in regions) - 1.0) < 1e-9
    loose = [r for r in regions if r.source == "loose" and r.kind == "attention"]
    assert len(loose) == 1, [(r.name, r.task) for r in regions]
    r = loose[0]
    assert r.loose is not None and r.match is not None
    assert r.match.shape == {"B": B, "HQ": H, "HKV": H, "S": T, "D": C // H, "CAUSAL": 1}
    assert [tuple(t.shape) for t in r.loose.inputs] == [(B, H, T, C // H)] * 3
    # the softmax call and the Dropout inside the run are the region's, not regions of their own
    names = {x.name for x in regions}
    assert not any("softmax" in n for n in names if n != r.name) and "attn.drop" not in names
    ops = {o.op for o in r.ops}
    assert {"bmm", "masked_fill", "_softmax"} <= ops and any(o.backward for o in r.ops)


def test_a_residual_add_is_a_loose_region_of_the_binary_family() -> None:
    """``x + self.attn(x)`` in the block's own forward: a run of one call, x and the attention's output its
    inputs, matched by the numbers to binary[add] with z of x's shape (both [B, T, C] as [B*T, C])."""
    regions = _block_regions()
    adds = [r for r in regions if r.source == "loose" and r.match is not None and r.match.task == "binary"]
    assert len(adds) == 1, [(r.name, r.task) for r in regions]
    m = adds[0].match
    assert m is not None and m.task_name == "binary[add]" and adds[0].kind == "elementwise"
    assert m.shape == {"M": B * T, "N": C, "ZM": B * T, "ZN": C} and m.flatten == (True, True)
    assert adds[0].name == "<root>::add#0" and not m.has_backward
    assert not [r for r in regions if r.name == "<root> (own ops)" and r.share > 0.01]


@pytest.mark.slow
def test_only_the_numbers_decide_a_mask_that_is_not_causal_is_no_attention() -> None:
    torch.manual_seed(0)
    mask = torch.ones(1, 1, 16, 16)
    mask[..., 3, 1] = 0  # one hidden key: neither causal nor full
    regions = _regions(Block(mask=mask), _x())
    assert not [r for r in regions if r.kind == "attention"], [(r.name, r.task) for r in regions]


def test_a_forward_with_data_dependent_python_has_no_loose_region() -> None:
    torch.manual_seed(0)
    regions = _regions(Block(peek=True), _x())
    # the attention module's own: the block's residual add is a run of a forward without any
    assert [r.name for r in regions if r.source == "loose"] == ["<root>::add#0"]


@pytest.fixture()
def package() -> Iterator[types.ModuleType]:
    # attention as one aten op, so that the patched forward's eager score ops would show if they ran
    # no autograd, as exported
    ops = {
        "attention": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        "elementwise_gelu_tanh": lambda x: F.gelu(x.detach(), approximate="tanh"),
        "binary_add": lambda x, z: x.detach() + z.detach(),
    }
    references = {
        "elementwise_gelu_tanh": get_task("elementwise").as_member("gelu_tanh").reference,
        "binary_add": get_task("binary").as_member("add").reference,
    }
    pkg = types.ModuleType(NS)
    refs = types.ModuleType(f"{NS}._reference")
    names = [NS, refs.__name__]
    sys.modules[refs.__name__] = refs
    for name, fn in ops.items():
        op = types.ModuleType(f"{NS}.{name}")
        op._params = lambda inputs: {"BLOCK": 1}  # type: ignore[attr-defined]  # the configuration for any call
        ref = types.ModuleType(f"{refs.__name__}.{name}")
        ref.reference = references.get(name)  # type: ignore[attr-defined]
        for mod in (op, ref):
            sys.modules[mod.__name__] = mod
            names.append(mod.__name__)
        setattr(pkg, name, fn)
    sys.modules[NS] = pkg
    yield pkg
    for name in names:
        sys.modules.pop(name, None)


def _loose_specs(model: torch.nn.Module, x: torch.Tensor) -> list[PatchSpec]:
    loose = [r for r in _regions(model, x) if r.source == "loose"]
    return [s for r in loose for s in _specs_for(r, ["float32"], train=True)]


class _Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.names.append(func._overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def test_the_patched_run_computes_the_op_alone_and_matches_outputs_and_gradients(package: types.ModuleType) -> None:
    torch.manual_seed(0)
    reference = Block()
    patched = Block()
    patched.load_state_dict(reference.state_dict())
    specs = _loose_specs(Block(), _x())
    assert sorted(s.op for s in specs) == ["attention", "binary_add"]
    assert [s.reference_backward for s in specs if s.op == "binary_add"] == [True]
    counters = apply_patches(patched, specs, package)
    x = _x(1)
    with _Ops() as seen:
        out = patched(x)
    assert counters.kernel == {s.region: 1 for s in specs}, counters
    # the run's calls returned placeholders: the eager scores were never computed
    assert "masked_fill" not in seen.names and "_softmax" not in seen.names, seen.names
    expected = reference(x)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    out.square().sum().backward()
    expected.square().sum().backward()
    for (name, p), q in zip(patched.named_parameters(), reference.parameters()):
        assert p.grad is not None and q.grad is not None
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_a_call_at_other_shapes_runs_as_written_and_says_why(package: types.ModuleType) -> None:
    torch.manual_seed(0)
    reference, patched = Block(), Block()
    patched.load_state_dict(reference.state_dict())
    counters = apply_patches(patched, _loose_specs(Block(), _x()), package)
    x = _x(2, t=T + 3)
    torch.testing.assert_close(patched(x), reference(x))
    assert not counters.kernel and "shapes" in next(iter(counters.fallback.values())), counters


def test_a_kernel_without_backward_trains_with_its_references_autograd(package: types.ModuleType) -> None:
    spec = PatchSpec(
        region="act",
        module="act",
        op="elementwise_gelu_tanh",
        shape={"M": 4, "N": 8},
        order=[0],
        flatten=[False],
        ranks=[2],
        dtypes=["float32"],
        reference_backward=True,
    )
    x = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    out = op_of(package, spec)(x)
    assert out.requires_grad
    g = torch.randn(4, 8, dtype=torch.float64)
    (got,) = torch.autograd.grad(out, x, g)
    (want,) = torch.autograd.grad(F.gelu(x, approximate="tanh"), x, g)
    torch.testing.assert_close(got, want)
    with pytest.raises(RuntimeError):  # what the export alone does: no graph to differentiate
        getattr(package, spec.op)(x).sum().backward()


def test_the_steps_own_loss_is_a_region_matched_by_its_numbers() -> None:
    torch.manual_seed(0)
    regions = _regions(Block(), _x(), loss=lambda out: out.float().pow(2).mean())
    loss = [r for r in regions if r.source == "loss"]
    assert len(loss) == 1 and loss[0].match is not None, [(r.name, r.task) for r in regions]
    assert loss[0].match.task_name == "loss[mse_mean]" and -1 in loss[0].match.order  # target absent: zeros
    assert any(o.backward for o in loss[0].ops)
    assert coverage(regions) > coverage([r for r in regions if r is not loss[0]])
    # the model's own ops: the stand-in loss is in neither the numerator nor the denominator
    rest = [r for r in regions if r is not loss[0]]
    assert math.isclose(model_coverage(regions), coverage(rest) / sum(r.share for r in rest))
