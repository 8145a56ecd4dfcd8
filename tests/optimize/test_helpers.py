"""Helpers of a model's own code are regions too: a rotary embedding written as a module-level function that
returns the rotated queries and keys is matched output by output, and patched by rebinding its name only
while the patched model runs."""

from __future__ import annotations

import sys
import types
from typing import Any

import torch

from warpforge.evaluator.gpus import peaks_for
from warpforge.optimize.patch_spec import PatchSpec
from warpforge.optimize.patching import apply_patches, ordered_tensors
from warpforge.optimize.regions import cut_regions
from warpforge.optimize.trace import trace_step

B, H, HKV, S, D = 1, 4, 2, 12, 16


def rotate(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """RoPE as Llama writes it: cos/sin [batch, seq, dim] broadcast over the heads."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + rotate(q) * sin, k * cos + rotate(k) * sin


def wrong_rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, ...]:
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos - rotate(q) * sin, k * cos - rotate(k) * sin  # the inverse rotation


class Attn(torch.nn.Module):
    def __init__(self, helper: Any, batch: int = B) -> None:
        super().__init__()
        self.batch = batch
        self.q = torch.nn.Linear(D, H * D, bias=False)
        self.k = torch.nn.Linear(D, HKV * D, bias=False)
        self.helper = helper

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        q = self.q(x).view(self.batch, S, H, D).transpose(1, 2)
        k = self.k(x).view(self.batch, S, HKV, D).transpose(1, 2)
        if self.helper == "rope":
            q, k = rope(q, k, cos, sin)
        else:
            q, k = wrong_rope(q, k, cos, sin)
        return q.sum(1) + k.sum(1)


def _inputs(batch: int = B) -> tuple[torch.Tensor, ...]:
    from warpforge.kernels.tasks.rotary import angles

    # each sequence of the batch at its own positions (a continued sequence): cos/sin differ per item
    ang = torch.stack([angles(S + 5 * b, D)[5 * b :] for b in range(batch)]).float()
    return torch.randn(batch, S, D), ang.cos(), ang.sin()


def _regions(helper: str, batch: int = B) -> list[Any]:
    peaks = peaks_for("H100")
    assert peaks is not None
    model = Attn(helper, batch)
    return cut_regions(model, trace_step(model, _inputs(batch), lambda out: out.sum(), peaks))


def test_a_rotary_helper_is_one_region_matched_for_both_outputs() -> None:
    regions = _regions("rope")
    rope_region = next(r for r in regions if r.name == "::rope#0")
    assert rope_region.source == "helper" and rope_region.kind == "rotary"
    # queries at H heads, keys at HKV heads, each [B, heads, S, D]; cos/sin [1, S, D] read as [S, D]
    assert [(m.task, m.output, m.shape) for m in rope_region.matches] == [
        ("rotary", 0, {"B": B, "H": H, "S": S, "D": D}),
        ("rotary", 1, {"B": B, "H": HKV, "S": S, "D": D}),
    ]
    # the nested rotate() calls and the backward of the whole helper are inside the region
    assert any(o.backward for o in rope_region.ops) and any(o.op == "cat" for o in rope_region.ops)
    assert not any(r.name.startswith("::rotate") for r in regions)


def test_the_inverse_rotation_is_no_rotary() -> None:
    regions = _regions("wrong")
    assert all(r.task != "rotary" for r in regions)
    # not a task: it is opened, its own ops one region, its nested calls tried on their own
    assert any(r.name == "::wrong_rope#0" and r.match is None for r in regions)


def _fake_package(op: Any) -> types.ModuleType:
    """An exported package's surface as patching reads it: ``NS.rotary`` and its configuration for a call."""
    package = types.ModuleType("wf_fake_pkg")
    sub = types.ModuleType("wf_fake_pkg.rotary")
    sub._params = lambda inputs: {"BLOCK": 64}  # type: ignore[attr-defined]
    sys.modules[sub.__name__] = sub
    package.rotary = op  # type: ignore[attr-defined]
    return package


def test_the_patch_runs_the_op_for_the_patched_model_only() -> None:
    from warpforge.kernels.tasks.rotary import reference

    calls: list[tuple[int, ...]] = []

    def op(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        calls.append(tuple(x.shape))
        return reference(x, cos, sin)

    regions = _regions("rope")
    rope_region = next(r for r in regions if r.name == "::rope#0")
    specs = [
        PatchSpec(
            region=rope_region.name,
            module="",
            function="rope",
            op="rotary",
            shape=dict(m.shape),
            order=list(m.order),
            flatten=list(m.flatten),
            ranks=[4, 2, 2],
            dtypes=["float32"],
            helper=True,
            output=m.output,
        )
        for m in rope_region.matches
    ]
    torch.manual_seed(0)
    reference_model = Attn("rope")
    patched = Attn("rope")
    patched.load_state_dict(reference_model.state_dict())
    saved = globals()["rope"]
    try:
        counters = apply_patches(patched, specs, _fake_package(op))
        x = _inputs()
        expected = reference_model(*x)
        assert calls == []  # the unpatched model shares this file's `rope`: it runs the original
        got = patched(*x)
        assert calls == [(B, H, S, D), (B, HKV, S, D)]
        assert counters.kernel == {"::rope#0": 2}
        torch.testing.assert_close(got, expected)
    finally:
        globals()["rope"] = saved
        sys.modules.pop("wf_fake_pkg.rotary", None)


def test_tensors_are_read_in_parameter_order_however_passed() -> None:
    a, b, c, d = (torch.full((1,), float(i)) for i in range(4))
    assert [float(t) for t in ordered_tensors(rope, (a,), {"sin": d, "cos": c, "k": b})] == [0.0, 1.0, 2.0, 3.0]


def test_a_batch_with_its_own_positions_per_item_is_rotary_per_item() -> None:
    # cos/sin [2, S, D] hold other angles for each sequence: no [S, D] pair is the whole batch's, but each
    # item is the task's; the patch then runs the op once per item and output
    from warpforge.kernels.tasks.rotary import reference

    regions = _regions("rope", batch=2)
    rope_region = next(r for r in regions if r.name == "::rope#0")
    assert [(m.task, m.items, m.shape) for m in rope_region.matches] == [
        ("rotary", 2, {"B": 1, "H": H, "S": S, "D": D}),
        ("rotary", 2, {"B": 1, "H": HKV, "S": S, "D": D}),
    ]
    calls: list[tuple[int, ...]] = []

    def op(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        calls.append(tuple(x.shape))
        return reference(x, cos, sin)

    specs = [
        PatchSpec(
            region=rope_region.name,
            module="",
            function="rope",
            op="rotary",
            shape=dict(m.shape),
            order=list(m.order),
            flatten=list(m.flatten),
            ranks=[4, 2, 2],
            dtypes=["float32"],
            helper=True,
            output=m.output,
            per_item=True,
        )
        for m in rope_region.matches
    ]
    torch.manual_seed(0)
    reference_model, patched = Attn("rope", 2), Attn("rope", 2)
    patched.load_state_dict(reference_model.state_dict())
    saved = globals()["rope"]
    try:
        apply_patches(patched, specs, _fake_package(op))
        x = _inputs(2)
        torch.testing.assert_close(patched(*x), reference_model(*x))
        assert calls == [(1, H, S, D), (1, H, S, D), (1, HKV, S, D), (1, HKV, S, D)]
    finally:
        globals()["rope"] = saved
        sys.modules.pop("wf_fake_pkg.rotary", None)


def test_a_namesake_from_another_file_is_not_rebound() -> None:
    calls: list[int] = []
    regions = _regions("rope")
    rope_region = next(r for r in regions if r.name == "::rope#0")
    assert rope_region.helper_file == __file__  # the helper's own file, read off its code
    specs = [
        PatchSpec(
            region=rope_region.name,
            module="",
            function="rope",
            op="rotary",
            shape=dict(m.shape),
            order=list(m.order),
            flatten=list(m.flatten),
            ranks=[4, 2, 2],
            dtypes=["float32"],
            helper=True,
            output=m.output,
            helper_file="/elsewhere/modeling.py",
        )
        for m in rope_region.matches
    ]
    saved = globals()["rope"]
    try:
        counters = apply_patches(Attn("rope"), specs, _fake_package(lambda *a: calls.append(1)))
        assert globals()["rope"] is saved and counters.kernel == {} and calls == []
    finally:
        globals()["rope"] = saved
        sys.modules.pop("wf_fake_pkg.rotary", None)


def test_a_helper_turned_into_a_module_object_is_still_its_function() -> None:
    """transformers' ``use_kernel_forward_from_hub`` on a function (with the ``kernels`` package 0.19) binds the
    name to an ``nn.Module`` instance whose forward calls the function from its closure: Qwen3's
    ``apply_rotary_pos_emb`` stopped being a region, and its patch found nothing to rebind."""
    import functools

    from warpforge.optimize.trace import helper_callable

    def rope(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    def as_module(func):  # type: ignore[no-untyped-def]
        class Func(torch.nn.Module):
            def forward(self, *args, **kwargs):  # type: ignore[no-untyped-def]
                return func(*args, **kwargs)

        return Func()

    assert helper_callable(as_module(rope)) is rope
    wrapped = functools.wraps(rope)(lambda *a: rope(*a))
    assert helper_callable(wrapped) is wrapped  # a decorated function is called as it is bound
    assert helper_callable(torch.nn.Linear(2, 2)) is None and helper_callable(3) is None
