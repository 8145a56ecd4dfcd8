"""The grammar's typing of a training variant: launch_forward and launch_backward are host functions under the
rules of launch (their positional parameters are tensors, ``saved`` included, and only they allocate and
launch); what an attacker would put in ``saved`` or call in the backward is refused."""

from __future__ import annotations

import pytest

from warpforge.evaluator.static.grammar import check_module

HEAD = """import torch
import triton
import triton.language as tl

TASK = "square"
SPACE = {"BLOCK": [256]}


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def launch(x, BLOCK=256):
    y = torch.empty_like(x)
    _k[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK)
    return y

"""

FORWARD = """
def launch_forward(x, BLOCK=256):
    y = torch.empty_like(x)
    s = torch.empty((x.shape[0],), device=x.device, dtype=torch.float32)
    _k[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK)
    return y, (x, s)
"""


@pytest.mark.parametrize(
    "backward",
    [
        # unpacking saved: both items are tensors, passed to a kernel
        "    a, b = saved\n    dx = torch.empty_like(a)\n"
        "    _k[(1,)](a, dx, a.numel(), BLOCK=BLOCK)\n    return (dx,)\n",
        # indexing saved by an int constant, shapes read from the item
        "    a = saved[0]\n    dx = torch.empty_like(grad_out)\n"
        "    _k[(triton.cdiv(a.numel(), BLOCK),)](a, dx, a.shape[0], BLOCK=BLOCK)\n    return dx, saved[1]\n",
    ],
)
def test_training_variant_forms_are_accepted(backward: str) -> None:
    source = HEAD + FORWARD + "\n\ndef launch_backward(grad_out, saved, x, BLOCK=256):\n" + backward
    assert check_module(source) is None


@pytest.mark.parametrize(
    ("backward", "reason"),
    [
        ("    return torch.autograd.grad(x, x, grad_out)\n", "torch_compute_call"),
        ("    x.requires_grad_()\n    return (x,)\n", "torch_compute_call"),
        ("    y = x.requires_grad_()\n    return (y,)\n", "torch_compute_call"),
        ("    grad_out.backward()\n    return (x,)\n", "torch_compute_call"),
        ("    return (grad_out * 2,)\n", "tensor_use"),  # torch arithmetic on the upstream gradient
        ("    a, n = saved\n    return (torch.empty(n),)\n", "tensor_use"),  # a saved item is a tensor, not a size
        ("    f = saved[0]\n    return f(x)\n", "host_name"),  # an item of saved is never called
        ("    return (saved[grad_out],)\n", "tensor_use"),  # indexing by a tensor gathers
        ("    return launch_forward(x)\n", "tensor_use"),  # a host function takes shape values only
        ("    if grad_out:\n        return (x,)\n    return (x,)\n", "host_read"),
    ],
)
def test_what_a_backward_cannot_do(backward: str, reason: str) -> None:
    source = HEAD + FORWARD + "\n\ndef launch_backward(grad_out, saved, x, BLOCK=256):\n" + backward
    finding = check_module(source)
    assert finding is not None and finding.reason == reason, finding


def test_saved_cannot_carry_a_callable() -> None:
    forward = FORWARD.replace("return y, (x, s)", "return y, (x, _helper)")
    source = (
        HEAD + forward + "\n\ndef _helper(n):\n    return n\n\n\ndef launch_backward(grad_out, saved, x):\n"
        "    return (x,)\n"
    )
    finding = check_module(source)
    assert finding is not None and finding.reason == "host_name" and "used as a value" in finding.message


def test_only_launchers_launch() -> None:
    source = HEAD + "\ndef helper(x):\n    _k[(1,)](x, x, 1, BLOCK=256)\n    return 1\n"
    finding = check_module(source)
    assert finding is not None and finding.reason == "kernel_use"
