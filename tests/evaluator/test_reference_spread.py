"""The judge's second opinion on a few elements out of tolerance: the reference's own rounding, resampled.

Expected values come from torch alone: an fp32 convolution computed another way (im2col and a matmul over
chunks of the reduction, the order a blocked GPU kernel sums in), a bf16 computation, a single perturbed
element; float64 is the truth.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from warpforge.evaluator.judge.compare import (
    compare_outputs,
    compare_with_spread,
    forward_references,
    reference_spread,
    references,
)

ATOL = RTOL = 1e-4  # the fp32 tolerance of every built-in task (kernels/taskdef.py)
SEEDS = range(20)


def _problem(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """KernelBench level 2's 47_Conv3d_Mish_Tanh at a small shape on its x1e4 adversarial inputs: 864-term sums
    near 1e4 that cancel to O(1) where mish and tanh are steep."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(2, 32, 6, 10, 10, generator=gen) * 1e4
    w = (torch.rand(16, 32, 3, 3, 3, generator=gen) - 0.5) * 2 / 864**0.5
    b = (torch.rand(16, generator=gen) - 0.5) * 0.06
    return x, w, b


def _reference(w: torch.Tensor, b: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: torch.tanh(F.mish(F.conv3d(x, w.to(x.dtype), b.to(x.dtype))))


def _im2col_fp32(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, chunk: int) -> torch.Tensor:
    cols = x.unfold(2, 3, 1).unfold(3, 3, 1).unfold(4, 3, 1)
    n, c, d, h, ww = cols.shape[:5]
    a = cols.permute(0, 2, 3, 4, 1, 5, 6, 7).reshape(-1, c * 27)
    wm = w.reshape(w.shape[0], -1)
    acc = torch.zeros(a.shape[0], w.shape[0])
    for k in range(0, a.shape[1], chunk):
        acc += a[:, k : k + chunk] @ wm[:, k : k + chunk].T
    v = (acc + b).reshape(n, d, h, ww, -1).permute(0, 4, 1, 2, 3)
    return torch.tanh(F.mish(v))


def test_an_fp32_kernel_summing_in_another_order_is_ok_where_one_draw_of_torchs_rounding_was_not() -> None:
    strict_fails = 0
    for seed in SEEDS:
        x, w, b = _problem(seed)
        ref = _reference(w, b)
        r64, rlp = references(ref, (x,))
        out = [_im2col_fp32(x, w, b, chunk=32)]
        strict = compare_outputs(out, r64, rlp, ATOL, RTOL)
        strict_fails += strict is not None
        found = compare_with_spread(out, r64, rlp, ATOL, RTOL, forward_references(ref), (x,), seed=seed)
        assert found is None, f"seed {seed}: {found}"
    # the strict rule alone rejects this honest kernel on some seeds (6 of 20 at 2x32x6x10x10 with torch 2.13)
    assert strict_fails >= 1


def test_a_bf16_computation_and_one_wrong_element_still_fail() -> None:
    for seed in SEEDS[:5]:
        x, w, b = _problem(seed)
        ref = _reference(w, b)
        r64, rlp = references(ref, (x,))
        bf16 = [_reference(w.bfloat16().float(), b)(x.bfloat16().float())]
        found = compare_with_spread(bf16, r64, rlp, ATOL, RTOL, forward_references(ref), (x,), seed=seed)
        assert found is not None and found.reason == "wrong_values"
        # one element off by 1e-3 where the output is O(1): a handful of misses gets the second opinion, and
        # the resampled rounding (about 1e-4 at worst here) does not cover it
        one = rlp[0].clone()
        flat = one.view(-1)
        flat[int(torch.argmax(r64[0].abs()))] += 1e-3
        found = compare_with_spread([one], r64, rlp, ATOL, RTOL, forward_references(ref), (x,), seed=seed)
        assert found is not None and found.bad == 1


def test_many_elements_out_get_no_second_opinion() -> None:
    x, w, b = _problem(0)
    ref = _reference(w, b)
    r64, rlp = references(ref, (x,))
    off = [rlp[0] * (1 + 1e-3)]
    found = compare_outputs(off, r64, rlp, ATOL, RTOL)
    assert found is not None and not found.rare and found.bad > found.total // 100


def test_the_spread_replays_from_its_seed_and_a_reference_that_refuses_the_resampled_inputs_keeps_the_verdict() -> None:
    x, w, b = _problem(3)
    ref = _reference(w, b)
    refs = forward_references(ref)
    first, again = reference_spread(refs, (x,), seed=7), reference_spread(refs, (x,), seed=7)
    assert first is not None and again is not None and torch.equal(first[0], again[0])
    other = reference_spread(refs, (x,), seed=8)
    assert other is not None and not torch.equal(first[0], other[0])

    def exact_only(t: torch.Tensor) -> torch.Tensor:
        if not torch.equal(t.float(), x):
            raise ValueError("inputs changed")
        return ref(t)

    assert reference_spread(forward_references(exact_only), (x,)) is None
    r64, rlp = references(exact_only, (x,))
    out = rlp[0].clone()
    out.view(-1)[0] += 1.0
    found = compare_with_spread([out], r64, rlp, ATOL, RTOL, forward_references(exact_only), (x,))
    assert found is not None and found.bad == 1


def test_a_gradient_summed_in_another_order_gets_the_same_second_opinion() -> None:
    """dW of x @ w.T over 4096 rows of inputs near 1e4: torch sums the rows its way, the candidate in chunks."""
    from warpforge.evaluator.judge.gradients import grad_references, gradient_of

    for seed in range(5):
        gen = torch.Generator().manual_seed(seed)
        x = torch.rand(4096, 16, generator=gen) * 1e4
        w = torch.randn(8, 16, generator=gen)
        grad_out = torch.randn(4096, 8, generator=gen)

        def linear(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a @ b.T

        g64, glp = grad_references(linear, (x, w), (1,), grad_out)
        chunked = torch.zeros(8, 16)
        for m in range(0, 4096, 64):
            chunked += grad_out[m : m + 64].T @ x[m : m + 64]
        grad_of = gradient_of(linear, (1,), grad_out, 0)
        assert compare_with_spread([chunked], [g64[0]], [glp[0]], ATOL, RTOL, grad_of, (x, w), seed) is None
        wrong = chunked.clone()
        wrong[0, 0] += 1e-2 * float(g64[0].abs().max())
        found = compare_with_spread([wrong], [g64[0]], [glp[0]], ATOL, RTOL, grad_of, (x, w), seed)
        assert found is not None and found.bad == 1


def _layer_norm(x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), eps=1e-5)


def _two_pass(x: torch.Tensor) -> torch.Tensor:
    """Triton's layer-norm tutorial in fp32: the mean by a blocked sum (128-wide blocks), then the centred variance."""
    n = x.shape[-1]
    blocks = torch.nn.functional.pad(x, (0, (-n) % 128)).view(x.shape[0], -1, 128)
    mean = blocks.sum(-1).sum(-1, keepdim=True) / n
    xc = x - mean
    var = (xc * xc).sum(-1, keepdim=True) / n
    return xc * torch.rsqrt(var + 1e-5)


def _no_eps(x: torch.Tensor) -> torch.Tensor:
    """The two-pass kernel without the eps under the square root: within tolerance on random rows (var ~ 1),
    wrong on constant ones (var ~ 0)."""
    n = x.shape[-1]
    mean = x.sum(-1, keepdim=True) / n
    xc = x - mean
    return xc * torch.rsqrt((xc * xc).sum(-1, keepdim=True) / n)


def test_constant_rows_allow_what_the_problem_does_to_an_ulp_of_its_inputs() -> None:
    """Constant rows into a layer norm (the adversarial 'constant along rows' inputs of every KernelBench problem):
    the allowance comes from the float64 reference on inputs moved by one ulp. The accurate two-pass kernel passes
    there, and failed before (every element out: no second opinion); one without the eps does not pass."""
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(16, 1, generator=gen) * 3).expand(16, 1031).contiguous()
    refs = forward_references(_layer_norm)
    r64, rlp = references(_layer_norm, (x,))
    honest, wrong = [_two_pass(x)], [_no_eps(x)]
    before = compare_with_spread(honest, r64, rlp, ATOL, RTOL, refs, (x,))
    assert before is not None and before.reason == "wrong_values" and not before.rare  # what it was
    assert compare_with_spread(honest, r64, rlp, ATOL, RTOL, refs, (x,), conditioned=True) is None
    found = compare_with_spread(wrong, r64, rlp, ATOL, RTOL, refs, (x,), conditioned=True)
    assert found is not None and found.reason in ("wrong_values", "non_finite_output"), found
    # and on random rows, where the problem is well conditioned, the allowance adds nothing a wrong kernel could use
    y = torch.randn(16, 1031, generator=gen)
    r64, rlp = references(_layer_norm, (y,))
    assert compare_with_spread([_two_pass(y)], r64, rlp, ATOL, RTOL, refs, (y,), conditioned=True) is None
    assert compare_with_spread([_no_eps(y)], r64, rlp, ATOL, RTOL, refs, (y,), conditioned=True) is None
    off = [_two_pass(y) * (1 + 1e-3)]
    assert compare_with_spread(off, r64, rlp, ATOL, RTOL, refs, (y,), conditioned=True) is not None
