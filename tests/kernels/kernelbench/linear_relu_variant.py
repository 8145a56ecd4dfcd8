"""A plain kernel variant for linear_relu.py: the model's state arrives as trailing inputs (weight, bias)."""

import torch
import triton
import triton.language as tl

TASK = "linear_relu"
SPACE = {"BM": [16], "num_warps": [4]}


@triton.jit
def _linear_relu(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        x = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * K + rk[:, None], mask=(rn[None, :] < N) & (rk[:, None] < K), other=0.0)
        acc += tl.dot(x, w, input_precision="ieee")
    acc = tl.maximum(acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :], 0.0)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def launch(x, weight, bias, BM=16, num_warps=4):
    x = x.contiguous()
    weight = weight.contiguous()
    M, K = x.shape
    N = weight.shape[0]
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    _linear_relu[(triton.cdiv(M, BM), triton.cdiv(N, 16))](
        x, weight, bias, y, M, N, K, BM=BM, BN=16, BK=16, num_warps=num_warps
    )
    return y
