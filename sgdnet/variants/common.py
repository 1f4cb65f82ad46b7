"""Building blocks shared by the variant builders.

Durations
    :func:`duration` turns a mean and a coefficient of variation into a distribution:
    ``Deterministic(mean)`` when ``cv == 0`` (or the mean is 0), else ``Gamma(mean, cv)``.
    Compute operations use the layer's own CV from the profile, else the model's, else
    ``cluster.compute_cv``; transfers use ``cluster.comm_cv``; server updates
    ``cluster.compute_cv``; latencies are deterministic.

Compute
    :func:`compute_chain` lays out one worker's fine-grained step: forward of layer ``0..L-1``
    then backward of ``L-1..0``, each a transition holding the worker's GPU resource, each
    waiting for the previous one (a token in ``w{i}.start`` starts the step; backward of layer 0
    puts it back and is the worker's ``step=True`` transition). Worker ``i``'s durations are the
    profile times divided by ``cluster.speed(i)``. :func:`compute_phase` is the coarse
    equivalent: one ``w{i}.compute`` transition of the total forward + backward time.

Transfers (the NIC model)
    :meth:`Fabric.transfer` moves ``b`` bytes from host ``src`` to host ``dst`` in **two
    stages**:

    1. a *link* stage that holds the sender's uplink and the receiver's downlink together for
       ``b / min(up_bw(src), down_bw(dst))`` seconds (cut-through: no store-and-forward at the
       switch, so one transition holds both NIC directions it crosses);
    2. a *latency* stage, a pure delay of ``cluster.latency`` seconds with infinite servers and
       no resources (omitted when the latency is 0).

    Latency therefore does not occupy link capacity: back-to-back messages on a link overlap
    their propagation delays, as pipelined TCP segments do. A chain of ``k`` dependent
    transfers of ``b`` bytes costs ``k (latency + b / B)`` — e.g. ring all-reduce's
    ``2(n-1)(alpha + M/(n B))``. Link discipline is ``"fifo"`` (first come, first served by
    the time the transfer became ready) or ``"ps"`` (processor sharing: concurrent transfers
    on a NIC progress at ``1/n`` each, like fair-shared TCP flows; a transfer holding two
    shared NICs progresses at the slower rate). With ``priority=True`` the NICs use the
    ``priority`` discipline and transfers carry a priority (the layer index for PS variants:
    lower layers first, as P3 / ByteScheduler do).

Stragglers
    If ``cluster.straggler`` is not ``None``, :func:`apply_straggler` calls
    ``cluster.straggler.modulator(net, worker, step_start_transition_name)``; a returned
    modulator name is set on every compute transition of that worker (``None``: no modulator).

Layer grouping
    :func:`group_layers` merges consecutive layers into at most ``max_layers`` groups (sums of
    times and bytes, and a CV that keeps the variance of the group's compute time), to trade
    fidelity for speed on deep models. Groups are contiguous and balanced by layer count.

Names
    Worker ``i``'s resources are ``w{i}.gpu``, ``w{i}.up``, ``w{i}.down`` (host
    ``"worker{i}"``); a dedicated PS shard ``k`` has ``ps{k}.up``, ``ps{k}.down`` (host
    ``"ps{k}"``); every shard has ``ps{k}.cpu`` (kind ``"ps_cpu"``, on the worker's host when
    colocated, where the shard also shares worker ``k``'s NICs).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import units
from ..dists import Deterministic, Distribution, Gamma
from ..errors import ClusterError, VariantError
from ..net import Net
from ..workload import Cluster, Layer, ModelProfile
from . import Option

__all__ = [
    "Host",
    "duration",
    "resolve_model",
    "resolve_cluster",
    "check_choice",
    "check_bool",
    "check_int",
    "check_bytes",
    "MAX_LAYERS",
    "DISCIPLINE",
    "group_layers",
    "compute_cv",
    "Fabric",
    "Chain",
    "compute_chain",
    "compute_phase",
    "apply_straggler",
    "without_resources",
    "PS_OPTIONS",
    "ps_cluster",
    "build_ps_net",
]

#: A host: ``("worker", i)`` or ``("ps", k)`` (a dedicated parameter-server host).
Host = tuple[str, int]


# --------------------------------------------------------------------------- durations
def duration(mean: float, cv: float = 0.0) -> Distribution:
    """``Deterministic(mean)`` if ``cv == 0`` or ``mean == 0``, else ``Gamma(mean, cv)``.

    Parameters
    ----------
    mean : float
        Mean duration, seconds (>= 0).
    cv : float
        Coefficient of variation (>= 0).
    """
    mean = float(mean)
    if not (math.isfinite(mean) and mean >= 0):
        raise VariantError(f"duration mean {mean!r} must be a finite number of seconds >= 0")
    if cv is None or cv == 0 or mean == 0:
        return Deterministic(mean)
    return Gamma(mean, float(cv))


# --------------------------------------------------------------------------- inputs
def resolve_model(model: str | os.PathLike | ModelProfile) -> ModelProfile:
    """A :class:`ModelProfile` from a built-in name, a JSON path, or a profile.

    Raises
    ------
    UnknownNameError
        Unknown built-in name (the message lists them).
    VariantError
        ``model`` is neither a name/path nor a profile.
    """
    if isinstance(model, ModelProfile):
        return model
    if isinstance(model, (str, os.PathLike)):
        from .. import models

        return models.load(model)
    raise VariantError(
        f"model={model!r} ({type(model).__name__}) is not a model; give a built-in model name "
        "(sgdnet.models.names()), a profile JSON path, or a sgdnet.ModelProfile"
    )


def resolve_cluster(cluster: Cluster | Mapping[str, Any]) -> Cluster:
    """A :class:`Cluster` from a Cluster or a dict of its fields.

    Raises
    ------
    ClusterError
        Not a Cluster or dict, or a bad field.
    """
    if isinstance(cluster, Cluster):
        return cluster
    if isinstance(cluster, Mapping):
        return Cluster.from_dict(dict(cluster))
    raise ClusterError(
        f"cluster={cluster!r} ({type(cluster).__name__}) is not a cluster; give a sgdnet.Cluster "
        "or a dict of its fields, e.g. {'workers': 4, 'bandwidth': '10Gbps'}"
    )


# --------------------------------------------------------------------------- option checks
def check_choice(*values: Any):
    """Option check accepting exactly ``values``."""

    def check(v):
        if v not in values:
            raise ValueError(f"must be one of {list(values)}")
        return v

    return check


def check_bool(v: Any) -> bool:
    """Option check: a bool."""
    if not isinstance(v, (bool, np.bool_)):
        raise ValueError("must be True or False")
    return bool(v)


def check_int(lo: int = 0, allow_none: bool = False):
    """Option check: an integer ``>= lo`` (or ``None`` if allowed)."""

    def check(v):
        if v is None and allow_none:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"must be an integer >= {lo}" + (" or None" if allow_none else ""))
        return int(v)

    return check


def check_bytes(allow_none: bool = False, positive: bool = False, allow_inf: bool = False):
    """Option check: a byte size (``"25MB"`` or a number), optionally ``None`` / ``inf``."""

    def check(v):
        if v is None and allow_none:
            return None
        if allow_inf and isinstance(v, (float, int)) and not isinstance(v, bool) and v == math.inf:
            return math.inf
        b = units.nbytes(v, what="size")
        if positive and not b > 0:
            raise ValueError("must be > 0 bytes")
        return b

    return check


MAX_LAYERS = Option(
    "max_layers", None,
    "None (every layer) or an int >= 1: merge consecutive layers into at most that many groups",
    check_int(1, allow_none=True),
)
DISCIPLINE = Option(
    "discipline", "fifo",
    "'fifo' (first come, first served per NIC) or 'ps' (fair sharing of each NIC by its flows)",
    check_choice("fifo", "ps"),
)


# --------------------------------------------------------------------------- layers
def _layer_var(model: ModelProfile, i: int, default_cv: float) -> float:
    la = model.layers[i]
    c = model.layer_cv(i, default_cv)
    return c * c * (la.forward_s**2 + la.backward_s**2)


def compute_cv(model: ModelProfile, default_cv: float) -> float:
    """CV of a whole step's compute time, forward and backward of every layer drawn
    independently with their effective CVs (``default_cv`` where the profile has none)."""
    tot = model.compute_s
    if tot <= 0:
        return 0.0
    var = math.fsum(_layer_var(model, i, default_cv) for i in range(model.n_layers))
    return math.sqrt(var) / tot


def group_layers(model: ModelProfile, max_layers: int | None, default_cv: float = 0.0
                 ) -> ModelProfile:
    """Merge consecutive layers into at most ``max_layers`` groups.

    Groups are contiguous and balanced by layer count (``numpy.array_split``). A group's
    forward/backward times and gradient bytes are sums; its CV is chosen so that its forward
    plus backward variance equals the sum of its layers' (effective CVs, ``default_cv`` where the
    profile has none). ``None`` or ``max_layers >= n_layers`` returns ``model`` itself.
    """
    if max_layers is None or max_layers >= model.n_layers:
        return model
    groups = np.array_split(np.arange(model.n_layers), max_layers)
    lays = []
    for g in groups:
        idx = [int(x) for x in g]
        f = math.fsum(model.layers[i].forward_s for i in idx)
        b = math.fsum(model.layers[i].backward_s for i in idx)
        m = math.fsum(model.layers[i].grad_bytes for i in idx)
        var = math.fsum(_layer_var(model, i, default_cv) for i in idx)
        den = f * f + b * b
        cv = math.sqrt(var / den) if den > 0 else 0.0
        name = model.layers[idx[0]].name if len(idx) == 1 else (
            f"{model.layers[idx[0]].name}..{model.layers[idx[-1]].name}")
        lays.append(Layer(name, f, b, m, cv))
    return ModelProfile(model.name, lays, model.batch_size, model.device,
                        model.source + f"; grouped into {len(lays)} layer groups", model.cv,
                        model.meta)


# --------------------------------------------------------------------------- fabric
class Fabric:
    """The resources of a cluster inside one net, created on first use, and transfers.

    Parameters
    ----------
    net : Net
        The net being built.
    cluster : Cluster
        Speeds, bandwidths, latency, PS placement, CVs.
    discipline : {"fifo", "ps"}
        NIC discipline.
    priority : bool
        Use the ``priority`` discipline on NICs (transfers then pass a ``priority``).
    """

    def __init__(self, net: Net, cluster: Cluster, discipline: str = "fifo",
                 priority: bool = False):
        if discipline not in ("fifo", "ps"):
            raise VariantError(f"discipline={discipline!r}: use 'fifo' or 'ps'")
        if priority and discipline == "ps":
            raise VariantError(
                "priority=True needs discipline='fifo' (a processor-shared NIC serves all flows at "
                "once, so there is nothing to prioritise); use one or the other"
            )
        self.net = net
        self.cluster = cluster
        self.nic_discipline = "priority" if priority else discipline
        self._res: dict[str, str] = {}

    # resources
    def _resource(self, name: str, discipline: str, **tags) -> str:
        if name not in self._res:
            self.net.resource(name, 1, discipline, **tags)
            self._res[name] = name
        return name

    def gpu(self, i: int) -> str:
        """Worker ``i``'s GPU resource."""
        return self._resource(f"w{i}.gpu", "fifo", host=f"worker{i}", kind="gpu", worker=i)

    def ps_host(self, k: int) -> Host:
        """Host of PS shard ``k``: ``("worker", k)`` if colocated, else ``("ps", k)``."""
        h = self.cluster.ps_host(k)
        return ("ps", k) if h is None else ("worker", h)

    def ps_cpu(self, k: int) -> str:
        """PS shard ``k``'s CPU (update) resource."""
        kind, h = self.ps_host(k)
        host = f"worker{h}" if kind == "worker" else f"ps{k}"
        return self._resource(f"ps{k}.cpu", "fifo", host=host, kind="ps_cpu", shard=k)

    def host_compute(self, host: Host) -> str:
        """The compute resource of ``host``: a worker's GPU, or a dedicated PS host's CPU."""
        kind, i = host
        return self.gpu(i) if kind == "worker" else self.ps_cpu(i)

    def link_resources(self, src: Host, dst: Host) -> list[str]:
        """What moving data from ``src`` to ``dst`` holds: ``up(src)``, ``down(dst)`` and, with
        ``cluster.comm_uses_compute``, the receiver's compute (:meth:`host_compute`), which
        copies and reduces the data. The sender's compute stays free, so a ring's simultaneous
        send and receive do not serialise. ``src == dst`` names one host's whole share of a
        collective (both of its NIC directions)."""
        res = [self.up(src), self.down(dst)]
        if self.cluster.comm_uses_compute:
            res.append(self.host_compute(dst))
        return res

    def up(self, host: Host) -> str:
        """Uplink (send direction) resource of ``host``."""
        kind, i = host
        if kind == "worker":
            return self._resource(f"w{i}.up", self.nic_discipline, host=f"worker{i}",
                                  kind="nic_up", worker=i)
        return self._resource(f"ps{i}.up", self.nic_discipline, host=f"ps{i}", kind="nic_up",
                              shard=i)

    def down(self, host: Host) -> str:
        """Downlink (receive direction) resource of ``host``."""
        kind, i = host
        if kind == "worker":
            return self._resource(f"w{i}.down", self.nic_discipline, host=f"worker{i}",
                                  kind="nic_down", worker=i)
        return self._resource(f"ps{i}.down", self.nic_discipline, host=f"ps{i}",
                              kind="nic_down", shard=i)

    def up_bw(self, host: Host) -> float:
        """Send bandwidth of ``host``, bytes/s."""
        kind, i = host
        return self.cluster.up_bw(i) if kind == "worker" else self.cluster.ps_up_bw(i)

    def down_bw(self, host: Host) -> float:
        """Receive bandwidth of ``host``, bytes/s."""
        kind, i = host
        return self.cluster.down_bw(i) if kind == "worker" else self.cluster.ps_down_bw(i)

    # transfers
    def transfer(
        self,
        name: str,
        nbytes: float,
        src: Host,
        dst: Host,
        *,
        inputs: Iterable[str],
        outputs: Iterable[str],
        link_outputs: Iterable[str] = (),
        tags: Mapping[str, Any] | None = None,
        priority: int = 0,
    ) -> list[str]:
        """Add a transfer of ``nbytes`` from ``src`` to ``dst``; returns its transition names.

        The link stage (named ``name``) consumes ``inputs``, holds ``up(src)`` and
        ``down(dst)`` for ``nbytes / min(up_bw(src), down_bw(dst))`` seconds (CV
        ``cluster.comm_cv``) and produces ``link_outputs`` when the link is released; the
        latency stage (``name + ".lat"``, omitted when latency is 0) then produces ``outputs``
        (the data has arrived). The link stage holds :meth:`link_resources`.
        """
        if src == dst:
            raise VariantError(f"transfer {name!r}: source and destination are the same host {src}")
        net, c = self.net, self.cluster
        bw = min(self.up_bw(src), self.down_bw(dst))
        tg = {"kind": "comm", "step": False, **(tags or {})}
        res = self.link_resources(src, dst)
        link_outputs, outputs = list(link_outputs), list(outputs)
        if c.latency > 0:
            wire = net.place(f"{name}.wire")
            net.transition(name, duration(nbytes / bw, c.comm_cv), inputs={p: 1 for p in inputs},
                           outputs={p: 1 for p in [*link_outputs, wire.name]}, resources=res,
                           priority=priority, tags={**tg, "stage": "link", "bytes": nbytes})
            net.transition(f"{name}.lat", Deterministic(c.latency), inputs={wire: 1},
                           outputs={p: 1 for p in outputs}, servers=math.inf,
                           tags={**tg, "stage": "latency"})
            return [name, f"{name}.lat"]
        net.transition(name, duration(nbytes / bw, c.comm_cv), inputs={p: 1 for p in inputs},
                       outputs={p: 1 for p in [*link_outputs, *outputs]}, resources=res,
                       priority=priority, tags={**tg, "stage": "link", "bytes": nbytes})
        return [name]


