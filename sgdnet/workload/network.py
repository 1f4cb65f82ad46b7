"""Closed-form communication costs (alpha-beta model).

``S`` bytes, ``n`` ranks, per-rank NIC bandwidth ``B`` (bytes/s, each direction, full duplex),
per-message latency ``alpha`` (seconds). These are the costs of an uncontended network in which
every rank can send and receive at ``B`` at the same time; they check the fine-grained nets and
power the coarse-grained models. Facts behind them (NCCL documentation, nccl-tests, BytePS):

* ring all-reduce moves ``2(n-1)/n * S`` per rank in ``2(n-1)`` steps:
  ``t = 2(n-1) * (alpha + S/(n B))``;
* reduce-scatter and all-gather: ``(n-1) * (alpha + S/(n B))`` each;
* broadcast and reduce (pipelined): ``S/B`` plus latency;
* a non-colocated PS with ``k`` shards: per step and per direction
  ``t >= max(S/B, n S/(k B_ps))``.

Every function accepts plain SI numbers (or strings with units) and returns seconds; one rank
(``n == 1``) costs nothing for collectives.
"""

from __future__ import annotations

import math

from .. import units
from ..errors import ClusterError
from . import _quantity as _q

__all__ = [
    "transfer_time",
    "ring_allreduce_time",
    "tree_allreduce_time",
    "allreduce_time",
    "reduce_scatter_time",
    "allgather_time",
    "broadcast_time",
    "reduce_time",
    "ps_step_lower_bound",
]


def _args(nbytes, bandwidth, latency) -> tuple[float, float, float]:
    return (units.nbytes(nbytes, what="message size"),
            units.bandwidth(bandwidth, what="bandwidth"),
            _q.seconds(latency, what="latency"))


def _ranks(n, what: str = "n (number of ranks)") -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ClusterError(f"{what} must be an integer >= 1, got {n!r}")
    return n


def transfer_time(nbytes: float | str, bandwidth: float | str, latency: float | str = 0.0
                  ) -> float:
    """Point-to-point transfer: ``latency + nbytes / bandwidth`` seconds."""
    s, b, a = _args(nbytes, bandwidth, latency)
    return a + s / b


def ring_allreduce_time(nbytes: float | str, n: int, bandwidth: float | str,
                        latency: float | str = 0.0) -> float:
    """Ring all-reduce (reduce-scatter then all-gather): ``2(n-1) (alpha + S/(n B))``."""
    s, b, a = _args(nbytes, bandwidth, latency)
    n = _ranks(n)
    return 2 * (n - 1) * (a + s / (n * b))


def tree_allreduce_time(nbytes: float | str, n: int, bandwidth: float | str,
                        latency: float | str = 0.0, chunks: int = 1) -> float:
    """Tree all-reduce: reduce up a binary tree, then broadcast down it.

    The tree has depth ``d = ceil(log2 n)``, so the message crosses ``2d`` hops. The message is
    cut into ``chunks`` pieces that are pipelined through the ``2d`` stages, one hop per stage
    and stage time ``alpha + S/(chunks B)``::

        t = (2d + chunks - 1) * (alpha + S / (chunks * B))

    ``chunks=1`` is store-and-forward, ``2d (alpha + S/B)``; many chunks approach
    ``2d alpha + S/B`` latency-plus-bandwidth. A node with two children receives both of them
    at once; like NCCL's double binary tree (each rank is an inner node of at most one of two
    trees, each tree carrying half of the data) this model assumes that costs no more than one
    hop's bandwidth per stage, i.e. it is an optimistic (lower) figure for a single binary tree.
    """
    s, b, a = _args(nbytes, bandwidth, latency)
    n = _ranks(n)
    c = _ranks(chunks, "chunks")
    if n == 1:
        return 0.0
    d = math.ceil(math.log2(n))
    return (2 * d + c - 1) * (a + s / (c * b))


