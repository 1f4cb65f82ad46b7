"""What the sharded data-parallel variants (``zero``, ``fsdp``) share, and their coarse nets.

Shared arithmetic
    * :func:`wire_factor`: the ``dtype`` option (parameters and gradients on the wire) against
      the profile's gradient dtype (``meta["grad_dtype"]``, fp32 when absent, as
      :func:`sgdnet.workload.compute.retime` records it): a tensor of ``b`` profile bytes has
      ``b / GRAD_DTYPES[profile dtype]`` parameters, so ``b * GRAD_DTYPES[dtype] /
      GRAD_DTYPES[profile dtype]`` bytes on the wire, for its gradient and its parameters
      alike.
    * ``reduce_dtype`` (:data:`REDUCE_DTYPE`, :func:`reduce_factor`): the gradients'
      reduce-scatters and all-reduces in another dtype than the parameters' all-gathers, as
      PyTorch FSDP's ``MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)``
      (``torch.distributed.fsdp.MixedPrecision`` docs; torchtitan's default
      ``mixed_precision_reduce = "float32"``; Composer's ``DEFAULT`` FSDP mixed precision:
      bf16 parameters, fp32 reductions) or DeepSpeed's ``communication_data_type``
      (DeepSpeed configuration docs); None: ``dtype``. A tensor of ``P`` parameters then
      moves ``P * GRAD_DTYPES[dtype]`` bytes per all-gather and ``P *
      GRAD_DTYPES[reduce_dtype]`` per reduce-scatter.
    * :func:`split_update`: the profile with its zero_grad and loss folded into the layers (as
      :meth:`ModelProfile.with_step_costs_folded` does) and its optimizer step
      (:attr:`ModelProfile.update_s`) kept apart: a sharded net charges it once per step on
      each GPU's shard, ``update_s / G`` for a shard group of ``G`` GPUs
      (:func:`optimizer_step`).
    * :func:`wrap_units`: FSDP's wrapped units (the ``wrap`` option of :mod:`.fsdp`), for the
      fine and the coarse nets.

Coarse nets (one transition per phase, the closed forms of :mod:`sgdnet.workload.network`)
    Each worker computes its forward and backward as one phase
    (:func:`.compute.compute_phase`), then communicates, then steps its optimizer; no overlap
    of compute and communication (the coarse convention of ``allreduce``). A communication
    phase is one streamed ring over its group (:func:`.shard_collectives.ring_phase`): per
    member one flow of the bytes the phase's collectives move, ``sum_c R_c S_c / m``, to its
    ring successor, then their latency terms, ``sum_c R_c alpha`` (``R_c`` the rounds of
    collective ``c``: ``m-1`` for a reduce-scatter or all-gather, ``2(m-1)`` for an
    all-reduce; :func:`.shard_collectives.ring_rounds`). Alone on its links with equal edges
    that is exactly ``sum_c R_c (alpha + S_c/(m B))``, the sum of the closed forms
    (``reduce_scatter_time``, ``allgather_time``, ``ring_allreduce_time``), which the fine net
    takes when nothing overlaps; on a topology the flows share NICs and spines as the fine
    rings do. The phases:

    * ``zero`` stages 1 and 2: reduce-scatter of the gradients, the optimizer on ``1/N``, an
      all-gather of the parameters (two phases);
    * ``fsdp`` (and ``zero`` stage 3): per wrapped unit ``u`` of ``S_u`` wire bytes, an
      all-gather before its forward and (FULL_SHARD, HYBRID_SHARD, the units resharded after
      forward) another before its backward, and a reduce-scatter after its backward, summed
      over the units in one phase; NO_SHARD: an all-reduce per unit; HYBRID_SHARD: the node
      phase (its GPUs' all-gathers and reduce-scatters) then the cross-node phase (an
      all-reduce of ``S_u / g`` per unit among the GPUs of each local rank);
    * ``algorithm="hierarchical"``: each phase's collectives as a node phase (``S_c`` over
      the node's ``g`` GPUs) and a local-rank phase (``S_c / g`` over the ``N`` nodes) in a
      row, an all-reduce's all-gather in a third (node) phase; nothing overlaps, so the order
      of the phases does not change the step.
    * ``channels`` is a fine-net option: a coarse phase is one ring.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from ..errors import VariantError
from ..net import Net
from ..workload import Cluster, ModelProfile, Tensor
from ..workload.compute import GRAD_DTYPES
from .compute import compute_phase
from .durations import duration
from .fabric import Fabric
from .options import CHANNELS, DISCIPLINE, RING_FORM, Option, check_choice
from .rings import channel_order, multi_gpu_nodes
from .shard_collectives import node_groups, rank_groups, ring_phase, ring_rounds

__all__ = ["DTYPE", "REDUCE_DTYPE", "OPTIMIZER", "SHARD_ALGORITHM", "SHARDED_OPTIONS",
           "wire_factor", "reduce_factor", "split_update",
           "optimizer_step", "shard_group_size", "wrap_units", "coarse_net", "build_coarse_zero",
           "build_coarse_fsdp"]

DTYPE = Option("dtype", "bf16", "'fp32', 'bf16' or 'fp16': parameters and gradients on the "
               "wire (all-gathers; reduce-scatters unless reduce_dtype), scaled from the "
               "profile's gradient dtype (meta.grad_dtype, fp32 when absent)", check_choice("fp32", "bf16", "fp16"))


def _check_reduce_dtype(v):
    """``reduce_dtype``: None or one of ``fp32``, ``bf16``, ``fp16``."""
    if v is None or v in GRAD_DTYPES:
        return v
    raise ValueError(f"must be None (the dtype option's) or one of {list(GRAD_DTYPES)}")


REDUCE_DTYPE = Option("reduce_dtype", None, "None (= dtype) or 'fp32', 'bf16', 'fp16': the "
                      "gradients' reduce-scatters and all-reduces on the wire (FSDP "
                      "MixedPrecision.reduce_dtype, DeepSpeed communication_data_type); dtype "
                      "stays the parameters' all-gathers", _check_reduce_dtype)
OPTIMIZER = Option("optimizer", "adamw", "'sgd', 'momentum', 'adam' or 'adamw': the optimizer "
                   "(its step time is the profile's update_s, sgdnet.workload.optimizer; the "
                   "net charges it on each GPU's shard)",
                   check_choice("sgd", "momentum", "adam", "adamw"))
SHARD_ALGORITHM = Option("algorithm", "ring", "'ring' (one ring over all GPUs, node by node) "
                         "or 'hierarchical' (a ring inside each node, then one across the "
                         "nodes per local rank; needs a topology of several multi-GPU nodes): "
                         "NCCL's reduce-scatter and all-gather are rings",
                         check_choice("ring", "hierarchical"))


#: The options both sharded variants take after their own (``accumulate`` comes from the
#: registry): the wire dtypes, the optimizer, the collectives' algorithm, channels and ring form,
#: the network model.
SHARDED_OPTIONS = (DTYPE, REDUCE_DTYPE, OPTIMIZER, SHARD_ALGORITHM, CHANNELS, RING_FORM,
                   DISCIPLINE)


def wire_factor(profile: ModelProfile, dtype: str) -> float:
    """Wire bytes per profile gradient byte for ``dtype`` (see the module docstring)."""
    old = profile.meta.get("grad_dtype", "fp32")
    if dtype not in GRAD_DTYPES or old not in GRAD_DTYPES:
        bad = dtype if dtype not in GRAD_DTYPES else f"meta.grad_dtype {old!r}"
        raise VariantError(f"dtype {bad!r} is not one of {list(GRAD_DTYPES)}; pass "
                           "dtype='bf16', 'fp16' or 'fp32'")
    return GRAD_DTYPES[dtype] / GRAD_DTYPES[old]


def reduce_factor(profile: ModelProfile, dtype: str, reduce_dtype: str | None) -> float:
    """Wire bytes per profile gradient byte of the gradients' reductions: :func:`wire_factor`
    of ``reduce_dtype``, or of ``dtype`` when it is None."""
    return wire_factor(profile, dtype if reduce_dtype is None else reduce_dtype)


def split_update(profile: ModelProfile) -> tuple[ModelProfile, float]:
    """``(profile with zero_grad and loss folded into its layers, update seconds)``: the
    optimizer step (``optimizer_s`` and every tensor's ``update_s``) taken out to be charged
    on a shard (:func:`optimizer_step`)."""
    upd = profile.update_s
    if not upd:
        return profile.with_step_costs_folded(), 0.0
    lays = [la if la.tensors is None else
            type(la)(la.name, la.forward_s, la.backward_s, la.grad_bytes, la.cv,
                     tuple(Tensor(t.name, t.nbytes) for t in la.tensors), la.ops)
            for la in profile.layers]
    bare = ModelProfile(profile.name, lays, profile.batch_size, profile.device, profile.source,
                        profile.cv, profile.meta, precision=profile.precision,
                        zero_grad_s=profile.zero_grad_s, loss_s=profile.loss_s)
    return bare.with_step_costs_folded(), upd


_BLOCK = re.compile(r"^(.*?\b(?:h|layer|layers|blocks|block)\.\d+)\.")


def wrap_units(prof: ModelProfile, wrap) -> tuple[list[list[int]], int | None]:
    """The wrapped units of ``prof`` under ``wrap`` (the ``wrap`` option, :mod:`.fsdp`): lists of layer
    indices (ascending), ordered by their first layer, and the root unit's index (or None).

    Raises
    ------
    VariantError
        A list naming an unknown layer or a layer twice.
    """
    L = prof.n_layers
    if wrap == "block":
        keys = [(m.group(1) if (m := _BLOCK.match(la.name)) else None) for la in prof.layers]
        if all(k is None for k in keys):
            return [[la] for la in range(L)], None
        lists = list({k: [i for i in range(L) if keys[i] == k] for k in keys if k}.values())
    elif isinstance(wrap, int):
        return [list(range(a, min(a + wrap, L))) for a in range(0, L, wrap)], None
    else:
        index = {la.name: i for i, la in enumerate(prof.layers)}
        seen: set[int] = set()
        lists = []
        for u in wrap:
            bad = [x for x in u if x not in index]
            if bad:
                raise VariantError(f"wrap: unknown layer(s) {bad[:3]} of {prof.name!r}; its "
                                   f"layers are {[la.name for la in prof.layers[:4]]}...")
            got = sorted(index[x] for x in u)
            if seen & set(got) or len(set(got)) != len(got):
                raise VariantError(f"wrap: layer(s) {sorted(seen & set(got)) or got} are in two "
                                   "units; give each layer to one unit")
            seen |= set(got)
            lists.append(got)
    rest = [i for i in range(L) if not any(i in u for u in lists)]
    units = sorted([*lists, *([rest] if rest else [])], key=min)
    root = units.index(rest) if rest else None
    return units, root


def shard_group_size(cluster: Cluster, sharding: str) -> int:
    """GPUs a parameter's shards spread over: every GPU (``"full"``, ``"shard_grad_op"``,
    ZeRO), the node's (``"hybrid"``), one (``"no_shard"``)."""
    if sharding == "no_shard":
        return 1
    if sharding == "hybrid":
        if not multi_gpu_nodes(cluster):
            raise VariantError("sharding='hybrid' shards inside a node and replicates across "
                               "nodes, so it needs nodes of several GPUs: give the Cluster a "
                               "topology (Topology(gpus_per_node=8, ...)) or pass "
                               "sharding='full'")
        return cluster.topology.gpus_per_node
    return cluster.workers


