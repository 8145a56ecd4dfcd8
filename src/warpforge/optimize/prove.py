"""The proof of a patch, in its own process: the patched model against the unpatched one, same weights.

Run by optimize/flow.py as ``python -m warpforge.optimize.prove`` with a JSON request on stdin; prints one
JSON line (report.Checks). With ``ops_only`` it checks each op at its region's shape and stops: the model
comparison is then the exported package's own ``tests/test_patched_model.py``, which optimize/flow.py runs where
warpforge cannot be imported (what ships is what is proven); a ``module:function`` target, which the package
cannot rebuild, is compared here. The exported kernels run here, never in the process that judges and stores: a
winner is code the search produced. Without a GPU, ``TRITON_INTERPRET=1`` runs the Triton kernels themselves.

Checked, with tolerances per dtype (stated in the output):
- the first forward's outputs: max abs difference within ``rtol * max|reference| + atol``;
- with ``train``: ``steps`` SGD steps on both models, each step's loss within ``rtol`` relative, and the
  first step's parameter gradients, each within a relative L2 error of ``grad_rtol``.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import torch

from warpforge.optimize.patch_spec import PatchSpec, load_patches
from warpforge.optimize.patching import apply_patches, op_of
from warpforge.optimize.report import Checks
from warpforge.optimize.target import load_target

# (output rtol, loss rtol, gradient relative L2): bf16 keeps 8 significant bits (eps 7.8e-3); a 2-layer model's
# logits pass through ~10 roundings per layer in either order, so a few eps of the largest logit; Adam's first
# steps amplify gradient noise into the weights, hence the losses' 1e-2.
TOLERANCES = {torch.float32: (1e-4, 1e-4, 1e-3), torch.float16: (1e-2, 5e-3, 5e-2), torch.bfloat16: (5e-2, 2e-2, 1e-1)}


def _first(out: Any) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "logits"):
        return out.logits  # type: ignore[no-any-return]
    return _first(out[0])


def _outputs(model: torch.nn.Module, inputs: tuple[Any, ...], kind: str) -> torch.Tensor:
    with torch.no_grad():
        if kind == "transformers":  # the step returns its loss; its logits are what a user compares
            return _first(model.lm(input_ids=inputs[0]))  # type: ignore[operator]
        return _first(model(*inputs))


def _steps(
    model: torch.nn.Module, inputs: tuple[Any, ...], loss_fn: Any, steps: int, lr: float
) -> tuple[list[float], dict[str, torch.Tensor]]:
    # SGD, not Adam: in a float16 model Adam's eps (1e-8) underflows to 0 and its first step divides by zero
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses, grads = [], {}
    for step in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(*inputs))
        loss.backward()
        if step == 0:
            grads = {n: p.grad.detach().float().clone() for n, p in model.named_parameters() if p.grad is not None}
        losses.append(float(loss))
        opt.step()
    return losses, grads


def check_at_shape(package: Any, spec: PatchSpec, dtype: torch.dtype, train: bool) -> str:
    """ "" when the exported op computes its task at the region's own shape (forward, and with ``train`` the
    gradients), as the evaluator's judge would; else why not. A campaign checks its task's check shapes: a
    region's shape (a head dim of 16, a vocabulary of 1024) may be one no kernel was ever verified at."""
    from warpforge.evaluator.judge.compare import compare_outputs
    from warpforge.kernels.task import get_task

    task = get_task(spec.task or spec.op)
    inputs = task.make_inputs(spec.shape, dtype, 0, "cpu")
    mine = [
        t.clone().requires_grad_(train and i in task.grad_inputs) if isinstance(t, torch.Tensor) else t
        for i, t in enumerate(inputs)
    ]
    exact = [
        t.double().requires_grad_(train and i in task.grad_inputs)
        if isinstance(t, torch.Tensor) and t.is_floating_point()
        else t
        for i, t in enumerate(inputs)
    ]
    out = op_of(package, spec)(*mine)
    ref = task.reference(*exact)
    atol, rtol = task.tolerance(dtype)
    bad = compare_outputs([out.detach()], [ref.detach()], [ref.detach().to(out.dtype)], atol, rtol)
    if bad is not None:
        why = f"its kernel is wrong at the region's shape: {bad.message}"
        if dtype == torch.bfloat16 and not torch.cuda.is_available():
            why += " (Triton's interpreter computes bf16 tl.dot wrongly: on a CPU use --dtype float16)"
        return why
    if train and task.grad_inputs:
        # one upstream gradient in the op's dtype for both, as the judge draws it (evaluator/judge/gradients.py):
        # the float64 reference fed the unrounded one differs by the rounding of every term of a sum (an
        # embedding's dW rows summing up to 4 fp16 grad rows were off by up to 8e-4 at 0.12, 13 ulps, where
        # 3.8e-4 is allowed)
        grad = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(out.dtype)
        try:
            out.backward(grad)
        except RuntimeError as e:  # an op exported without autograd: this region cannot be patched for training
            return f"its export cannot differentiate: {str(e).splitlines()[0]}"
        ref.backward(grad.double())
        atol, rtol = task.grad_tolerance(dtype)
        for i in task.grad_inputs:
            g, r = mine[i].grad, exact[i].grad
            if g is None or r is None:
                return f"no gradient for input {i} at the region's shape"
            bad = compare_outputs([g], [r], [r.to(g.dtype)], atol, rtol)
            if bad is not None:
                return f"its backward is wrong at the region's shape (input {i}): {bad.message}"
    return ""


