"""KernelBench level1/51_Argmax_over_a_dimension.py at small odd sizes (an int64 output)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=self.dim)


batch_size = 4
dim1 = 33
dim2 = 17


def get_inputs():
    x = torch.rand(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [1]
