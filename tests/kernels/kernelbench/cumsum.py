"""A KernelBench level-1 style problem no template family computes (a scan): cumulative sum along dim 1."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """A cumulative sum over the last dimension."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=1)


batch_size = 16
dim = 1031


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
