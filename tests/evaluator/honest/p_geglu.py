"""GeGLU gate: gelu_tanh(a) * b (KernelBench format, small odd sizes)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.nn.functional.gelu(a, approximate="tanh") * b


def get_inputs():
    return [torch.randn(23, 517), torch.randn(23, 517)]


def get_init_inputs():
    return []
