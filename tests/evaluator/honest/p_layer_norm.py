"""Layer norm over the last dimension with an affine weight and bias (KernelBench format, small odd sizes)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(19, 611)]


def get_init_inputs():
    return [611]
