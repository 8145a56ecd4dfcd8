"""Regions are matched by what they compute: a user's module, any layout of sizes, a loss's reduction."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from warpforge.optimize.match import find_call_match
from warpforge.optimize.regions import function_calls, module_call
from warpforge.optimize.trace import FunctionCall, ModuleCall


class MyNorm(torch.nn.Module):
    """An RMSNorm as a user writes it, under a name nothing knows."""

    def __init__(self, n: int, eps: float) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.randn(n))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.scale


class Doubler(torch.nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2 * x * self.scale


def _module(module: torch.nn.Module, *args: torch.Tensor) -> ModuleCall:
    with torch.no_grad():
        return ModuleCall("m", module, args, {}, module(*args))


def test_a_users_rmsnorm_on_3d_input_matches_with_rows_flattened() -> None:
    call = module_call(_module(MyNorm(24, 1e-6), torch.randn(3, 5, 24)))
    assert call is not None
    match = find_call_match(call)
    assert match is not None and match.task == "rmsnorm"
    assert match.shape == {"M": 15, "N": 24}  # 3 x 5 rows of 24
    assert match.flatten[0] and match.order == (0, 1)


def test_a_different_epsilon_is_no_rmsnorm() -> None:
    # eps 1e-2 against the task's 1e-6: the task's small-magnitude adversarial inputs tell them apart
    call = module_call(_module(MyNorm(24, 1e-2), torch.randn(15, 24)))
    assert call is not None
    match = find_call_match(call)
    assert match is None or match.task != "rmsnorm"


def test_something_else_matches_nothing_normalizing() -> None:
    call = module_call(_module(Doubler(24), torch.randn(15, 24)))
    assert call is not None
    match = find_call_match(call)
    assert match is None or match.task not in ("rmsnorm", "layernorm", "normalize")


def _function(func, *args, **kwargs) -> FunctionCall:  # type: ignore[no-untyped-def]
    with torch.no_grad():
        return FunctionCall("", func, args, kwargs, func(*args, **kwargs), 0)


def test_a_mean_loss_with_ignored_targets_matches_the_per_row_cross_entropy() -> None:
    logits, targets = torch.randn(12, 40), torch.randint(0, 40, (12,))
    targets[3] = -100
    call = function_calls(_function(F.cross_entropy, logits, targets, ignore_index=-100, reduction="mean"))[0]
    assert call is not None
    match = find_call_match(call)
    assert match is not None and match.task == "cross_entropy"
    assert match.reduce == "mean" and match.ignore_index == -100
    assert match.shape == {"M": 12, "V": 40}


def test_sdpa_with_grouped_heads_matches_causal_attention() -> None:
    q, k, v = torch.randn(1, 4, 16, 8), torch.randn(1, 2, 16, 8), torch.randn(1, 2, 16, 8)
    call = function_calls(_function(F.scaled_dot_product_attention, q, k, v, is_causal=True, enable_gqa=True))[0]
    assert call is not None
    match = find_call_match(call)
    assert match is not None and match.task == "attention"
    assert match.shape["HQ"] == 4 and match.shape["HKV"] == 2 and match.shape["S"] == 16


def test_non_causal_attention_is_not_matched_as_causal() -> None:
    q, k, v = torch.randn(1, 2, 16, 8), torch.randn(1, 2, 16, 8), torch.randn(1, 2, 16, 8)
    call = function_calls(_function(F.scaled_dot_product_attention, q, k, v, is_causal=False))[0]
    assert call is not None
    match = find_call_match(call)
    # the attention task's shapes are all causal (its reference's default): full attention is another function
    assert match is None or match.task != "attention"


def test_a_linear_without_bias_on_3d_input_is_the_linear_task_with_zero_bias() -> None:
    layer = torch.nn.Linear(24, 40, bias=False)
    call = module_call(_module(layer, torch.randn(3, 5, 24)))
    assert call is not None
    match = find_call_match(call)
    assert match is not None and match.task == "linear"
    assert match.shape == {"M": 15, "N": 40, "K": 24}
    assert match.order == (0, 1, -1) and match.zero_shapes == ((40,),)


def test_a_transposed_product_is_no_linear() -> None:
    class XW(torch.nn.Module):  # x @ w (w stored [K, N]) is not x @ w.T
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(24, 40))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ self.w

    call = module_call(_module(XW(), torch.randn(15, 24)))
    assert call is not None
    match = find_call_match(call)
    assert match is None or match.task != "linear"


def test_layernorm_on_rows_whose_fp32_eager_rounding_fails_the_adversarial_inputs_still_matches() -> None:
    # 64 rows of 80 in float16: torch's own fp32 layer_norm is off by ~1e-3 on rows offset by 1e4, so the
    # call is compared in float64 (the function, not its eager rounding)
    layer = torch.nn.LayerNorm(80).half()
    call = module_call(_module(layer, torch.randn(4, 16, 80).half()))
    assert call is not None
    match = find_call_match(call)
    assert match is not None and match.task == "layernorm" and match.shape == {"M": 64, "N": 80}