def optimizer_step(net: Net, fab: Fabric, cluster: Cluster, i: int, seconds: float, *,
                   inputs: Sequence[str], outputs: Sequence[str]) -> str:
    """Worker ``i``'s optimizer step on its shard, ``seconds`` at speed 1, on its GPU
    (``kind="update"``, CV ``compute_cv``; straggler models slow the forward and backward
    passes only, as everywhere in sgdnet: the step is memory-bound)."""
    name = f"w{i}.optim"
    net.transition(name, duration(seconds / cluster.speed(i), cluster.compute_cv),
                   inputs={p: 1 for p in inputs}, outputs={p: 1 for p in outputs},
                   resources=[fab.gpu(i)],
                   tags={"worker": i, "kind": "update", "role": "optimizer", "step": False})
    return name


#: A coarse communication phase: the group kind ("all", "nodes", "ranks") and its
#: collectives (op, buffer bytes).
Phase = tuple[str, list[tuple[str, float]]]


def _hier(phases: list[Phase], g: int) -> list[Phase]:
    """Each whole-cluster phase as a node phase then a local-rank phase (and a node phase of
    the all-reduces' all-gathers), the chunks as :mod:`.shard_collectives`'s hierarchical
    rings cut them."""
    out: list[Phase] = []
    for kind, colls in phases:
        if kind != "all":
            out.append((kind, colls))
            continue
        out.append(("nodes", [(op if op != "all_reduce" else "reduce_scatter", s)
                              for op, s in colls]))
        out.append(("ranks", [(op, s / g) for op, s in colls]))
        ag = [("all_gather", s) for op, s in colls if op == "all_reduce"]
        if ag:
            out.append(("nodes", ag))
    return out


