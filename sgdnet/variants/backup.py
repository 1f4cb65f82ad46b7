"""``backup``: synchronous SGD on a parameter server over the first ``n - b`` of ``n`` workers
(backup workers, Chen et al. 2016); late gradients are dropped.

Modelling choices
-----------------
* A *round* is one synchronous step of the server. Every worker that holds the current model
  launches a step: compute (one phase in coarse nets, the per-layer chain in fine nets), then a
  push of its gradient pieces (``cluster.shard_tensor(0, model bytes)``) to the shards. A worker
  *arrives* when all its pieces reached the server.
* When ``n - backups`` workers have arrived the round closes: the server drops every other
  gradient of the round (arrivals at the same instant beyond the first ``n - b``, pushes in
  flight, computations in progress), each shard applies the aggregate once
  (``cluster.update_time`` on its CPU, tagged ``kind="update"`` without ``worker``) and sends the
  new parameters to *every* worker; a worker starts its next step as soon as it has them.
* What a late worker does (nothing is preempted in a Petri net, so this is a choice):

  - ``late="finish"`` (default; what TensorFlow's SyncReplicasOptimizer does, and fine and
    coarse nets): the late worker finishes the computation in progress on its GPU, its
    gradient is discarded before sending, and it starts again from the newest model.
  - ``late="abort"`` (coarse nets only): the late worker abandons its computation at once and
    starts on the new model — the semantics of the order-statistic analysis, under which a
    round lasts the ``(n - b)``-th smallest of ``n`` fresh compute times (mean
    ``(H_n - H_b) * mean`` for exponential times, ``H_m`` the harmonic numbers). The abandoned
    computation cannot be cancelled in the net, so it keeps running as a *ghost* on one of
    ``lanes`` compute lanes of the worker that hold no resource, and its result is thrown
    away; the worker waits only if all its lanes hold ghosts (rare with a few lanes: a ghost
    must outlive several rounds).
* A pushed piece whose shard is colocated with the worker stays on the host. A round closes on
  whole workers' gradients, so with several shards a shard's update waits for all shards'
  pieces (``sync-ps`` updates each shard on its own); with ``backups=0`` and one shard the net
  times exactly like ``sync-ps``'s.
* ``balance="batch"``: per-worker batch proportional to speed (:func:`.compute.batch_sizes`);
  a round then accepts the samples of the first ``n - b`` arrivals (whose batches differ), and
  samples/s weights each accepted gradient by its worker's batch. With equal compute times
  the arrivals are decided by the noise alone, which is the point of backup workers.
* ``step=True`` is on ``w{i}.arrive``, the acceptance of worker ``i``'s gradient: throughput
  counts accepted gradients (``n - b`` per round), not discarded work.
"""

from __future__ import annotations

import math

from ..errors import VariantError
from ..net import Net
from ..workload import Cluster, ModelProfile
from .collectives import PSExchange, ps_cluster
from .compute import apply_straggler, compute_chain, compute_phase, worker_profiles
from .durations import duration
from .fabric import Fabric
from .layers import compute_cv, group_layers
from .options import BALANCE, DISCIPLINE, MAX_LAYERS, Option, check_choice, check_int
from .registry import register

__all__ = ["build_fine", "build_coarse", "OPTIONS"]

OPTIONS = (
    Option("backups", 1, "an int b with 0 <= b < workers: the server waits for the first "
           "workers - b gradients", check_int(0)),
    Option("late", "finish", "'finish' (a late worker finishes its computation, which is "
           "discarded) or 'abort' (it abandons it at once; coarse only)",
           check_choice("finish", "abort")),
    Option("lanes", 4, "an int >= 1: compute lanes per worker for late='abort'",
           check_int(1, limit_name="max_count")),
    Option("shards", None, "None (cluster.ps_shards) or an int >= 1: number of PS shards",
           check_int(1, allow_none=True, limit_name="max_count")),
    Option("placement", None, "None (cluster.ps_placement), 'dedicated' or 'colocated'",
           check_choice(None, "dedicated", "colocated")),
    BALANCE,
    DISCIPLINE,
    MAX_LAYERS,
)


