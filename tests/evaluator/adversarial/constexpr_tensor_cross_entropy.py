"""Attack: pass the logits and targets to tl.constexpr parameters. Under Triton's interpreter a constexpr
receives the launch argument itself, so inside the kernel they are torch tensors and .max/.exp/.sum/.log
(names Triton tensors share, so the kernel grammar reads them as Triton's) make torch compute each row's loss; tl.full carries the torch scalar into a Triton block (the op recorder used to
pause inside launches). Compiled for sm_90 no such kernel exists: a tensor is no constexpr."""
import torch
import triton
import triton.language as tl

TASK = "cross_entropy"
SPACE = {"num_warps": [4]}


@triton.jit
def _ce(loss_ptr, M: tl.constexpr, L: tl.constexpr, T: tl.constexpr):
    for i in tl.static_range(M):
        row = L[i]
        top = row.max()
        loss = (row - top).exp().sum().log() + top - row[T[i]]
        tl.store(loss_ptr + i + tl.arange(0, 1), tl.full((1,), loss, tl.float32))


def launch(logits, targets, num_warps=4):
    loss = torch.empty(logits.shape[0], device=logits.device, dtype=torch.float32)
    _ce[(1,)](loss, logits.shape[0], logits, targets, num_warps=num_warps)
    return loss