def coarse_net(name: str, model: ModelProfile, cluster: Cluster, discipline: str,
               before: list[Phase], after: list[Phase], update_s: float,
               hierarchical: bool = False) -> Net:
    """The coarse sharded net: compute, the ``before`` phases, the optimizer step of
    ``update_s`` (on the shard), the ``after`` phases, next step."""
    n = cluster.workers
    net = Net(name)
    fab = Fabric(net, cluster, discipline)
    if hierarchical:
        if not multi_gpu_nodes(cluster):
            raise VariantError("algorithm='hierarchical' needs a topology of several "
                               "multi-GPU nodes; pass algorithm='ring'")
        g = cluster.topology.gpus_per_node
        before, after = _hier(before, g), _hier(after, g)
    start = {i: net.place(f"w{i}.start", 1, worker=i).name for i in range(n)}
    cur = {i: net.place(f"w{i}.grad", worker=i).name for i in range(n)}
    for i in range(n):
        compute_phase(net, fab, model, cluster, i, inputs=[start[i]], outputs=[cur[i]])
    for k, phase in enumerate([*before, None, *after]):
        if k == len(before) + len(after):
            nxt = start
        else:
            nxt = {i: net.place(f"w{i}.ph{k}", worker=i).name for i in range(n)}
        if phase is None:
            for i in range(n):
                optimizer_step(net, fab, cluster, i, update_s, inputs=[cur[i]],
                               outputs=[nxt[i]])
        else:
            kind, colls = phase
            groups = ([channel_order(cluster, 0)] if kind == "all" else
                      node_groups(cluster) if kind == "nodes" else rank_groups(cluster))
            for x, members in enumerate(groups):
                m = len(members)
                rounds = [ring_rounds(op, m) for op, _ in colls]
                R = sum(r for r, _ in rounds)
                begin_in = {cur[i]: 1 for i in members}  # coarse: O(n) arcs per phase
                end_out = {nxt[i]: 1 for i in members}
                pre = f"ph{k}.{kind}{x}"
                sync = {"kind": "sync", "step": False, "collective": pre}
                if m == 1 or R == 0:
                    net.transition(f"{pre}.begin", 0.0, inputs=begin_in, outputs=end_out,
                                   tags=sync)
                    continue
                moved = math.fsum(r * s / m for (r, _), (_, s) in zip(rounds, colls))
                red = math.fsum(d * s / m for (_, d), (_, s) in zip(rounds, colls))
                ctag = {"collective": pre, "step": False, "op": "+".join(op for op, _ in colls),
                        "phase": kind}
                ring_phase(net, fab, pre, members, moved / R, R,
                           round(R * red / moved) if moved else 0, begin_in, end_out, ctag,
                           sync, "pipelined")
        cur = nxt
    net.meta["cluster"] = cluster
    return net


