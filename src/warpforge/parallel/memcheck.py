"""Ground truth without a published table: PyTorch's own FSDP2 memory tracker on a torchtitan-style Llama.

Builds a Llama block exactly as torchtitan writes it (``nn.RMSNorm``; complex-number RoPE on fp32 copies of
q and k; ``scaled_dot_product_attention``; SwiGLU ``w2(silu(w1 x) * w3 x)``; untied output head; fp32
cross-entropy on upcast logits), shards every block and the root with ``fully_shard`` (bf16 compute,
fp32 reduction: torchtitan's ``MixedPrecisionPolicy``), and runs two AdamW steps under ``FakeTensorMode``
with a fake process group of ``dp`` ranks. ``torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker``
counts the bytes of every live tensor (sharded / unsharded parameters, gradients, optimizer states,
activations, temporaries, all-gather and reduce-scatter buffers); its peak over the second step is the
measurement. Fake tensors allocate nothing, so a 4-layer model at h=256 takes about a second on a CPU.

The tracker measures live tensors, not the caching allocator's reserve: the comparison uses the planner's
live-tensor total (``FsdpMemory.live``), without the runtime overhead and fragmentation it adds on a GPU.

Example::

    >>> from warpforge.parallel.specs import ModelSpec, PlanConfig
    >>> m = ModelSpec(layers=2, hidden=128, heads=4, kv_heads=2, ffn=344, vocab=512, seq=128,
    ...               activation="swiglu")
    >>> r = measure(m, PlanConfig(dp=2, micro_batch=1, recompute="none", zero=3))  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from warpforge.parallel.specs import ModelSpec, PlanConfig


@dataclass(frozen=True)
class Measured:
    """Peak live bytes per rank as the tracker categorises them."""

    total: float
    by_kind: dict[str, float]


def _build(model: ModelSpec) -> Any:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    hd, nh, nkv = model.head_dim, model.heads, model.n_kv_heads

    def rope_freqs(seq: int) -> torch.Tensor:
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2).float() / hd))
        ang = torch.outer(torch.arange(seq).float(), inv)
        return torch.polar(torch.ones_like(ang), ang)

    def rope(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
        # torchtitan's apply_rotary_emb: fp32 complex view, multiply, back to the input dtype.
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        out = torch.view_as_real(xc * f.view(1, x.shape[1], 1, -1)).flatten(3)
        return out.type_as(x)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            h = model.hidden
            self.attention_norm = nn.RMSNorm(h)
            self.wq = nn.Linear(h, nh * hd, bias=False)
            self.wk = nn.Linear(h, nkv * hd, bias=False)
            self.wv = nn.Linear(h, nkv * hd, bias=False)
            self.wo = nn.Linear(nh * hd, h, bias=False)
            self.ffn_norm = nn.RMSNorm(h)
            self.w1 = nn.Linear(h, model.ffn_dim, bias=False)
            self.w3 = nn.Linear(h, model.ffn_dim, bias=False)
            self.w2 = nn.Linear(model.ffn_dim, h, bias=False)

        def forward(self, x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
            b, s, _ = x.shape
            n = self.attention_norm(x)
            q = rope(self.wq(n).view(b, s, nh, hd), f)
            k = rope(self.wk(n).view(b, s, nkv, hd), f)
            v = self.wv(n).view(b, s, nkv, hd)
            rep = nh // nkv
            k = k.repeat_interleave(rep, dim=2) if rep > 1 else k
            v = v.repeat_interleave(rep, dim=2) if rep > 1 else v
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
            x = x + self.wo(o.transpose(1, 2).reshape(b, s, nh * hd))
            n2 = self.ffn_norm(x)
            return x + self.w2(F.silu(self.w1(n2)) * self.w3(n2))

    class Llama(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok_embeddings = nn.Embedding(model.vocab, model.hidden)
            self.layers = nn.ModuleList(Block() for _ in range(model.layers))
            self.norm = nn.RMSNorm(model.hidden)
            self.output = nn.Linear(model.hidden, model.vocab, bias=False)
            self.register_buffer("freqs", rope_freqs(model.seq), persistent=False)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            x = self.tok_embeddings(tokens)
            for blk in self.layers:
                x = blk(x, self.freqs)
            return self.output(self.norm(x))

    return Llama


def measure(model: ModelSpec, plan: PlanConfig) -> Measured:
    """Peak live bytes per rank of a second training step of ``model`` under ``plan`` (FSDP only: ``dp``
    ranks, ``zero`` 2 or 3; ``recompute`` none or full), as torch's FSDP2 memory tracker counts them."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from torch.utils.checkpoint import checkpoint

    if plan.tp * plan.pp * plan.cp * plan.ep != 1 or plan.zero < 2:
        raise ValueError("the tracker check covers FSDP alone (tp = pp = cp = ep = 1, zero 2 or 3)")
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", rank=0, world_size=plan.dp, store=FakeStore())
    try:
        mesh = init_device_mesh("cpu", (plan.dp,))
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        with FakeTensorMode():
            net = _build(model)()
            if plan.recompute == "full":
                for blk in net.layers:
                    fwd = blk.forward
                    blk.forward = (lambda f: lambda x, fr: checkpoint(f, x, fr, use_reentrant=False))(fwd)
            n = len(net.layers)
            for i, blk in enumerate(net.layers):
                # torchtitan: every block reshards after forward except the last (backward needs it next).
                fully_shard(blk, mesh=mesh, mp_policy=mp, reshard_after_forward=plan.zero == 3 and i < n - 1)
            fully_shard(net, mesh=mesh, mp_policy=mp, reshard_after_forward=plan.zero == 3)
            opt = torch.optim.AdamW(net.parameters(), lr=1e-4, foreach=True)
            tokens = torch.randint(0, model.vocab, (plan.micro_batch, model.seq))

            def step() -> None:
                opt.zero_grad(set_to_none=True)
                logits = net(tokens)
                # torchtitan's cross_entropy_loss upcasts the logits to fp32 first.
                loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens.flatten(0, 1))
                del logits
                loss.backward()
                opt.step()

            step()  # the first step creates AdamW's states; the tracker measures the steady second step
            tracker = FSDPMemTracker(net, opt)
            tracker.track_inputs((tokens,))
            with tracker:
                step()
            snap = tracker.get_tracker_snapshot("peak")
    finally:
        dist.destroy_process_group()
    dev = next(iter(snap.values()))
    by_kind = {str(getattr(k, "value", k)): float(v) for k, v in dev.items() if k != "Total"}
    return Measured(total=float(dev["Total"]), by_kind=by_kind)
