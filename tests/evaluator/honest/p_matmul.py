"""Matrix product in fp16 (KernelBench format, small odd sizes): judged in fp16, its inputs' dtype."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(67, 45, dtype=torch.float16), torch.randn(45, 53, dtype=torch.float16)]


def get_init_inputs():
    return []