def build_coarse_zero(model: ModelProfile, cluster: Cluster, *, stage: int, dtype: str,
                      reduce_dtype: str | None = None, algorithm: str = "ring",
                      discipline: str = "flows", **_ignored) -> Net:
    """Coarse ZeRO: stages 1 and 2 are compute, reduce-scatter of the gradients, the optimizer
    on ``1/N``, all-gather of the parameters; stage 3 is :func:`build_coarse_fsdp` with
    ``sharding="full"``."""
    if stage == 3:
        return build_coarse_fsdp(model, cluster, sharding="full", wrap="block", dtype=dtype,
                                 reduce_dtype=reduce_dtype, algorithm=algorithm,
                                 discipline=discipline)
    prof, upd = split_update(model)
    S = prof.grad_bytes * wire_factor(prof, dtype)
    R = prof.grad_bytes * reduce_factor(prof, dtype, reduce_dtype)
    net = coarse_net(f"zero{stage}-coarse", prof, cluster, discipline,
                     [("all", [("reduce_scatter", R)])], [("all", [("all_gather", S)])],
                     upd / cluster.workers, algorithm == "hierarchical")
    return net


def build_coarse_fsdp(model: ModelProfile, cluster: Cluster, *, sharding: str = "full",
                      wrap="block", dtype: str = "bf16", reduce_dtype: str | None = None,
                      algorithm: str = "ring", discipline: str = "flows", **_ignored) -> Net:
    """Coarse FSDP: compute, the step's collectives per wrapped unit (see the module
    docstring), the optimizer on the shard."""
    prof, upd = split_update(model)
    w = wire_factor(prof, dtype)
    rw = reduce_factor(prof, dtype, reduce_dtype)
    units, root = wrap_units(prof, wrap)
    grads = [math.fsum(prof.layers[la].grad_bytes for la in u) for u in units]
    sizes = [g * w for g in grads]
    rsizes = [g * rw for g in grads]
    G = shard_group_size(cluster, sharding)
    if sharding == "no_shard":
        phases: list[Phase] = [("all", [("all_reduce", s) for s in rsizes])]
    else:
        colls = []
        for u, (s, r) in enumerate(zip(sizes, rsizes)):
            gathers = 2 if sharding in ("full", "hybrid") and u != root else 1
            colls += [("all_gather", s)] * gathers + [("reduce_scatter", r)]
        if sharding == "hybrid":
            g = cluster.topology.gpus_per_node
            phases = [("nodes", colls), ("ranks", [("all_reduce", r / g) for r in rsizes])]
        else:
            phases = [("all", colls)]
    hier = algorithm == "hierarchical" and sharding != "hybrid"
    net = coarse_net(f"fsdp-{sharding}-coarse", prof, cluster, discipline, phases, [],
                     upd / G, hier)
    net.meta["units"] = units
    net.meta["unit_bytes"] = sizes
    net.meta["reduce_bytes"] = rsizes
    return net
