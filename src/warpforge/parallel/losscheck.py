"""Ground truth for the loss side of torchtitan's memory: torch's own code run on real CPU tensors.

Two mechanisms of ``memory_fsdp.py`` that the FSDP tracker check (``memcheck.py``, one rank, no TP or PP)
cannot reach, measured here by running the very code torchtitan runs, on one process (gloo, world size 1)
and counting live bytes (torch's ``MemTracker`` for the loss; for the pipeline, whose stage runs
one module many times per step, which ``MemTracker`` refuses, a dispatch-mode counter of live storages):

* ``loss_bytes_per_logit(parallel)``: peak live bytes per (local) logit of the fp32-upcast cross-entropy,
  forward and backward. ``parallel=True`` goes through DTensor's loss parallel
  (``torch.distributed.tensor.parallel.loss_parallel``), whose Python decomposition is what runs with
  TP > 1: a world of one rank runs the same handlers, its collectives are no-ops.
* ``pipeline_bytes_per_logit(m)``: peak live bytes per logit of one micro-batch for a last pipeline stage
  (an LM head returning fp32 logits, as torchtitan's model does) under ``Schedule1F1B`` with ``m``
  micro-batches: the schedule keeps every micro-batch's output and concatenates them at the end.

Fake tensors are not used on purpose: under ``FakeTensorMode`` DTensor's sharding propagation allocates
fake outputs that a tracker counts (36.9 B per logit for the loss-parallel forward against 12.8 measured
on real tensors). The tensors are small (a few MB); each check takes well under a second.

Example::

    >>> round(loss_bytes_per_logit(parallel=False))  # doctest: +SKIP
    13
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

TOKENS, HIDDEN, VOCAB = 256, 64, 2048  # small enough for a CPU, logits dominate every other tensor


def _live_bytes_mode() -> Any:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class LiveBytes(TorchDispatchMode):
        """Peak bytes of the storages created under this mode that are still referenced."""

        def __init__(self) -> None:
            super().__init__()
            self.live = 0
            self.peak = 0
            self._seen: set[int] = set()

        def _free(self, key: int, n: int) -> None:
            if key in self._seen:
                self._seen.discard(key)
                self.live -= n

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if type(t) not in (torch.Tensor, torch.nn.Parameter) or t.is_meta:
                    continue  # DTensor wrappers: their local tensors are counted when created
                st = t.untyped_storage()
                key, n = st.data_ptr(), st.nbytes()
                if n == 0 or key in self._seen:
                    continue  # a view of (or in-place write to) a storage already counted
                self._seen.add(key)
                self.live += n
                self.peak = max(self.peak, self.live)
                weakref.finalize(st, self._free, key, n)
            return out

    return LiveBytes()


@contextmanager
def _one_rank_world() -> Iterator[None]:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        yield
    finally:
        dist.destroy_process_group()


def _peak(run: Callable[[], None]) -> float:
    mode = _live_bytes_mode()
    with mode:
        run()
    return float(mode.peak)


def loss_bytes_per_logit(parallel: bool) -> float:
    """Peak live bytes per logit of ``cross_entropy(logits.float(), labels)`` forward + backward, the
    training loop dropping its reference to the logits before backward (torchtitan's ``del pred``)."""
    import torch
    import torch.nn.functional as F
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.parallel import loss_parallel

    torch.manual_seed(0)
    with _one_rank_world():
        mesh = init_device_mesh("cpu", (1,))
        h = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
        w = torch.randn(HIDDEN, VOCAB, dtype=torch.bfloat16)
        labels = torch.randint(0, VOCAB, (TOKENS,))

        def run() -> None:
            logits: Any = h @ w
            if parallel:
                logits = DTensor.from_local(logits, mesh, [Shard(1)])
            pred = logits.float()
            del logits
            with loss_parallel() if parallel else _nothing():
                loss = F.cross_entropy(pred, labels)
                del pred
                loss.backward()

        # torch's MemTracker, not ``LiveBytes``: a dispatch mode does not see the local tensors that DTensor's
        # loss-parallel handlers create inside their own dispatch (it reads 2.0 B per logit there).
        tracker = MemTracker()
        tracker.track_external(h, w)
        with tracker:
            run()
        peak = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]
        return float(peak) / (TOKENS * VOCAB)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def pipeline_bytes_per_logit(microbatches: int) -> float:
    """Peak live bytes per logit of one micro-batch on a last pipeline stage (LM head, fp32 logits,
    cross-entropy loss) over one ``Schedule1F1B`` step of ``microbatches`` micro-batches."""
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.out = nn.Linear(HIDDEN, VOCAB, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.out(x).float()  # torchtitan's model upcasts its output

    def loss_fn(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(out.flatten(0, 1), target.flatten(0, 1))

    torch.manual_seed(0)
    with _one_rank_world():
        net = Head().to(torch.bfloat16)
        sched = Schedule1F1B(PipelineStage(net, 0, 1, torch.device("cpu")), microbatches, loss_fn=loss_fn)
        x = torch.randn(microbatches, TOKENS, HIDDEN, dtype=torch.bfloat16)
        y = torch.randint(0, VOCAB, (microbatches, TOKENS))
        sched.step(x, target=y)  # the first step builds the stage's buffers; measure the second
        return _peak(lambda: sched.step(x, target=y)) / (TOKENS * VOCAB)
