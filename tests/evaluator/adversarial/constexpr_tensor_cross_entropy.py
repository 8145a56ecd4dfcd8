"""Attack: pass the logits and targets to a tl.constexpr parameter. Under Triton's interpreter a constexpr
receives the launch argument itself, so inside the kernel they are torch tensors and .logsumexp/.gather make
torch compute the loss (the op recorder used to pause inside launches); compiled, no such kernel exists."""
import torch
import triton
import triton.language as tl

TASK = "cross_entropy"
SPACE = {"num_warps": [4]}


@triton.jit
def _ce(loss_ptr, M, L: tl.constexpr, T: tl.constexpr):
    x = L.float()
    rows = (x.logsumexp(1) - x.gather(1, T[:, None].long())[:, 0]).tolist()
    for i in range(M):
        tl.store(loss_ptr + i, rows[i])


def launch(logits, targets, num_warps=4):
    loss = torch.empty(logits.shape[0], device=logits.device, dtype=torch.float32)
    _ce[(1,)](loss, logits.shape[0], L=logits, T=targets, num_warps=num_warps)
    return loss
