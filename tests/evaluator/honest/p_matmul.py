"""Matrix product (KernelBench format, small odd sizes)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(67, 45), torch.randn(45, 53)]


def get_init_inputs():
    return []