# --------------------------------------------------------------------------- compute
@dataclass
class Chain:
    """One worker's compute transitions: ``start`` place, ``fwd[l]`` / ``bwd[l]`` names."""

    worker: int
    start: str
    fwd: list[str] = field(default_factory=list)
    bwd: list[str] = field(default_factory=list)

    @property
    def step(self) -> str:
        """The worker's ``step=True`` transition (backward of layer 0)."""
        return self.bwd[0]

    @property
    def all(self) -> list[str]:
        """Every compute transition of the chain."""
        return [*self.fwd, *self.bwd[::-1]]


def compute_chain(
    net: Net,
    fabric: Fabric,
    model: ModelProfile,
    cluster: Cluster,
    worker: int,
    *,
    fwd_inputs: Mapping[int, Sequence[str]] | None = None,
    bwd_outputs: Mapping[int, Sequence[str]] | None = None,
) -> Chain:
    """Forward ``0..L-1`` then backward ``L-1..0`` of ``worker`` on its GPU.

    Parameters
    ----------
    fwd_inputs : dict layer -> place names
        Extra inputs of each forward (the layer's parameters; credits for layer 0).
    bwd_outputs : dict layer -> place names
        Extra outputs of each backward (the layer's gradients).

    Returns
    -------
    Chain
        ``start`` holds one token initially; backward of layer 0 refills it and is tagged
        ``step=True``. The straggler hook is applied (see :func:`apply_straggler`).
    """
    i = worker
    fwd_inputs = fwd_inputs or {}
    bwd_outputs = bwd_outputs or {}
    sp = cluster.speed(i)
    gpu = fabric.gpu(i)
    L = model.n_layers
    start = net.place(f"w{i}.start", 1, worker=i).name
    ch = Chain(i, start, [None] * L, [None] * L)  # type: ignore[list-item]
    prev = start
    for l in range(L):
        la = model.layers[l]
        out = net.place(f"w{i}.f{l}.done", worker=i).name
        ins = {prev: 1, **{p: 1 for p in fwd_inputs.get(l, ())}}
        t = net.transition(
            f"w{i}.fwd{l}", duration(la.forward_s / sp, model.layer_cv(l, cluster.compute_cv)),
            inputs=ins, outputs={out: 1}, resources=[gpu],
            tags={"worker": i, "kind": "compute", "layer": l, "phase": "fwd", "step": False})
        ch.fwd[l] = t.name
        prev = out
    for l in range(L - 1, -1, -1):
        la = model.layers[l]
        nxt = start if l == 0 else net.place(f"w{i}.b{l}.done", worker=i).name
        outs = {nxt: 1, **{p: 1 for p in bwd_outputs.get(l, ())}}
        t = net.transition(
            f"w{i}.bwd{l}", duration(la.backward_s / sp, model.layer_cv(l, cluster.compute_cv)),
            inputs={prev: 1}, outputs=outs, resources=[gpu],
            tags={"worker": i, "kind": "compute", "layer": l, "phase": "bwd", "step": l == 0})
        ch.bwd[l] = t.name
        prev = nxt
    apply_straggler(net, cluster, i, ch.fwd[0], ch.all)
    return ch


