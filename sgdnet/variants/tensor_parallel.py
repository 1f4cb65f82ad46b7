"""Tensor parallelism (Megatron-LM): a transformer's compute split ``tp`` ways, and the
collectives of a group of ranks as flows.

Compute split (:func:`split_profile`)
    Megatron-LM (Shoeybi et al. 2019, §3, Fig. 3) splits the first MLP GEMM by columns and the
    second by rows, the QKV projection by columns (attention heads) and the output projection
    by rows, the token embedding and the output layer along the vocabulary, and the
    cross-entropy along the vocabulary; LayerNorm, dropout and the residual adds are replicated
    on every TP rank, unless ``sequence_parallel`` (Korthikanti et al. 2022, §4.2.2) splits
    them along the sequence. Per op of a layer (:mod:`sgdnet.workload.ops`): a split op keeps
    ``1/tp`` of its FLOPs, activation elements and parameters; the layer's forward and backward
    times are multiplied by the roofline ratio of its split ops to its own ops on the profile's
    device (:func:`sgdnet.workload.compute.ops_time`), so a measured per-layer detail is kept.
    A profile without ops (or on a device that is not built in) has every layer's time divided
    by ``tp`` instead, which the returned note says.

Communication
    Per transformer block and micro-batch two all-reduces in forward (after the attention and
    after the MLP, the ``g`` operator) and two in backward (the ``f`` operator), each of
    ``b s h`` activations (Shoeybi et al. 2019, §3; Narayanan et al. 2021, §3.2: "4 all-reduce
    operations ... per layer per microbatch", so a ring moves ``8 b s h (t-1)/t`` elements per
    device and layer); the vocabulary-parallel embedding adds one in forward, the column-parallel
    output layer one in backward (:func:`tp_allreduces`). With sequence parallelism each
    all-reduce is a reduce-scatter plus an all-gather of the same total bytes.

    :func:`group_collective` runs a ring collective over any group of ranks as flows on the
    cluster's links (a streamed ring: one flow per ring edge of ``rounds * S / m`` bytes, then
    the ring's latency term, as :func:`.rings._ring_pipe` with ``barrier=True``), ``count``
    such collectives back to back as one (their bytes and latencies add up: the block's
    all-reduces sit between its GEMMs, nothing else runs on the TP group meanwhile).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..dists import Deterministic
from ..errors import UnknownNameError, VariantError
from ..net import Net
from ..workload.compute import ops_time
from ..workload.ops import Op
from ..workload.parallelism import _vocab_layer, block_of_layer, split_layer_bytes
from ..workload.profile import Layer, ModelProfile
from .fabric import Fabric

__all__ = ["REPLICATED_OPS", "split_profile", "split_layer_bytes", "tp_allreduces",
           "tp_allreduce_bytes", "group_collective", "COLLECTIVE_KINDS"]

#: Ops every TP rank runs whole (split along the sequence with sequence parallelism).
REPLICATED_OPS = frozenset({"layernorm", "dropout_residual", "residual_add", "dropout",
                            "embedding_sum", "cat_cls", "add_pos_embed", "tanh", "im2col",
                            "gather_masked"})
#: Ring collectives of :func:`group_collective`: (rounds factor, reducing fraction).
COLLECTIVE_KINDS = {"allreduce": (2, 0.5), "reduce_scatter": (1, 1.0), "all_gather": (1, 0.0)}


def _split_op(la: Layer, op: Op) -> bool:
    """Whether TP splits ``op`` of layer ``la`` (see the module docstring)."""
    if op.name in REPLICATED_OPS:
        return False
    if op.name == "gather":  # embeddings: the token embedding is vocabulary-parallel
        return _vocab_layer(la)
    return True


def split_profile(profile: ModelProfile, tp: int, sequence_parallel: bool = False
                  ) -> tuple[ModelProfile, str]:
    """The profile of one TP rank (module docstring) and a note on how it was re-timed."""
    if tp == 1:
        return profile, "no tensor parallelism"
    dev = None
    if profile.has_ops and profile.precision is not None:
        from ..workload.compute import get_device

        try:
            dev = get_device(profile.device)
        except UnknownNameError:
            dev = None
    lays = []
    if dev is None:
        note = (f"tensor parallelism {tp}: profile {profile.name!r} has no ops on a built-in "
                f"device, so every layer's time is divided by tp={tp}")
        for la in profile.layers:
            lays.append(Layer(la.name, la.forward_s / tp, la.backward_s / tp, la.grad_bytes,
                              la.cv, la.tensors, la.ops))
        return profile._copy(layers=lays, loss_s=profile.loss_s / tp), note
    b, p = profile.batch_size, profile.precision
    for la in profile.layers:
        new = tuple(Op(o.name, o.kind, o.flops / tp, o.elems / tp, o.param_elems / tp)
                    if (sequence_parallel or _split_op(la, o)) else o for o in la.ops)
        of, ob = ops_time(la.ops, dev, p, b)
        nf, nb = ops_time(new, dev, p, b)
        lays.append(Layer(la.name, la.forward_s * (nf / of if of > 0 else 1.0),
                          la.backward_s * (nb / ob if ob > 0 else 1.0), la.grad_bytes, la.cv,
                          la.tensors, new))
    note = (f"tensor parallelism {tp}{' with sequence parallelism' if sequence_parallel else ''}"
            f": split ops re-timed by the roofline on {dev.name}")
    # Megatron's vocabulary-parallel cross-entropy: the loss is split too
    return profile._copy(layers=lays, loss_s=profile.loss_s / tp), note


def tp_allreduces(profile: ModelProfile, lo: int, hi: int) -> tuple[int, int]:
    """TP all-reduces of layers ``lo..hi-1`` per micro-batch, ``(forward, backward)``: two and
    two per transformer block, one more in forward for the vocabulary-parallel embedding, one
    more in backward for the column-parallel output layer (the last layer, when it holds the
    tied ``lm_head`` op)."""
    blocks = block_of_layer(profile)
    nb = len({b for b in blocks[lo:hi] if b is not None})
    f, b = 2 * nb, 2 * nb
    for i in range(lo, hi):
        la = profile.layers[i]
        if _vocab_layer(la):
            f += 1
        if la.ops and any(o.name == "lm_head" for o in la.ops):
            b += 1
    return f, b


def tp_allreduce_bytes(micro_batch: int, seq: int, hidden: int, dtype_bytes: int) -> float:
    """Bytes of one TP all-reduce: the ``b s h`` activations (Shoeybi et al. 2019)."""
    return float(micro_batch) * seq * hidden * dtype_bytes


_LAT: dict[tuple, float] = {}  # a ring's mean edge latency, by latencies and members


def group_collective(net: Net, fabric: Fabric, prefix: str, members: Sequence[int],
                     nbytes: float, *, ready: str, done: str | Mapping[str, int],
                     kind: str = "allreduce", count: int = 1, ready_weight: int = 1,
                     senders: Sequence[int] | None = None, scale: float = 1.0,
                     tags: Mapping[str, Any] | None = None, lane: int = 0) -> None:
    """``count`` ring collectives of ``nbytes`` over ``members`` (in ring order), back to
    back, as one streamed ring: ``{prefix}.go`` takes ``ready_weight`` tokens of ``ready``,
    each sender's flow ``{prefix}.w{i}`` carries ``count * rounds * nbytes / m`` bytes (times
    ``scale``: the ranks it stands for on shared links) to its ring successor, and
    ``{prefix}.join`` (a delay of ``count * rounds`` mean edge latencies after the last flow)
    produces ``done`` (a place, one token, or ``{place: weight}``). ``senders`` (default all members): the members
    whose flows are built (a representative rank stands for symmetric ones).

    Alone on its links, deterministic, homogeneous: ``count * rounds (alpha + nbytes / (m B))``
    with ``rounds = 2(m-1)`` (all-reduce) or ``m-1`` (reduce-scatter, all-gather).
    """
    if kind not in COLLECTIVE_KINDS:
        raise VariantError(f"collective kind={kind!r}: use one of {list(COLLECTIVE_KINDS)}")
    m = len(members)
    outs = {done: 1} if isinstance(done, str) else dict(done)
    tg = {"kind": "comm", "step": False, "collective": prefix, **(tags or {})}
    sync = {**tg, "kind": "sync"}
    if m == 1 or nbytes == 0 or count == 0:
        net.transition(f"{prefix}.go", 0.0, inputs={ready: ready_weight},
                       outputs=outs, tags=sync)
        return
    factor, red = COLLECTIVE_KINDS[kind]
    rounds = factor * (m - 1)
    succ = {i: members[(x + 1) % m] for x, i in enumerate(members)}
    send = list(members if senders is None else senders)
    topo = fabric.topo  # what Fabric.latency reads
    key = (float(fabric.cluster.latency), None if topo is None else
           (float(topo.intra_latency), topo.gpus_per_node), tuple(members))
    edge = _LAT.get(key)
    if edge is None:
        if len(_LAT) > 4096:
            _LAT.clear()
        edge = _LAT[key] = math.fsum(fabric.latency(("worker", i), ("worker", succ[i]))
                                     for i in members) / m
    lat = count * rounds * edge
    go = net.place(f"{prefix}:go").name
    end = net.place(f"{prefix}:end").name
    net.transition(f"{prefix}.go", 0.0, inputs={ready: ready_weight}, outputs={go: len(send)},
                   tags=sync)
    for i in send:
        fabric.transfer(f"{prefix}.w{i}", count * rounds * nbytes / m * scale, ("worker", i),
                        ("worker", succ[i]), inputs=[go], outputs=[end],
                        tags={**tg, "worker": i, "rounds": count * rounds}, reduce=red,
                        lane=lane, latency=0.0, messages=count * rounds)
    net.transition(f"{prefix}.join", Deterministic(lat) if lat > 0 else 0.0,
                   inputs={end: len(send)}, outputs=outs, servers=math.inf,
                   tags=sync)
