"""Row argmax (KernelBench format, small odd sizes)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.argmax(x, dim=-1)


def get_inputs():
    return [torch.randn(41, 397)]


def get_init_inputs():
    return []
