"""Regions are matched by what they compute: a user's module, any layout of sizes, a loss's reduction."""

from __future__ import annotations

import pytest
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


def test_an_embedding_on_2d_ids_is_the_embedding_task_with_ids_flattened() -> None:
    table = torch.nn.Embedding(512, 64)
    call = module_call(_module(table, torch.randint(0, 512, (1, 32))))
    assert call is not None
    match = find_call_match(call)
    assert match is not None and match.task == "embedding"
    assert match.shape == {"M": 32, "V": 512, "N": 64}  # a batch of 1 x 32 tokens
    assert match.order == (0, 1) and match.flatten == (True, False) and match.has_backward


def test_functional_embedding_matches_and_a_max_norm_table_does_not() -> None:
    weight, ids = torch.randn(100, 24), torch.randint(0, 100, (3, 5))
    call = function_calls(_function(F.embedding, ids, weight))[0]
    assert call is not None
    match = find_call_match(call)
    assert match is not None and match.task == "embedding" and match.shape == {"M": 15, "V": 100, "N": 24}
    # max_norm rescales every looked-up row whose norm passes 1 (the task's N(0, 1) rows of 64 have norm ~8)
    renorm = torch.nn.Embedding(512, 64, max_norm=1.0)
    call = module_call(_module(renorm, torch.randint(0, 512, (1, 32))))
    assert call is not None
    match = find_call_match(call)
    assert match is None or match.task != "embedding"


@pytest.mark.xfail(
    strict=True,
    reason="the matcher compares forwards only: padding_idx changes the gradient "
    "(row padding_idx of dW is zero), not the output, so the table matches and its patch would "
    "train the padding row",
)
def test_an_embedding_with_padding_idx_is_not_the_embedding_task() -> None:
    table = torch.nn.Embedding(512, 64, padding_idx=0)
    call = module_call(_module(table, torch.randint(0, 512, (1, 32))))
    assert call is not None
    match = find_call_match(call)
    assert match is None or match.task != "embedding"