def compute_phase(
    net: Net,
    fabric: Fabric,
    model: ModelProfile,
    cluster: Cluster,
    worker: int,
    *,
    inputs: Sequence[str],
    outputs: Sequence[str],
) -> str:
    """Coarse compute phase ``w{i}.compute``: the whole forward + backward on the GPU.

    Its mean is ``model.compute_s / speed(i)`` and its CV :func:`compute_cv` (the CV of the
    fine-grained sum of independent layer times), so coarse and fine nets of the same profile
    have the same compute mean and variance. Tagged ``step=True``.
    """
    i = worker
    sp = cluster.speed(i)
    t = net.transition(
        f"w{i}.compute", duration(model.compute_s / sp, compute_cv(model, cluster.compute_cv)),
        inputs={p: 1 for p in inputs}, outputs={p: 1 for p in outputs},
        resources=[fabric.gpu(i)], tags={"worker": i, "kind": "compute", "step": True})
    apply_straggler(net, cluster, i, t.name, [t.name])
    return t.name


def apply_straggler(net: Net, cluster: Cluster, worker: int, start: str,
                    compute: Iterable[str]) -> str | None:
    """Call the straggler protocol for ``worker`` and set the modulator it returns.

    ``cluster.straggler.modulator(net, worker, start)`` may add a modulator to ``net`` (e.g.
    resampled when ``start``, the worker's step-start transition, fires) and returns its name,
    or ``None`` for no modulator; the name is set on every transition in ``compute``.

    Raises
    ------
    VariantError
        The straggler returned a name that is not a modulator of ``net``.
    """
    st = cluster.straggler
    if st is None:
        return None
    fn = getattr(st, "modulator", None)
    if not callable(fn):
        raise VariantError(
            f"cluster.straggler={st!r} has no modulator(net, worker, start) method; use a "
            "straggler model from sgdnet.workload.stragglers or None"
        )
    name = fn(net, worker, start)
    if name is None:
        return None
    if name not in net.modulators:
        raise VariantError(
            f"cluster.straggler.modulator returned {name!r} for worker {worker}, which is not a "
            f"modulator of the net (known: {sorted(net.modulators)})"
        )
    for t in compute:
        net.transitions[t].modulator = name
    return name