def allreduce_time(nbytes: float | str, n: int, bandwidth: float | str,
                   latency: float | str = 0.0, algorithm: str = "ring") -> float:
    """All-reduce by ``algorithm`` (``"ring"`` or ``"tree"``)."""
    if algorithm == "ring":
        return ring_allreduce_time(nbytes, n, bandwidth, latency)
    if algorithm == "tree":
        return tree_allreduce_time(nbytes, n, bandwidth, latency)
    raise ClusterError(f"unknown all-reduce algorithm {algorithm!r}; use 'ring' or 'tree'")


def reduce_scatter_time(nbytes: float | str, n: int, bandwidth: float | str,
                        latency: float | str = 0.0) -> float:
    """Ring reduce-scatter of an ``S``-byte buffer: ``(n-1) (alpha + S/(n B))``."""
    s, b, a = _args(nbytes, bandwidth, latency)
    n = _ranks(n)
    return (n - 1) * (a + s / (n * b))


def allgather_time(nbytes: float | str, n: int, bandwidth: float | str,
                   latency: float | str = 0.0) -> float:
    """Ring all-gather producing an ``S``-byte buffer: ``(n-1) (alpha + S/(n B))``."""
    return reduce_scatter_time(nbytes, n, bandwidth, latency)


def broadcast_time(nbytes: float | str, n: int, bandwidth: float | str,
                   latency: float | str = 0.0) -> float:
    """Pipelined (chain) broadcast: ``(n-1) alpha + S/B`` (0 for one rank).

    This is the bandwidth-optimal figure NCCL quotes (``S/B``); the first byte needs ``n-1``
    hops to reach the last rank.
    """
    s, b, a = _args(nbytes, bandwidth, latency)
    n = _ranks(n)
    return 0.0 if n == 1 else (n - 1) * a + s / b


def reduce_time(nbytes: float | str, n: int, bandwidth: float | str,
                latency: float | str = 0.0) -> float:
    """Pipelined (chain) reduce, the mirror of :func:`broadcast_time`: ``(n-1) alpha + S/B``."""
    return broadcast_time(nbytes, n, bandwidth, latency)


def ps_step_lower_bound(nbytes: float | str, n: int, shards: int, bandwidth: float | str,
                        ps_bandwidth: float | str | None = None, placement: str = "dedicated",
                        latency: float | str = 0.0) -> float:
    """Lower bound on one direction (push, or pull) of a parameter-server step.

    ``n`` workers each push ``M = nbytes`` of gradients, split evenly over ``k = shards`` PS
    shards (and pull the same amount of parameters back; the pull bound is the same by symmetry,
    so an unoverlapped push+pull step costs at least twice this).

    * ``placement="dedicated"`` (BytePS): a worker's uplink carries ``M``; each server's downlink
      receives ``n M / k``::

          t >= latency + max(M / B, n M / (k B_ps))

    * ``placement="colocated"``: shard ``j`` runs on worker ``j``'s host (``k <= n``) and shares
      its NIC (``ps_bandwidth`` is ignored). The ``M/k`` a host sends to its own shard stays
      local, so a host with a shard sends ``M (k-1)/k`` and receives ``(n-1) M / k``; a host
      without one (only if ``k < n``) sends ``M``::

          t >= latency + max(M (k-1)/k if k == n else M, (n-1) M / k) / B

      With ``k = n`` this is ``(n-1)/n * M/B``, the reduce-scatter bandwidth term.
    """
    m, b, a = _args(nbytes, bandwidth, latency)
    n = _ranks(n, "n (number of workers)")
    k = _ranks(shards, "shards (number of PS shards)")
    if placement == "dedicated":
        bps = b if ps_bandwidth is None else units.bandwidth(ps_bandwidth, what="ps_bandwidth")
        return a + max(m / b, n * m / (k * bps))
    if placement == "colocated":
        if k > n:
            raise ClusterError(f"colocated placement needs shards <= n workers, got shards={k}, "
                               f"n={n}; use placement='dedicated' or fewer shards")
        send = m * (k - 1) / k if k == n else m
        recv = (n - 1) * m / k
        return a + max(send, recv) / b
    raise ClusterError(f"unknown PS placement {placement!r}; use 'dedicated' or 'colocated'")
