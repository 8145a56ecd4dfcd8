"""Alpha-beta collective costs on a two-tier network (NVLink inside a node, InfiniBand across nodes).

Rank order follows Megatron-LM: TP innermost, then CP, then DP (EP is carved out of consecutive DP
ranks), PP outermost. A group whose members are ``stride`` ranks apart therefore has
``min(size, gpus_per_node // stride)`` members per node. Collectives spanning nodes are hierarchical
(reduce-scatter inside the node, all-reduce across nodes on 1/g of the data with every GPU driving its
own NIC, all-gather inside the node): that is what NCCL's rings over a DGX's 8 NICs achieve.

Example::

    >>> from warpforge.parallel.comm import Network, Group
    >>> net = Network(intra_bw=225e9, inter_bw=21e9, intra_lat=10e-6, inter_lat=20e-6)
    >>> round(net.all_reduce(1e9, Group(size=8, per_node=8)) * 1e3, 2)  # 1 GB inside a node, ms
    7.8
"""

from __future__ import annotations

from dataclasses import dataclass

from warpforge.parallel.calibration import Calibration
from warpforge.parallel.specs import ClusterSpec


@dataclass(frozen=True)
class Group:
    """A communicator: ``size`` ranks, ``per_node`` of them on each node it spans."""

    size: int
    per_node: int

    @property
    def nodes(self) -> int:
        return max(1, -(-self.size // self.per_node))

    @staticmethod
    def of(size: int, stride: int, gpus_per_node: int) -> Group:
        """The group of ``size`` ranks spaced ``stride`` apart in rank order."""
        if size <= 1:
            return Group(1, 1)
        per_node = 1 if stride >= gpus_per_node else max(1, min(size, gpus_per_node // stride))
        return Group(size, per_node)


@dataclass(frozen=True)
class Network:
    """Effective (calibrated) bandwidths in bytes/s and per-collective latencies in seconds."""

    intra_bw: float
    inter_bw: float
    intra_lat: float
    inter_lat: float

    @staticmethod
    def of(cluster: ClusterSpec, calib: Calibration) -> Network:
        return Network(
            intra_bw=cluster.intra_gbps * 1e9 * calib.intra_bw_eff,
            inter_bw=cluster.inter_gbps * 1e9 * calib.inter_bw_eff,
            intra_lat=cluster.intra_latency_us * 1e-6,
            inter_lat=cluster.inter_latency_us * 1e-6,
        )

    def _half(self, nbytes: float, g: Group) -> float:
        """Reduce-scatter or all-gather of ``nbytes`` (the full, unsharded size): half an all-reduce."""
        if g.size <= 1 or nbytes <= 0:
            return 0.0
        if g.nodes == 1:
            return self.intra_lat + (g.size - 1) / g.size * nbytes / self.intra_bw
        k, p = g.nodes, g.per_node
        intra = self.intra_lat + (p - 1) / p * nbytes / self.intra_bw if p > 1 else 0.0
        # Across nodes each of the p GPUs moves its 1/p share through its own NIC.
        inter = self.inter_lat + (k - 1) / k * (nbytes / p) / self.inter_bw
        return intra + inter

    def all_reduce(self, nbytes: float, g: Group) -> float:
        """Ring/hierarchical all-reduce: a reduce-scatter then an all-gather."""
        return 2.0 * self._half(nbytes, g)

    def reduce_scatter(self, nbytes: float, g: Group) -> float:
        return self._half(nbytes, g)

    def all_gather(self, nbytes: float, g: Group) -> float:
        return self._half(nbytes, g)

    def all_to_all(self, nbytes_per_rank: float, g: Group) -> float:
        """Each rank sends ``nbytes_per_rank`` spread evenly over the group: NVLink and the NIC work in
        parallel, so the slower of the on-node and off-node shares sets the time."""
        if g.size <= 1 or nbytes_per_rank <= 0:
            return 0.0
        on_node = (g.per_node - 1) / g.size * nbytes_per_rank / self.intra_bw
        off_node = (g.size - g.per_node) / g.size * nbytes_per_rank / self.inter_bw
        lat = self.inter_lat if g.nodes > 1 else self.intra_lat
        return lat + max(on_node, off_node)

    def dispatch_dedup(self, token_bytes: float, tokens: float, top_k: int, g: Group) -> float:
        """DeepEP-style MoE dispatch (or combine) of ``tokens`` tokens of ``token_bytes`` each, routed to
        ``top_k`` experts spread evenly over the group: one copy per distinct remote node crosses
        InfiniBand (k experts over n nodes hit ``(n-1)(1-(1-1/n)^k)`` remote nodes on average), every
        copy crosses NVLink; both tiers work in parallel."""
        if g.size <= 1 or tokens <= 0:
            return 0.0
        n = g.nodes
        on_node = tokens * top_k * token_bytes * (g.per_node - 1) / g.size / self.intra_bw
        if n == 1:
            return self.intra_lat + on_node
        remote = (n - 1) * (1.0 - (1.0 - 1.0 / n) ** top_k)
        off_node = tokens * remote * token_bytes / self.inter_bw
        return self.inter_lat + max(on_node, off_node)

    def p2p(self, nbytes: float, inter_node: bool) -> float:
        """One point-to-point transfer (pipeline send/recv or a ring-attention step)."""
        if nbytes <= 0:
            return 0.0
        if inter_node:
            return self.inter_lat + nbytes / self.inter_bw
        return self.intra_lat + nbytes / self.intra_bw