def without_resources(net: Net) -> Net:
    """A copy of ``net`` with every resource removed.

    Only meaningful where the net's own dependencies already serialise each resource's users
    (e.g. ring all-reduce nets: a worker's compute chain, and its sends, are totally ordered by
    places), so timing is unchanged and the copy is a timed event graph that
    :func:`sgdnet.analysis.cycle_time` can solve exactly.
    """
    out = net.copy(name=net.name + ":no-resources")
    for t in out.transitions.values():
        t.resources = ()
    out.resources = {}
    return out


# --------------------------------------------------------------------------- parameter server
PS_OPTIONS: tuple[Option, ...] = (
    Option("shards", None, "None (cluster.ps_shards) or an int >= 1: number of PS shards",
           check_int(1, allow_none=True)),
    Option("placement", None,
           "None (cluster.ps_placement), 'dedicated' (own hosts and NICs) or 'colocated' "
           "(shard k shares worker k's host and NIC)",
           check_choice(None, "dedicated", "colocated")),
    DISCIPLINE,
    Option("priority", False,
           "True/False: P3/ByteScheduler priority scheduling of pushes and pulls by layer (layer 0 "
           "first) on the NICs; needs discipline='fifo'", check_bool),
    Option("partition_bytes", None,
           "None or a size > 0 (e.g. '4MB'): split tensor pieces larger than this into equal "
           "chunks of at most this size, each sent and applied separately",
           check_bytes(allow_none=True, positive=True)),
    Option("shard_policy", "round_robin",
           "'round_robin' (small tensor l on shard l % k) or 'least_loaded' (greedy by bytes)",
           check_choice("round_robin", "least_loaded")),
    MAX_LAYERS,
)


