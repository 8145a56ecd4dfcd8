"""The step's cost model: FLOPs and bytes from first principles, ops attributed to their modules, backward too."""

from __future__ import annotations

import torch

from warpforge.evaluator.gpus import peaks_for
from warpforge.optimize.regions import coverage, cut_regions
from warpforge.optimize.trace import trace_step

M, K, N = 32, 48, 80


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(K, N, bias=False)
        self.norm = torch.nn.LayerNorm(N)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.proj(x)) * 3.0


def test_a_gemm_is_priced_at_2mnk_flops_and_its_operands_bytes() -> None:
    peaks = peaks_for("H100")
    assert peaks is not None
    model = Tiny()
    trace = trace_step(model, (torch.randn(M, K),), None, peaks)
    mm = [o for o in trace.ops if o.op == "mm"]
    assert len(mm) == 1 and mm[0].module == "proj" and not mm[0].backward
    assert mm[0].flops == 2 * M * N * K
    assert mm[0].bytes == 4 * (M * K + K * N + M * N)  # fp32 operands read once, output written once
    bound = max(2 * M * N * K / (peaks.fp32_tflops * 1e12), 4 * (M * K + K * N + M * N) / (peaks.hbm_tbps * 1e12))
    assert abs(mm[0].seconds - bound) <= 1e-15


def test_backward_ops_belong_to_the_module_whose_forward_made_them() -> None:
    peaks = peaks_for("H100")
    assert peaks is not None
    model = Tiny()
    x = torch.randn(M, K, requires_grad=True)
    trace = trace_step(model, (x,), lambda out: out.sum(), peaks)
    backward = [o for o in trace.ops if o.backward]
    assert backward, "a training step has backward ops"
    # d(x) and d(W) of the projection: two GEMMs, both the projection's
    grads = [o for o in backward if o.op == "mm"]
    assert len(grads) == 2 and {o.module for o in grads} == {"proj"}
    assert any(o.module == "norm" and "layer_norm" in o.op for o in backward)


def test_every_op_is_in_one_region_and_shares_sum_to_one() -> None:
    peaks = peaks_for("H100")
    assert peaks is not None
    model = Tiny()
    trace = trace_step(model, (torch.randn(M, K),), None, peaks)
    regions = cut_regions(model, trace)
    ops = [id(o) for r in regions for o in r.ops]
    assert sorted(ops) == sorted(id(o) for o in trace.ops)
    assert abs(sum(r.share for r in regions) - 1.0) < 1e-9
    norm = next(r for r in regions if r.name == "norm")
    assert norm.task == "layernorm" and norm.kind == "normalization"
    rest = next(r for r in regions if r.name.startswith("<root>"))
    assert rest.task is None  # the multiply by 3 has no task
    assert 0 < coverage(regions) < 1