def _build(model: ModelProfile, cluster: Cluster, *, coarse: bool, backups: int, late: str,
           lanes: int, shards, placement, discipline: str, max_layers,
           balance: str = "none") -> Net:
    cl = ps_cluster(cluster, shards, placement)
    n = cl.workers
    if backups >= n:
        raise VariantError(f"variant 'backup': option backups={backups} must be < workers={n} "
                           f"(valid: 0..{n - 1}); the server needs at least one gradient")
    if late == "abort" and not coarse:
        raise VariantError("variant 'backup': option late='abort' needs granularity='coarse' "
                           "(a fine chain cannot run ghost lanes); use late='finish' or coarse")
    L = lanes if late == "abort" else 1
    net = Net(f"backup-{'coarse' if coarse else 'fine'}")
    fab = Fabric(net, cl, discipline)
    ex = PSExchange(fab)
    prof = model if coarse else group_layers(model, max_layers, cl.compute_cv)
    pieces = cl.shard_tensor(0, model.grad_bytes)
    P = len(pieces)
    profs, bs = worker_profiles(prof, cl, balance)

    local = ex.local

    arr = net.place("srv.arrived").name
    closing = net.place("srv.closing").name
    recv = {(i, c): net.place(f"ps{k}.c{c}.from{i}", shard=k).name
            for i in range(n) for c, (k, _b) in enumerate(pieces)}
    sync = {"kind": "sync", "step": False}
    for i in range(n):
        w = {"worker": i}
        model_p = net.place(f"w{i}.model", 1, **w).name
        inflight = net.place(f"w{i}.inflight", **w).name
        stalepush = net.place(f"w{i}.stalepush", **w).name
        pushq = [recv[i, c] if local(i, k) else net.place(f"w{i}.c{c}.grad", **w).name
                 for c, (k, _b) in enumerate(pieces)]
        live = []
        for j in range(L):
            lane = net.place(f"w{i}.lane{j}", 1, **w).name
            go = net.place(f"w{i}.go{j}", **w).name
            g = net.place(f"w{i}.g{j}", **w).name
            lv = net.place(f"w{i}.live{j}", **w).name
            ghost = net.place(f"w{i}.ghost{j}", **w).name
            live.append(lv)
            net.transition(f"w{i}.launch{j}", 0.0, inputs={model_p: 1, lane: 1},
                           outputs={go: 1, lv: 1}, tags={**w, **sync})
            if late == "abort":
                name = f"w{i}.compute{j}"
                net.transition(name, duration(profs[i].compute_s / cl.speed(i),
                                              compute_cv(profs[i], cl.compute_cv)),
                               inputs={go: 1}, outputs={g: 1},
                               tags={**w, "kind": "compute", "lane": j, "step": False})
                apply_straggler(net, cl, i, name, [name])
            elif coarse:
                t = compute_phase(net, fab, profs[i], cl, i, inputs=[go], outputs=[g])
                net.transitions[t].tags["step"] = False
            else:
                ch = compute_chain(net, fab, profs[i], cl, i, fwd_inputs={0: [go]},
                                   bwd_outputs={0: [g]})
                net.transitions[ch.step].tags["step"] = False
            net.transition(f"w{i}.abandon{j}", 0.0, inputs={g: 1, ghost: 1},
                           outputs={lane: 1}, priority=-1, tags={**w, **sync})
            net.transition(f"w{i}.send{j}", 0.0, inputs={g: 1, lv: 1},
                           outputs={lane: 1, inflight: 1, **{p: 1 for p in pushq}},
                           tags={**w, **sync})
        with ex.bulk():
            for c, (k, b) in enumerate(pieces):
                if not local(i, k):
                    ex.push(i, k, b, f"c{c}", chunk=c, inputs=[pushq[c]], outputs=[recv[i, c]])
        got = {recv[i, c]: 1 for c in range(P)}
        net.transition(f"w{i}.drop", 0.0, inputs={**got, stalepush: 1}, priority=-1,
                       tags={**w, **sync})
        net.transition(f"w{i}.arrive", 0.0, inputs={**got, inflight: 1}, outputs={arr: 1},
                       tags={**w, "kind": "sync", "step": True})
        # round close: a worker still live becomes late
        cl_i = net.place(f"w{i}.closing", **w).name
        done_i = net.place(f"w{i}.closed", **w).name
        for j in range(L):
            net.transition(f"w{i}.late{j}", 0.0, inputs={cl_i: 1, live[j]: 1},
                           outputs={f"w{i}.ghost{j}": 1, done_i: 1}, tags={**w, **sync})
        net.transition(f"w{i}.latepush", 0.0, inputs={cl_i: 1, inflight: 1},
                       outputs={stalepush: 1, done_i: 1}, tags={**w, **sync})
        net.transition(f"w{i}.ontime", 0.0, inputs={cl_i: 1},
                       inhibitors={**{lv: 1 for lv in live}, inflight: 1},
                       outputs={done_i: 1}, tags={**w, **sync})
    net.transition("srv.close", 0.0, inputs={arr: n - backups},
                   outputs={closing: 1, **{f"w{i}.closing": 1 for i in range(n)}}, tags=sync)
    net.transition("srv.flush", 0.0, inputs={closing: 1, arr: 1}, outputs={closing: 1},
                   tags=sync)
    upd_in = [net.place(f"ps{k}.c{c}.agg").name for c, (k, _b) in enumerate(pieces)]
    net.transition("srv.aggregate", 0.0,
                   inputs={closing: 1, **{f"w{i}.closed": 1 for i in range(n)}},
                   inhibitors={arr: 1}, outputs={p: 1 for p in upd_in}, tags=sync)
    back = {}
    with ex.bulk() as add:  # the places, updates and pulls added at once
        for c, (k, b) in enumerate(pieces):
            to = {}
            for i in range(n):
                back[i, c] = add.place(f"w{i}.c{c}.param", worker=i).name
                to[i] = (back[i, c] if local(i, k)
                         else add.place(f"ps{k}.c{c}.to{i}", shard=k).name)
            ex.update(f"ps{k}.update.c{c}", k, b, chunk=c, inputs=[upd_in[c]],
                      outputs=list(to.values()))
            for i in range(n):
                if not local(i, k):
                    ex.pull(i, k, b, f"c{c}", chunk=c, inputs=[to[i]], outputs=[back[i, c]])
    for i in range(n):
        w = {"worker": i}
        pulled = net.place(f"w{i}.pulled", **w).name
        model_p = f"w{i}.model"
        net.transition(f"w{i}.got", 0.0, inputs={back[i, c]: 1 for c in range(P)},
                       outputs={pulled: 1}, tags={**w, **sync})
        # keep at most one (the newest) model per worker
        net.transition(f"w{i}.install", 0.0, inputs={pulled: 1}, inhibitors={model_p: 1},
                       outputs={model_p: 1}, tags={**w, **sync})
        net.transition(f"w{i}.replace", 0.0, inputs={pulled: 1, model_p: 1},
                       outputs={model_p: 1}, tags={**w, **sync})
    net.meta["cluster"] = cl
    net.meta["backups"] = backups
    if balance != "none":
        net.meta["batch_sizes"] = bs
    net.meta["ps_plan"] = [[(int(k), float(b)) for k, b in pieces]]
    if math.isfinite(model.grad_bytes):
        net.meta["round_size"] = n - backups
    return net


def build_coarse(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Coarse-grained backup-worker SGD (compute phase, then push / update / pull)."""
    return _build(model, cluster, coarse=True, **opts)


@register("backup", summary="synchronous PS SGD over the first n-b of n workers; late "
          "gradients dropped", options=OPTIONS, coarse=build_coarse, lockstep=False,
          warmup=lambda cluster, o: 10)
def build_fine(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Fine-grained backup-worker SGD (per-layer compute chain)."""
    return _build(model, cluster, coarse=False, **opts)