def ps_cluster(cluster: Cluster, shards: int | None, placement: str | None) -> Cluster:
    """``cluster`` with the ``shards`` / ``placement`` options applied (``None`` keeps it)."""
    ch = {}
    if shards is not None and shards != cluster.ps_shards:
        ch["ps_shards"] = shards
    if placement is not None and placement != cluster.ps_placement:
        ch["ps_placement"] = placement
    return cluster.replace(**ch) if ch else cluster


def _chunks(pieces: list[tuple[int, float]], partition: float | None) -> list[tuple[int, float]]:
    if partition is None:
        return list(pieces)
    out = []
    for k, b in pieces:
        m = max(1, math.ceil(b / partition))
        out.extend([(k, b / m)] * m)
    return out


def build_ps_net(
    name: str,
    model: ModelProfile,
    cluster: Cluster,
    *,
    synchronous: bool,
    coarse: bool,
    shards: int | None = None,
    placement: str | None = None,
    discipline: str = "fifo",
    priority: bool = False,
    partition_bytes: float | None = None,
    shard_policy: str = "round_robin",
    max_layers: int | None = None,
    staleness: int | None = None,
    staleness_impl: str = "gate",
) -> Net:
    """The parameter-server net shared by ``sync-ps``, ``async-ps`` and ``ssp``.

    Each layer's gradient is cut into pieces by ``cluster.shard_plan`` (then into chunks of at
    most ``partition_bytes``); worker ``i`` pushes each piece to its shard as soon as the
    layer's backward ends (wait-free backprop), the shard applies it on its CPU
    (``cluster.update_time(piece bytes)``) and sends the new parameters back; the worker's next
    forward of that layer waits for all of the layer's pieces.

    * ``synchronous=True`` (BSP): the shard's update of a piece waits for every worker's copy,
      runs once, and returns the result to every worker.
    * ``synchronous=False`` (ASP): the shard applies each worker's copy on arrival and returns
      it to that worker only.
    * ``staleness=s`` (SSP, with ``synchronous=False``): worker ``i`` may start step ``c + 1``
      only when every worker has completed at least ``c - s`` steps — a ``lag`` gate over the
      workers' step transitions (``staleness_impl="gate"``), or per-pair credit places
      ``ssp.credit.w{i}.w{j}`` holding ``s + 1`` tokens, taken by ``i``'s step start and given
      back by ``j``'s step completion (``staleness_impl="places"``).
    * ``coarse=True``: the whole model is one tensor (pieces ``cluster.shard_tensor(0, M)``,
      no partitioning) and the compute is one phase, so push, update and pull follow the compute
      with no overlap.

    A push from worker ``k`` to a shard colocated on its own host, and the pull back, stay on
    the host (no transfer).
    """
    cl = ps_cluster(cluster, shards, placement)
    n = cl.workers
    net = Net(name)
    fab = Fabric(net, cl, discipline, priority)
    if coarse:
        prof = model
        plan = [cl.shard_tensor(0, model.grad_bytes)]
    else:
        prof = group_layers(model, max_layers, cl.compute_cv)
        plan = [_chunks(p, partition_bytes)
                for p in cl.shard_plan([la.grad_bytes for la in prof.layers], shard_policy)]
    L = len(plan)

    def local(i: int, k: int) -> bool:
        return fab.ps_host(k) == ("worker", i)

    # places: parameters (1 token: step 0 may start), gradients, server-side mailboxes
    param = {(i, l, c): net.place(f"w{i}.l{l}.c{c}.param", 1, worker=i, layer=l).name
             for i in range(n) for l in range(L) for c in range(len(plan[l]))}
    recv, back = {}, {}
    for l in range(L):
        for c, (k, _b) in enumerate(plan[l]):
            for i in range(n):
                recv[i, l, c] = net.place(f"ps{k}.l{l}.c{c}.from{i}", layer=l, shard=k).name
                back[i, l, c] = (param[i, l, c] if local(i, k)
                                 else net.place(f"ps{k}.l{l}.c{c}.to{i}", layer=l, shard=k).name)
    grad = {}
    for i in range(n):
        for l in range(L):
            for c, (k, _b) in enumerate(plan[l]):
                grad[i, l, c] = (recv[i, l, c] if local(i, k)
                                 else net.place(f"w{i}.l{l}.c{c}.grad", worker=i, layer=l).name)
    credit: dict[tuple[int, int], str] = {}
    if staleness is not None and staleness_impl == "places":
        for i in range(n):
            for j in range(n):
                if i != j:
                    credit[i, j] = net.place(f"ssp.credit.w{i}.w{j}", staleness + 1,
                                             worker=i).name

    # compute
    starts, steps = [], []
    for i in range(n):
        cin = [credit[i, j] for j in range(n) if j != i] if credit else []
        cout = [credit[j, i] for j in range(n) if j != i] if credit else []
        if coarse:
            ins = [param[i, 0, c] for c in range(len(plan[0]))] + cin
            outs = [grad[i, 0, c] for c in range(len(plan[0]))] + cout
            t = compute_phase(net, fab, prof, cl, i, inputs=ins, outputs=outs)
            starts.append(t)
            steps.append(t)
        else:
            fin = {l: [param[i, l, c] for c in range(len(plan[l]))] for l in range(L)}
            fin[0] = fin[0] + cin
            bout = {l: [grad[i, l, c] for c in range(len(plan[l]))] for l in range(L)}
            bout[0] = bout[0] + cout
            ch = compute_chain(net, fab, prof, cl, i, fwd_inputs=fin, bwd_outputs=bout)
            starts.append(ch.fwd[0])
            steps.append(ch.step)
    if staleness is not None and staleness_impl == "gate":
        net.gate("ssp", "lag", steps, s=staleness)
        for i, t in enumerate(starts):
            net.transitions[t].gate = ("ssp", i)

    # pushes, in the order gradients become ready (last layer first)
    ltag = (lambda l: {}) if coarse else (lambda l: {"layer": l})
    for l in range(L - 1, -1, -1):
        for c, (k, b) in enumerate(plan[l]):
            for i in range(n):
                if local(i, k):
                    continue
                fab.transfer(f"w{i}.push.l{l}.c{c}", b, ("worker", i), fab.ps_host(k),
                             inputs=[grad[i, l, c]], outputs=[recv[i, l, c]], priority=l,
                             tags={"worker": i, **ltag(l), "direction": "push", "shard": k,
                                   "chunk": c})
    # updates
    for l in range(L - 1, -1, -1):
        for c, (k, b) in enumerate(plan[l]):
            d = duration(cl.update_time(b), cl.compute_cv)
            cpu = fab.ps_cpu(k)
            if synchronous:
                net.transition(f"ps{k}.update.l{l}.c{c}", d,
                               inputs={recv[i, l, c]: 1 for i in range(n)},
                               outputs={back[i, l, c]: 1 for i in range(n)}, resources=[cpu],
                               tags={"kind": "update", **ltag(l), "shard": k, "chunk": c,
                                     "step": False})
            else:
                for i in range(n):
                    net.transition(f"ps{k}.update.w{i}.l{l}.c{c}", d,
                                   inputs={recv[i, l, c]: 1}, outputs={back[i, l, c]: 1},
                                   resources=[cpu],
                                   tags={"kind": "update", "worker": i, **ltag(l), "shard": k,
                                         "chunk": c, "step": False})
    # pulls
    for l in range(L - 1, -1, -1):
        for c, (k, b) in enumerate(plan[l]):
            for i in range(n):
                if local(i, k):
                    continue
                fab.transfer(f"w{i}.pull.l{l}.c{c}", b, fab.ps_host(k), ("worker", i),
                             inputs=[back[i, l, c]], outputs=[param[i, l, c]], priority=l,
                             tags={"worker": i, **ltag(l), "direction": "pull", "shard": k,
                                   "chunk": c})
    net.meta["ps_plan"] = [[(int(k), float(b)) for k, b in p] for p in plan]
    net.meta["cluster"] = cl
    return net
