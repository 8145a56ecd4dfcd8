"""KernelBench's ``class ModelNew(nn.Module)`` under the variant grammar (evaluator/static/grammar/model_new.py).

An honest answer passes; every way for torch (or the candidate's own override of nn.Module's machinery)
to compute the answer or dodge the loaded state is refused, each with its named rule.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from warpforge.evaluator.static.grammar import check_module
from warpforge.kernels.variant import VariantError, check_space, parse_variant

HONEST = (Path(__file__).parents[1] / "kernels" / "kernelbench" / "gemm_add_relu_modelnew.py").read_text()
RETURN = "        return y\n"
INIT_END = "        self.bias = nn.Parameter(torch.zeros(bias_shape))\n"


def forward_returns(expr: str) -> str:
    return HONEST.replace(RETURN, f"        return {expr}\n")


def in_class(code: str) -> str:
    return HONEST.replace("    def forward", code + "\n    def forward")


def in_init(line: str) -> str:
    return HONEST.replace(INIT_END, INIT_END + f"        {line}\n")


def test_the_honest_answer_passes_and_needs_no_task_or_space() -> None:
    assert check_module(HONEST) is None
    for header in ("import torch.nn as nn", "from torch import nn"):
        assert check_module(HONEST.replace("import torch.nn as nn", header)) is None
    variant = parse_variant(HONEST, "answer")
    assert variant.model_new and variant.task == "" and variant.space == {}
    check_space(variant)  # an empty SPACE is one configuration
    assert variant.for_task("gemm_add_relu").task == "gemm_add_relu"
    spaced = parse_variant("TASK = 'gemm_add_relu'\nSPACE = {'num_warps': [4]}\n" + HONEST, "answer")
    assert spaced.task == "gemm_add_relu" and spaced.configs() == [{"num_warps": 4}]


def test_launch_and_model_new_together_are_refused() -> None:
    with pytest.raises(VariantError, match="both launch and class ModelNew"):
        parse_variant(HONEST + "\n\ndef launch(x):\n    return x\n")


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        # torch computing the answer
        (forward_returns("self.gemm(x)"), "torch_compute_call"),
        (forward_returns("self.gemm.forward(x)"), "torch_compute_call"),
        (forward_returns("x @ self.gemm.weight.t()"), "torch_compute_call"),
        (forward_returns("torch.nn.functional.linear(x, self.gemm.weight)"), "torch_compute_call"),
        (forward_returns("nn.functional.relu(y)"), "torch_compute_call"),
        (
            HONEST.replace("import torch.nn as nn", "import torch.nn as nn\nimport torch.nn.functional as F"),
            "forbidden_import",
        ),
        (forward_returns("getattr(self, 'gemm')(x)"), "dynamic_access"),
        (forward_returns("self.gemm.__call__(x)"), "private_access"),
        (forward_returns("self.state_dict()"), "torch_compute_call"),
        (HONEST.replace(RETURN, "        for m in self.modules():\n            pass\n" + RETURN), "torch_compute_call"),
        (HONEST.replace(RETURN, "        g = self.gemm\n" + RETURN), "host_name"),
        (forward_returns("self"), "host_name"),
        (HONEST.replace(RETURN, "        self.gemm.weight = x\n" + RETURN), "host_statement"),
        (forward_returns("self.gemm.weight.data"), "host_name"),
        # overriding the machinery that loads the state or calls the model
        (in_class("    def load_state_dict(self, state, strict=True):\n        return None\n"), "model_new_class"),
        (in_class("    def _load_from_state_dict(self, *args):\n        return None\n"), "model_new_class"),
        (in_class("    def __setattr__(self, name, value):\n        return None\n"), "model_new_class"),
        (in_class("    def state_dict(self):\n        return None\n"), "model_new_class"),
        (in_class("    def __call__(self, x):\n        return x\n"), "model_new_class"),
        (
            HONEST.replace("class ModelNew(nn.Module):\n", "class ModelNew(nn.Module):\n    state_dict = None\n"),
            "model_new_class",
        ),
        (HONEST.replace("class ModelNew(nn.Module):", "class ModelNew(nn.Module, metaclass=type):"), "model_new_class"),
        (HONEST.replace("class ModelNew(nn.Module):", "class ModelNew(nn.Linear):"), "torch_compute_call"),
        (HONEST.replace("class ModelNew(nn.Module):", "@triton.jit\nclass ModelNew(nn.Module):"), "decorator"),
        (HONEST.replace("    def forward", "    @property\n    def forward"), "decorator"),
        (HONEST + "\n\nclass Helper(nn.Module):\n    pass\n", "module_statement"),
        (HONEST + "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n", "rebinding"),
        (HONEST.replace("class ModelNew(nn.Module):", "class ModelNew(torch.nn.Module):"), "torch_compute_call"),
        # __init__ builds parameters and plain values only
        (in_init("self.register_forward_hook(self.bias)"), "model_new_init"),
        (in_init("self.register_forward_pre_hook(self.bias)"), "model_new_init"),
        (in_init("self.act = nn.ReLU()"), "torch_compute_call"),
        (in_init("self.table = torch.zeros(3)"), "model_new_init"),
        (in_init("self.table = torch.randn(3)"), "torch_compute_call"),
        (in_init("self.forward = 1"), "model_new_class"),
        (in_init("self.training = 1"), "model_new_class"),
        (in_init("self.bias = nn.Parameter(torch.ones(bias_shape))"), "rebinding"),
        (in_init("self.gemm.weight = nn.Parameter(torch.zeros(1))"), "torch_compute_call"),
        (in_init('self.register_buffer("b", torch.zeros(3), persistent=False)'), "model_new_init"),
        (in_init("self.f = lambda t: t"), "model_new_init"),
        (in_init("self.calls = [0]"), "model_new_init"),  # state across timed calls
        (in_init("self.sizes = (in_features, [out_features])"), "model_new_init"),
        (
            HONEST.replace("        super().__init__()\n", "        self.a = 1\n        super().__init__()\n"),
            "private_access",
        ),
        (HONEST.replace(RETURN, "        super().__init__()\n" + RETURN), "private_access"),
        (HONEST.replace("super().__init__()", "super().register_forward_hook(1)"), "dynamic_access"),
    ],
)
def test_each_attack_is_refused_with_its_rule(source: str, rule: str) -> None:
    finding = check_module(source)
    assert finding is not None and finding.reason == rule, finding