def prove(request: dict[str, Any]) -> Checks:
    dtype = getattr(torch, request["dtype"])
    target = load_target(request["target"], request["batch"], request["seq"], dtype)
    sys.path.insert(0, request["package_dir"])
    package = importlib.import_module(request["namespace"])
    specs = load_patches(open(request["patches"]).read())
    refused: dict[str, str] = {}
    verdicts: dict[tuple[str, str], str] = {}  # (op, shape): one check per distinct shape
    for spec in specs:
        key = (spec.op, json.dumps(spec.shape, sort_keys=True))
        if key not in verdicts:
            verdicts[key] = check_at_shape(package, spec, dtype, request["train"])
        if verdicts[key]:
            refused[spec.region] = verdicts[key]
    if request.get("ops_only"):  # the model comparison is the package's own test, run with warpforge blocked
        return Checks(fallback=refused)
    specs = [s for s in specs if s.region not in refused]
    reference, inputs = target.build(request["seed"])
    patched, _ = target.build(request["seed"])
    counters = apply_patches(patched, specs, package)
    out_rtol, loss_rtol, grad_rtol = TOLERANCES.get(dtype, TOLERANCES[torch.float32])

    ref_out = _outputs(reference, inputs, target.kind).float()
    new_out = _outputs(patched, inputs, target.kind).float()
    scale = float(ref_out.abs().max()) if ref_out.numel() else 0.0
    diff = float((ref_out - new_out).abs().max()) if ref_out.shape == new_out.shape else float("inf")
    out_tol = out_rtol * max(scale, 1.0)
    checks = Checks(
        max_abs_diff=diff,
        output_tolerance=out_tol,
        outputs_match=diff <= out_tol,
        interpreted=not torch.cuda.is_available(),
    )
    if request["train"]:
        before, g_ref = _steps(reference, inputs, target.loss, request["steps"], request["lr"])
        after, g_new = _steps(patched, inputs, target.loss, request["steps"], request["lr"])
        worst = 0.0
        for name, g in g_ref.items():
            other = g_new.get(name)
            if other is None:
                worst = float("inf")
                continue
            worst = max(worst, float((g - other).norm() / g.norm().clamp_min(1e-12)))
        checks.losses_before, checks.losses_after = list[float | None](before), list[float | None](after)
        checks.loss_tolerance = loss_rtol
        # a non-finite loss is no match (NaN compares false), whichever model produced it
        checks.losses_match = all(abs(a - b) <= loss_rtol * max(abs(a), 1.0) for a, b in zip(before, after))
        checks.grad_max_rel_diff, checks.grad_tolerance = worst, grad_rtol
        checks.grads_match = worst <= grad_rtol
    checks.kernel_calls = dict(counters.kernel)
    checks.fallback = {k: v for k, v in counters.fallback.items() if k not in counters.kernel} | refused
    return checks


def main() -> None:
    request = json.loads(sys.stdin.read())
    checks = prove(request)
    sys.stdout.write(checks.model_dump_json() + "\n")


if __name__ == "__main__":
    main()
