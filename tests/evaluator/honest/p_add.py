"""Elementwise sum of two vectors (KernelBench format, small odd size)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return x + y


def get_inputs():
    return [torch.randn(3001), torch.randn(3001)]


def get_init_inputs():
    return []
