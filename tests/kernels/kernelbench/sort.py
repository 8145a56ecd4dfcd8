"""A KernelBench level-1 style problem no template family computes (a sort): each row sorted along dim 1."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """The values of each row in ascending order."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sort(x, dim=1).values


batch_size = 16
dim = 1031


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
