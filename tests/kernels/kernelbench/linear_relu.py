"""A KernelBench-style problem with weights: nn.Linear (with its bias) then ReLU, small odd sizes."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(12, 20)]


def get_init_inputs():
    return [20, 18]
