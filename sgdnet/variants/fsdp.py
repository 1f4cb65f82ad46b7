"""``fsdp``: PyTorch Fully Sharded Data Parallel (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD,
HYBRID_SHARD), the fine net; the coarse one is :func:`.sharded_coarse.build_coarse_fsdp`.

Wrapped units (option ``wrap``)
    ``"block"`` (default, ``transformer_auto_wrap_policy`` on the transformer block): one unit
    per block, a block being the layers whose names share a ``h.{i}.`` / ``layer.{i}.`` /
    ``layers.{i}.`` / ``blocks.{i}.`` prefix (:mod:`sgdnet.workload.transformers`); every
    other layer (embeddings, final LayerNorm, heads) belongs to the *root* unit. A profile
    without such blocks gets one unit per layer (module-level wrapping). An integer ``k``:
    units of ``k`` consecutive layers, no root. A list of lists of layer names: those units,
    the unlisted layers in the root. The root unit is not resharded after its forward (FSDP1
    ``_post_forward_reshard`` keeps the root's parameters, FSDP2 sets the root's
    ``reshard_after_forward=False``: its parameters are needed again at once in backward).

    A unit's layers run back to back on the GPU between the same two communication events, so
    each maximal run of consecutive layers of one unit is one forward and one backward
    transition (:func:`.layers.merge_groups`, mean and variance kept): the net's compute
    grows with the units, not the layers.

Per unit ``u`` of ``S_u`` wire bytes (:func:`.sharded_coarse.wire_factor` of ``dtype``; its
gradients' reduce-scatters and all-reduces at ``reduce_dtype`` when given,
:func:`.sharded_coarse.reduce_factor`, FSDP's ``MixedPrecision.reduce_dtype``)
    * FULL_SHARD and HYBRID_SHARD (``sharding="full"`` / ``"hybrid"``): an all-gather of its
      parameters before its forward, freed after it, an all-gather again before its backward
      (not for the root), a reduce-scatter of its gradients after its backward;
      HYBRID_SHARD's all-gathers and reduce-scatters run among the GPUs of each node and are
      followed by an all-reduce of the ``S_u / g`` shard among the GPUs of the same local
      rank of every node (:func:`.shard_collectives.rank_groups`);
    * SHARD_GRAD_OP: the forward all-gather and the reduce-scatter; parameters are kept from
      forward to backward;
    * NO_SHARD: an all-reduce of its gradients after its backward (DDP with one bucket per
      unit).

    Then each GPU steps its optimizer on its shard, the profile's ``update_s / G`` (``G`` the
    shard group: every GPU, the node's, or 1; :func:`.sharded_coarse.split_update`), and the
    next step's first all-gather waits for it. Bytes per GPU and step with every unit
    resharded: ``3 (G-1)/G S`` against DDP's ``2 (G-1)/G S`` (the ZeRO paper's 1.5x).

When a collective is issued (the hooks are modelled on the GPU's time line: a hook runs when the
GPU has finished what comes before it; FSDP documents its prefetch options in these terms)
    * forward: ``forward_prefetch=False``: unit ``u``'s all-gather is issued by its pre-forward
      hook, when the forward before it ends; ``True``: by the pre-forward hook of the unit
      before (it overlaps that unit's forward), which with ``limit_all_gathers=True`` is when
      unit ``u-2`` has been freed (two units' all-gathers in flight, FSDP's rate limiter);
      with ``limit_all_gathers=False`` every forward all-gather is issued at the step's start
      (an unthrottled CPU running ahead) and they run back to back. In GPU-bound FSDP1 jobs the
      CPU runs ahead of the GPU, so the all-gathers are issued as with
      ``forward_prefetch=True`` even without it; FSDP recommends the option for CPU-bound
      jobs. Pass ``forward_prefetch=True`` to model a GPU-bound job.
    * backward (``backward_prefetch``): ``"none"``: a unit's all-gather by its pre-backward
      hook, after the reduce-scatter of the unit before (the backward is then fully
      serialised); ``"pre"`` (BACKWARD_PRE, the default): by the pre-backward hook of the
      unit before, so it overlaps that unit's gradient computation and goes before its
      reduce-scatter; ``"post"`` (BACKWARD_POST): by the post-backward hook of the unit
      before, once its gradients are all computed, before its reduce-scatter (the
      reduce-scatter then overlaps the next unit's backward). A prefetch only comes early: a
      unit not yet all-gathered when its backward is due is all-gathered by its own
      pre-backward hook (FSDP1 ``_pre_backward_hook`` unshards a handle no prefetch has;
      ``_post_backward_reshard`` prefetches before ``_reduce_grad``,
      ``torch/distributed/fsdp/_runtime_utils.py``). That is the case after a unit whose
      layers are not adjacent, such as the root (embeddings and final norm): its gradients
      are complete only after the embeddings' backward, at the end of the pass, so the
      block after it in backward order is gathered by its own hook, after the root's final
      norm. (``torch.distributed.fsdp.BackwardPrefetch`` docs.)
    * a reduce-scatter (all-reduce) by the unit's post-backward hook, when its backward ends.

Collective streams
    One communicator runs one collective at a time, in the order the collectives were issued
    (NCCL requires every rank to issue them in the same order and runs a communicator's
    kernels in that order; ProcessGroupNCCL launches a process group's collectives on its
    one NCCL stream per device). So all of a step's all-gathers and reduce-scatters on the
    shard group's communicator go through one sequence of places (collective ``k+1``'s begin
    waits for ``k``'s end; the last gives the first back), the order fixed from the issue
    rules above; they run concurrently with the GPU's compute (a collective holds links, not
    the GPU). HYBRID_SHARD has a communicator per node (its own sequence) and one per local
    rank for the cross-node all-reduces (another sequence each), as its two process groups.
    The net stays a timed event graph.

Closed form (deterministic, homogeneous, one ring of ``n`` alike edges, FULL_SHARD,
``backward_prefetch="none"``, ``forward_prefetch=False``, no root): nothing overlaps, a step
is ``sum_u (F_u + B_u) + sum_u 3 (n-1)(alpha + S_u/(n B)) + update_s / n``
(tests/test_sharded_closed_forms.py). With ``backward_prefetch="post"`` and ``U`` equal
units (``c`` one collective, ``c <= B``): each backward all-gather is exposed, each
reduce-scatter but the last hidden behind the next unit's all-gather and backward,
``U (F + B) + (2U + 1) c + update_s / n`` (same file).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..errors import VariantError
from ..net import Net
from ..workload import Cluster, ModelProfile
from .compute import compute_chain
from .fabric import Fabric
from .layers import merge_groups
from .options import Option, check_bool, check_choice
from .registry import register
from .shard_collectives import node_groups, rank_groups, shard_collective
from .sharded_coarse import (
    SHARDED_OPTIONS,
    build_coarse_fsdp,
    optimizer_step,
    reduce_factor,
    shard_group_size,
    split_update,
    wire_factor,
    wrap_units,
)

__all__ = ["build_fine", "wrap_units", "fsdp_net", "OPTIONS", "SHARDINGS"]

#: ``sharding`` values: FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD.
SHARDINGS = ("full", "shard_grad_op", "no_shard", "hybrid")

def _check_wrap(v):
    """``wrap``: ``"block"``, an integer >= 1 or a list of lists of layer names."""
    if v == "block":
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        if v < 1:
            raise ValueError(f"{v} layers per unit: must be >= 1")
        return v
    if isinstance(v, (list, tuple)) and v and all(
            isinstance(u, (list, tuple)) and u and all(isinstance(x, str) for x in u) for u in v):
        return tuple(tuple(u) for u in v)
    raise ValueError("must be 'block', an integer >= 1 (layers per unit) or a list of "
                     "lists of layer names")


OPTIONS = (
    Option("sharding", "full", "'full' (FULL_SHARD), 'shard_grad_op' (SHARD_GRAD_OP: "
           "parameters kept from forward to backward), 'no_shard' (NO_SHARD: DDP's all-reduce "
           "per unit) or 'hybrid' (HYBRID_SHARD: shard inside a node, all-reduce the shard "
           "across nodes; needs a topology)", check_choice(*SHARDINGS)),
    Option("backward_prefetch", "pre", "'pre' (BACKWARD_PRE, FSDP's default), 'post' "
           "(BACKWARD_POST) or 'none': when the next unit's backward all-gather is issued",
           check_choice("pre", "post", "none")),
    Option("forward_prefetch", False, "True/False: issue the next unit's forward all-gather "
           "before the current unit's forward (FSDP's forward_prefetch; True also models the "
           "CPU running ahead in GPU-bound jobs)", check_bool),
    Option("limit_all_gathers", True, "True/False: FSDP's rate limiter, at most two units' "
           "all-gathers in flight (with forward_prefetch; False issues every forward "
           "all-gather at the step's start)", check_bool),
    Option("wrap", "block", "'block' (one unit per transformer block, the rest in the root "
           "unit; one unit per layer without blocks), an integer k (units of k consecutive "
           "layers) or a list of lists of layer names", _check_wrap),
    *SHARDED_OPTIONS,
)


def _segments(prof: ModelProfile, units: list[list[int]], cv: float
              ) -> tuple[ModelProfile, list[int]]:
    """``prof`` with each maximal run of consecutive layers of one unit merged into one layer,
    and the unit of each merged layer."""
    owner = {la: u for u, lays in enumerate(units) for la in lays}
    segs: list[list[int]] = []
    for la in range(prof.n_layers):
        if segs and owner[segs[-1][-1]] == owner[la]:
            segs[-1].append(la)
        else:
            segs.append([la])
    if len(segs) == prof.n_layers:
        return prof, [owner[s[0]] for s in segs]
    return merge_groups(prof, segs, cv, "one layer per run of a wrapped unit"), [
        owner[s[0]] for s in segs]


def _schedule(S: int, fseg: list[int], lseg: list[int], reshard: list[bool], sharding: str,
              backward_prefetch: str, forward_prefetch: bool, limit_all_gathers: bool
              ) -> list[tuple[str, int, int]]:
    """The step's collectives in issue order: ``(kind, unit, trigger)`` with ``kind`` in
    ``ag_f``, ``ag_b``, ``rs`` and the trigger an event of the GPU's step (0: the step's
    start, ``1 + s``: forward of segment ``s`` done, ``1 + S + (S-1-s)``: backward of ``s``
    done)."""
    def ev_b(s: int) -> int:
        return 1 + S + (S - 1 - s)

    def pre_fwd(u: int) -> int:
        return fseg[u]  # the end of the forward before it (1 + fseg - 1), or the start

    def pre_bwd(u: int) -> int:
        return S if lseg[u] == S - 1 else ev_b(lseg[u] + 1)

    U = len(fseg)
    ops: list[tuple[tuple, str, int, int]] = []
    fwd = sorted(range(U), key=lambda u: fseg[u])
    if sharding != "no_shard":
        for k, u in enumerate(fwd):
            if not forward_prefetch or k == 0:
                t, key = pre_fwd(u), (1, 0)
            elif limit_all_gathers:
                t, key = pre_fwd(fwd[k - 1]), (1, 1)
            else:
                t, key = 0, (1, 1)
            ops.append(((t, *key, k), "ag_f", u, t))
    bwd = sorted(range(U), key=lambda u: -lseg[u])
    for k, u in enumerate(bwd):
        if reshard[u]:
            if k == 0 or backward_prefetch == "none":
                t, key = pre_bwd(u), (1, 0)
            elif backward_prefetch == "pre":
                t, key = pre_bwd(bwd[k - 1]), (1, 1)
            elif ev_b(fseg[bwd[k - 1]]) <= pre_bwd(u):
                # the unit before's post-backward hook (its gradients all computed): before
                # its reduce-scatter, issued at the same event
                t, key = ev_b(fseg[bwd[k - 1]]), (0, 0)
            else:  # that hook comes after u's backward (a unit of non-adjacent layers, the
                # root): u's own pre-backward hook all-gathers it, as without prefetch
                t, key = pre_bwd(u), (1, 0)
            ops.append(((t, *key, k), "ag_b", u, t))
        t = ev_b(fseg[u])
        ops.append(((t, 0, 1, k), "rs", u, t))
    ops.sort(key=lambda o: o[0])
    return [(kind, u, t) for _, kind, u, t in ops]


def fsdp_net(model: ModelProfile, cluster: Cluster, *, sharding: str = "full",
             backward_prefetch: str = "pre", forward_prefetch: bool = False,
             limit_all_gathers: bool = True, wrap="block", dtype: str = "bf16",
             reduce_dtype: str | None = None, algorithm: str = "ring", channels: int = 1,
             ring_form: str = "auto", discipline: str = "flows", name: str | None = None) -> Net:
    """The fine FSDP net of ``model`` (its step costs not folded) on ``cluster``."""
    n = cluster.workers
    net = Net(name or f"fsdp-{sharding}-fine")
    fab = Fabric(net, cluster, discipline)
    prof, upd = split_update(model)
    w = wire_factor(prof, dtype)
    units, root = wrap_units(prof, wrap)
    seg, owner = _segments(prof, units, cluster.compute_cv)
    S, U = seg.n_layers, len(units)
    fseg = [owner.index(u) for u in range(U)]
    lseg = [S - 1 - owner[::-1].index(u) for u in range(U)]
    grads = [math.fsum(prof.layers[la].grad_bytes for la in u) for u in units]
    sizes = [g * w for g in grads]  # the all-gathers' bytes
    rw = reduce_factor(prof, dtype, reduce_dtype)
    rsizes = [g * rw for g in grads]  # the reduce-scatters' (all-reduces') bytes
    G = shard_group_size(cluster, sharding)
    reshard = [sharding in ("full", "hybrid") and u != root for u in range(U)]
    plan = _schedule(S, fseg, lseg, reshard, sharding, backward_prefetch, forward_prefetch,
                     limit_all_gathers)
    hybrid = sharding == "hybrid"
    groups: list[Sequence[int] | None] = node_groups(cluster) if hybrid else [None]
    C = len(plan)
    # per collective and group one place the GPU event that issues it feeds on every member:
    # the begin barrier takes m tokens of one place (one arc), not one of m places
    gid = {i: x for x, mem in enumerate(groups) for i in (mem if mem is not None else range(n))}
    initial = {c for c, (_, _, t) in enumerate(plan) if t == 0}
    size = {x: n if mem is None else len(mem) for x, mem in enumerate(groups)}
    issued = {(c, x): f"c{c}.g{x}.issued" for c in range(C) for x in range(len(groups))}
    net.add_places((issued[c, x], size[x] if c in initial else 0, {})
                   for c in range(C) for x in range(len(groups)))
    trig = {(c, i): issued[c, gid[i]] for c in range(C) for i in range(n)}
    gathers = [c for c, (kind, _, _) in enumerate(plan) if kind != "rs"]
    got = {(c, i): f"w{i}.c{c}.got" for c in gathers for i in range(n)}
    net.add_places((got[c, i], 0, {"worker": i}) for c in gathers for i in range(n))
    last = {i: net.place(f"w{i}.reduced", worker=i).name for i in range(n)}
    ready = None
    if sharding == "no_shard":
        ready = {i: net.place(f"w{i}.ready", 1, worker=i).name for i in range(n)}
    by_event: dict[int, list[int]] = {}
    for c, (_, _, t) in enumerate(plan):
        by_event.setdefault(t, []).append(c)
    ag_f = [(fseg[u], c) for c, (kind, u, _) in enumerate(plan) if kind == "ag_f"]
    ag_b = [(lseg[u], c) for c, (kind, u, _) in enumerate(plan) if kind == "ag_b"]
    f_ev = [(s, by_event[1 + s]) for s in range(S) if 1 + s in by_event]
    b_ev = [(s, by_event[1 + S + (S - 1 - s)]) for s in range(S)
            if 1 + S + (S - 1 - s) in by_event]
    for i in range(n):
        fin = {s: [got[c, i]] for s, c in ag_f}
        if ready is not None:
            fin[0] = [*fin.get(0, []), ready[i]]
        bout = {s: [trig[c, i] for c in cs] for s, cs in b_ev}
        ch = compute_chain(net, fab, seg, cluster, i, fwd_inputs=fin, bwd_outputs=bout)
        for s, cs in f_ev:  # forward events issue collectives too (arcs added in place)
            outs = net.transitions[ch.fwd[s]].outputs
            for c in cs:
                outs[trig[c, i]] = 1
        for s, c in ag_b:
            net.transitions[ch.bwd[s]].inputs[got[c, i]] = 1
    net.touch()
    if hybrid:  # where each node's reduce-scatter leaves the shards, per local rank
        net.add_places((f"rep.l{x}.u{u}.shard", 0, {}) for x in range(G) for u in range(U))
    ops = {"ag_f": "all_gather", "ag_b": "all_gather",
           "rs": "all_reduce" if sharding == "no_shard" else "reduce_scatter"}
    for x, members in enumerate(groups):
        mem = list(range(n)) if members is None else list(members)
        sfx = f".n{x}" if hybrid else ""
        seq = [net.place(f"fs{sfx}.seq{c}", 1 if c == 0 else 0).name for c in range(C)]
        for c, (kind, u, _) in enumerate(plan):
            outs = {i: [got[c, i]] for i in mem} if kind != "rs" else {}
            if kind == "rs" and c == C - 1 and not hybrid:
                outs = {i: [last[i]] for i in mem}
            if kind == "rs" and hybrid:  # each member's shard to its local rank's all-reduce
                outs = {i: [f"rep.l{i % len(mem)}.u{u}.shard"] for i in mem}
            shard_collective(net, fab, cluster, f"fs.{kind}.u{u}{sfx}", ops[kind],
                             rsizes[u] if kind == "rs" else sizes[u],
                             inputs={}, outputs=outs, members=members,
                             before={issued[c, x]: len(mem), seq[c]: 1},
                             after=[seq[(c + 1) % C]],
                             tags={"unit": u}, algorithm=algorithm if members is None else "ring",
                             channels=channels if members is None else 1, ring_form=ring_form)
    if hybrid:  # the shard's all-reduce across the nodes, per local rank, in reduce-scatter order
        rs = [u for kind, u, _ in plan if kind == "rs"]
        for x, members in enumerate(rank_groups(cluster)):
            seq = [net.place(f"rep.l{x}.seq{k}", 1 if k == 0 else 0).name for k in range(len(rs))]
            for k, u in enumerate(rs):
                outs = {i: [last[i]] for i in members} if k == len(rs) - 1 else {}
                shard = f"rep.l{x}.u{u}.shard"
                shard_collective(net, fab, cluster, f"rep.ar.u{u}.l{x}", "all_reduce",
                                 rsizes[u] / G, inputs={}, outputs=outs, members=members,
                                 before={shard: len(members), seq[k]: 1},
                                 after=[seq[(k + 1) % len(rs)]], tags={"unit": u},
                                 ring_form=ring_form)
    for i in range(n):
        outs = [trig[c, i] for c in sorted(initial)] + ([ready[i]] if ready else [])
        optimizer_step(net, fab, cluster, i, upd / G, inputs=[last[i]], outputs=outs)
    net.meta.update(cluster=cluster, units=units, unit_bytes=sizes, reduce_bytes=rsizes,
                    root_unit=root, sharding=sharding, shard_group=G,
                    collectives=[(kind, u) for kind, u, _ in plan])
    return net


@register("fsdp", summary="PyTorch FSDP: per-unit all-gathers and reduce-scatters (FULL_SHARD, "
          "SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD), the optimizer on the shard",
          options=OPTIONS, coarse=build_coarse_fsdp, lockstep=True, own_step_costs=True,
          warmup=lambda cluster, o: 3)
def build_fine(model: ModelProfile, cluster: Cluster, *, sharding: str, backward_prefetch: str,
               forward_prefetch: bool, limit_all_gathers: bool, wrap, dtype: str,
               reduce_dtype: str | None, optimizer: str, algorithm: str, channels: int,
               ring_form: str, discipline: str) -> Net:
    """Fine FSDP net (see the module docstring); ``optimizer`` is recorded, its step time is
    the profile's ``update_s``."""
    if sharding == "hybrid" and algorithm == "hierarchical":
        raise VariantError("sharding='hybrid' already runs its collectives inside the nodes and "
                           "across them; pass algorithm='ring'")
    del optimizer
    return fsdp_net(model, cluster, sharding=sharding, backward_prefetch=backward_prefetch,
                    forward_prefetch=forward_prefetch, limit_all_gathers=limit_all_gathers,
                    wrap=wrap, dtype=dtype, reduce_dtype=reduce_dtype, algorithm=algorithm,
                    channels=channels, ring_form=ring_form, discipline=discipline)
