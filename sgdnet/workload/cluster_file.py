"""Cluster files (YAML): what a real cluster measures, in the form sgdnet reads.

``sgdnet calibrate`` writes one; ``Cluster.from_file(path)`` and ``sgdnet predict --cluster FILE``
read it. The file carries more than today's :class:`~sgdnet.workload.Cluster` uses, so that the
network model of flows (max-min sharing over link paths, per-byte CPU cost, incast) can be fed
from the same calibration once it exists::

    sgdnet_cluster: 1                  # schema version
    name: testbed-100mbit
    workers: 4                         # hosts that train (optional; --workers overrides)
    ps_hosts: 1                        # dedicated parameter-server hosts (0: none)
    ps_placement: dedicated            # or colocated
    comm_uses_compute: true            # CPU collectives (gloo): a transfer holds the receiver's CPU
    link:                              # every host's link, each direction, unless overridden
      bandwidth: 100Mbit/s             # bytes/s or a string with a unit (sustained goodput)
      latency: 150us                   # one-way, per message
      burst: 64KB                      # token-bucket depth (0: none)
      incast: {1: 1.0, 2: 0.98, 4: 0.95}   # goodput efficiency vs concurrent flows into a link
      share_cv: {in: 0.23, out: 0.45}  # how unevenly k concurrent TCP flows into / out of one
                                       # host share its link (CV of a message's bytes, see Link)
      ps_efficiency: {2: 0.92, 4: 0.85}  # optional: a PS host's downlink under the PS's traffic
      table: [[1024, 1.6e-4], [1048576, 0.084]]   # optional measured size -> one-way seconds
    hosts:                             # optional per-host overrides: ps0, worker0, worker1, ...
      ps0: {uplink: {bandwidth: 200Mbit/s}, downlink: {bandwidth: 200Mbit/s}}
    cpu:                               # CPU time per byte on the host doing it
      send_s_per_byte: 1.1e-9
      recv_s_per_byte: 1.6e-9
      reduce_s_per_byte: 2.5e-10
    ps:
      update_s_per_byte: 3.0e-10
      update_s_per_tensor: 2.0e-5
    local_step_s: {tb-mlp: 0.0021}     # one local SGD step (forward, backward, optimizer), by model
    notes: ["alpha fitted negative (-3us), clamped to 0"]
    measurements: {...}                # the raw calibration data, free-form
    calibration:                       # optional: each figure's quality (sgdnet calibrate)
      repeats: 3                       #   read back as given, unused by the models
      quality: good                    #   or low (with the problems listed)
      figures: {link.latency: {value: 2.1e-4, ci95: [1.9e-4, 2.3e-4], n: 3, worst_rel_residual: 0.08}}
    topology:                          # optional: nodes of GPUs (sgdnet.workload.Topology)
      gpus_per_node: 8                 # workers (GPUs) must be a multiple
      intra: nvlink                    # or pcie (through the host bridge)
      intra_bandwidth: 150GB/s         # per GPU, each direction
      intra_latency: 2us
      nics_per_node: 4                 # shared by the node's GPUs (GPU l uses NIC l*4//8)
      nic_bandwidth: 100Gbps
      fabric: leaf-spine               # or switch (one non-blocking switch)
      rack_nodes: 4                    # leaf-spine: nodes per rack
      oversubscription: 2.0            # leaf-spine: 2:1 between racks
      pcie_switch_gpus: 2              # optional PCIe tree: GPUs per PCIe switch (DGX-1, p3)
      pcie_uplink_bandwidth: pcie3     # a switch's uplink to the CPU (or a rate, e.g. 12GB/s)
      gpudirect: true                  # false: GPU <-> NIC staged through host memory
      host_cores: 80                   # CPU cores serving the node's input pipelines
      input_s_per_sample: 0.0          # CPU-seconds per sample (0: synthetic data; the
      prefetch: 2                      #   one-node calibration, sgdnet.workload.node)

``measurements.node_calibration`` holds the raw numbers of the one-node calibration of the
input pipeline (:func:`sgdnet.workload.node.write_node_calibration`: the single-GPU job alone
and on every GPU of one node at once).

With a ``topology`` the link ``latency`` and ``incast`` are those of the inter-node network
(NIC to NIC), its ``bandwidth`` is unused (the NICs' rate is ``nic_bandwidth``), and
``hosts`` overrides apply to dedicated PS hosts only.

Every quantity accepts a number in SI units or a string with a unit (:mod:`sgdnet.units`);
:meth:`ClusterFile.to_dict` writes SI floats, so ``load(save(x)) == x``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import units
from ..errors import ClusterError, UnitError
from . import _quantity as _q

__all__ = ["SCHEMA", "Link", "ClusterFile", "load_cluster_file"]

#: Schema version written in the ``sgdnet_cluster`` key.
SCHEMA = 1

_TOP = ("sgdnet_cluster", "name", "workers", "ps_hosts", "ps_placement", "comm_uses_compute",
        "link", "hosts", "cpu", "ps", "local_step_s", "notes", "measurements", "topology",
        "calibration")
_LINK = ("bandwidth", "latency", "burst", "incast", "table", "share_cv", "tcp_pacing",
         "ps_efficiency")
_SHARE = ("in", "out")
_CPU = ("send_s_per_byte", "recv_s_per_byte", "reduce_s_per_byte")
_PS = ("update_s_per_byte", "update_s_per_tensor")


def _where(src: str | None, key: str) -> str:
    return f"{src}: {key}" if src else key


def _keys(d: Any, allowed: tuple[str, ...], where: str) -> dict:
    if not isinstance(d, Mapping):
        raise ClusterError(f"{where}: expected a mapping with keys {list(allowed)}, got "
                           f"{type(d).__name__} {d!r}")
    bad = sorted(str(k) for k in d if k not in allowed)
    if bad:
        raise ClusterError(f"{where}: unknown key(s) {bad}; valid keys are {list(allowed)}")
    return dict(d)


def _num(value: Any, kind: str, where: str, allow_zero: bool = True) -> float:
    try:
        if kind == "rate":
            return units.bandwidth(value, what=where)
        if kind == "bytes":
            return units.nbytes(value, what=where)
        x = _q.seconds(value, what=where)
        if x == 0 and not allow_zero:
            raise UnitError(f"{where} {value!r} must be positive")
        return x
    except UnitError as e:
        raise ClusterError(str(e)) from None


def _flow_table(v: Any, where: str) -> dict[int, float]:
    """A ``{flows: efficiency}`` mapping of a link (``incast``, ``ps_efficiency``) checked and
    sorted by flow count."""
    if not isinstance(v, Mapping) or not v:
        raise ClusterError(f"{where}={v!r}: must be a non-empty mapping "
                           "{flows: efficiency}, e.g. {1: 1.0, 4: 0.9}")
    cur: dict[int, float] = {}
    for k, e in v.items():
        try:
            kk = int(k)
        except (TypeError, ValueError):
            kk = -1
        if kk < 1 or str(kk) != str(k).strip():
            raise ClusterError(f"{where} key {k!r}: must be a number of concurrent flows >= 1")
        if isinstance(e, bool) or not isinstance(e, (int, float)) or not (
                math.isfinite(e) and e > 0):
            raise ClusterError(f"{where}[{kk}]={e!r}: an efficiency must be a finite number > 0 "
                               "(1.0 = full bandwidth)")
        cur[kk] = float(e)
    return dict(sorted(cur.items()))


@dataclass(frozen=True)
class Link:
    """One direction of a host's link to the switch.

    Parameters
    ----------
    bandwidth : float or str
        Sustained goodput, bytes/s (``"100Mbit/s"``), > 0.
    latency : float or str
        One-way per-message latency, seconds (>= 0).
    burst : float or str
        Token-bucket depth, bytes (>= 0): after an idle period this many bytes pass at line rate.
    incast : mapping of int to float, optional
        Goodput efficiency (fraction of ``bandwidth``) when ``k`` flows arrive at once, by ``k``
        (>= 1); missing ``k`` are interpolated by :meth:`efficiency`.
    table : sequence of (bytes, seconds), optional
        A measured size -> one-way time table (sorted by size on construction).
    share_cv : mapping, optional
        ``{"in": cv, "out": cv}``: how unevenly concurrent connections share a host's link,
        ``k`` flows into one host (``in``) or out of one host (``out``). Max-min fairness
        finishes ``k`` equal flows started together at the same instant; TCP over a FIFO
        queue does not (a flow that gets ahead keeps more of the link). The figure is the
        coefficient of variation of a message's bytes that makes max-min reproduce the spread
        of the measured completion times (:func:`sgdnet.testbed.fit.fit_share_cv`); the
        parameter-server nets apply it to pushes into (pulls out of) a PS host that serves
        two or more workers (``Cluster.share_cv_in`` / ``share_cv_out``).
    tcp_pacing : float, optional
        BBR's pace while sharing, as :func:`sgdnet.testbed.tcp_probe.probe_cluster` measures
        it (``Cluster.tcp_pacing``, :func:`sgdnet.variants.tcp_ramp.pacing_cap`); >= 0.
    ps_efficiency : mapping of int to float, optional
        Goodput efficiency of a parameter-server host's downlink under the PS's own traffic,
        by the number of concurrent flows into it, as ``scripts/fit_ps_efficiency.py`` fits it
        to the PS-traffic probe (``Cluster.ps_link_efficiency``; interpolated like ``incast``).
    """

    bandwidth: float | str
    latency: float | str = 0.0
    burst: float | str = 0.0
    incast: Mapping[int, float] | None = None
    table: tuple[tuple[float, float], ...] | None = None
    share_cv: Mapping[str, float] | None = None
    tcp_pacing: float | None = None
    ps_efficiency: Mapping[int, float] | None = None

    def __post_init__(self) -> None:
        s = object.__setattr__
        s(self, "bandwidth", _num(self.bandwidth, "rate", "link.bandwidth"))
        tp = self.tcp_pacing
        if tp is not None:
            if isinstance(tp, bool) or not isinstance(tp, (int, float)) or not (
                    math.isfinite(tp) and tp >= 0):
                raise ClusterError(f"link.tcp_pacing={tp!r}: a pace / fair-share ratio must be "
                                   "a finite number >= 0 (0: no pacing cap)")
            s(self, "tcp_pacing", float(tp))
        if self.share_cv is not None:
            sc = _keys(self.share_cv, _SHARE, "link.share_cv")
            for k, v in sc.items():
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
                        math.isfinite(v) and v >= 0):
                    raise ClusterError(f"link.share_cv.{k}={v!r}: a coefficient of variation "
                                       "must be a finite number >= 0 (0: max-min fair sharing)")
                sc[k] = float(v)
            s(self, "share_cv", {k: sc[k] for k in _SHARE if k in sc})
        s(self, "latency", _num(self.latency, "time", "link.latency"))
        s(self, "burst", _num(self.burst, "bytes", "link.burst"))
        for f in ("incast", "ps_efficiency"):
            if getattr(self, f) is not None:
                s(self, f, _flow_table(getattr(self, f), f"link.{f}"))
        if self.table is not None:
            if not isinstance(self.table, (list, tuple)):
                raise ClusterError(f"link.table={self.table!r:.80}: must be a list of "
                                   "[bytes, seconds] rows")
            rows = []
            for i, row in enumerate(self.table):
                if not isinstance(row, (list, tuple)) or len(row) != 2:
                    raise ClusterError(f"link.table[{i}]={row!r}: each row is [bytes, seconds]")
                rows.append((_num(row[0], "bytes", f"link.table[{i}][0]"),
                             _num(row[1], "time", f"link.table[{i}][1]")))
            if not rows:
                raise ClusterError("link.table is empty; give [[bytes, seconds], ...] or omit it")
            s(self, "table", tuple(sorted(rows)))

    def efficiency(self, flows: int, curve: str = "incast") -> float:
        """Goodput efficiency with ``flows`` concurrent flows into this link by its ``incast``
        curve (or ``curve="ps_efficiency"``: under a PS's traffic); 1.0 without the curve;
        linear interpolation between measured counts, flat beyond them."""
        if isinstance(flows, bool) or not isinstance(flows, int) or flows < 1:
            raise ClusterError(f"flows={flows!r}: must be an integer >= 1")
        if curve not in ("incast", "ps_efficiency"):
            raise ClusterError(f"curve={curve!r}: use 'incast' or 'ps_efficiency'")
        pts = getattr(self, curve)
        if not pts:
            return 1.0
        ks = list(pts)
        if flows <= ks[0]:
            return pts[ks[0]]
        if flows >= ks[-1]:
            return pts[ks[-1]]
        for a, b in zip(ks, ks[1:]):
            if a <= flows <= b:
                w = (flows - a) / (b - a)
                return (1 - w) * pts[a] + w * pts[b]
        raise AssertionError("unreachable")  # pragma: no cover

    def transfer_time(self, nbytes: float) -> float:
        """One-way time of a message after an idle period: ``latency + max(0, S - burst) / B``."""
        b = units.nbytes(nbytes, what="message size")
        return float(self.latency) + max(0.0, b - float(self.burst)) / float(self.bandwidth)

    def to_dict(self) -> dict:
        """SI floats, JSON/YAML-ready (``None`` fields left out)."""
        d: dict[str, Any] = {"bandwidth": self.bandwidth, "latency": self.latency,
                             "burst": self.burst}
        if self.incast is not None:
            d["incast"] = dict(self.incast)
        if self.table is not None:
            d["table"] = [list(r) for r in self.table]
        if self.share_cv is not None:
            d["share_cv"] = dict(self.share_cv)
        if self.tcp_pacing is not None:
            d["tcp_pacing"] = self.tcp_pacing
        if self.ps_efficiency is not None:
            d["ps_efficiency"] = dict(self.ps_efficiency)
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str = "link") -> Link:
        """Inverse of :meth:`to_dict`; ``where`` prefixes error messages."""
        d = _keys(d, _LINK, where)
        if "bandwidth" not in d:
            raise ClusterError(f"{where}: 'bandwidth' is required (e.g. bandwidth: 100Mbit/s)")
        try:
            return cls(**d)
        except ClusterError as e:
            raise ClusterError(f"{where}: {e}") from None


def _host_name_check(h: Any, workers: Any, ps_hosts: Any) -> None:
    """Refuse a ``hosts:`` override naming a host the cluster does not have (a typo such as
    ``wroker0``, or ``worker7`` of a 4-worker file), which would otherwise be silently ignored."""
    import re

    m = re.fullmatch(r"(worker|ps)(\d+)", h) if isinstance(h, str) else None
    if m is None:
        raise ClusterError(f"hosts.{h}: unknown host name {h!r}; hosts are named worker0, "
                           "worker1, ... and ps0, ps1, ...")
    i = int(m.group(2))
    n_ps = max(1, ps_hosts) if isinstance(ps_hosts, int) and not isinstance(ps_hosts, bool) else 1
    if m.group(1) == "ps" and i >= n_ps:
        raise ClusterError(f"hosts.{h}: the file has {n_ps} PS host(s) (ps0..ps{n_ps - 1}); "
                           f"fix the name or set ps_hosts")
    if (m.group(1) == "worker" and isinstance(workers, int) and not isinstance(workers, bool)
            and i >= workers):
        raise ClusterError(f"hosts.{h}: the file has workers={workers} (worker0.."
                           f"worker{workers - 1}); fix the name or the workers count")


@dataclass(frozen=True)
class ClusterFile:
    """The contents of a cluster file (see the module docstring for the format).

    Parameters
    ----------
    link : Link
        Every host's link, both directions, unless ``hosts`` overrides it.
    name : str
        A label.
    workers : int or None
        Number of training hosts, if the file fixes it.
    ps_hosts : int
        Dedicated parameter-server hosts (0: none measured; :meth:`cluster_kwargs` then gives one shard).
    ps_placement : {"dedicated", "colocated"}
    comm_uses_compute : bool
        CPU collectives: a transfer also holds the receiving host's compute.
    hosts : mapping
        Per-host overrides ``{"ps0": {"uplink": Link, "downlink": Link}, "worker1": ...}``.
    cpu : mapping
        ``send_s_per_byte``, ``recv_s_per_byte``, ``reduce_s_per_byte`` (seconds per byte).
    ps : mapping
        ``update_s_per_byte``, ``update_s_per_tensor`` (seconds).
    local_step_s : mapping
        One local SGD step (forward, backward, optimizer), seconds, by model name.
    notes : list of str
        What calibration noticed (a clamped negative alpha, a noisy run, ...).
    measurements : mapping
        Raw calibration data, kept as given.
    calibration : mapping
        The calibration's quality report (figures with 95 % intervals), kept as given.
    topology : Topology or mapping or None
        Nodes of GPUs, interconnect, NICs and fabric (:class:`~sgdnet.workload.Topology`).
    """

    link: Link
    name: str = "cluster"
    workers: int | None = None
    ps_hosts: int = 0
    ps_placement: str = "dedicated"
    comm_uses_compute: bool = False
    hosts: Mapping[str, Mapping[str, Link]] = field(default_factory=dict)
    cpu: Mapping[str, float] = field(default_factory=dict)
    ps: Mapping[str, float] = field(default_factory=dict)
    local_step_s: Mapping[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    measurements: Mapping[str, Any] = field(default_factory=dict)
    topology: Any = None
    #: Each calibrated figure's value, 95 % interval, repeats and worst residual, and the
    #: calibration's verdict (``sgdnet calibrate``; free-form, kept as given, unused by models).
    calibration: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        s = object.__setattr__
        if self.topology is not None:
            from .topology import Topology

            s(self, "topology", Topology.from_dict(self.topology, "topology"))
        if not isinstance(self.link, Link):
            raise ClusterError(f"ClusterFile.link={self.link!r}: must be a Link")
        if not isinstance(self.name, str):
            raise ClusterError(f"name={self.name!r}: must be a string")
        if self.workers is not None and (isinstance(self.workers, bool) or not isinstance(
                self.workers, int) or self.workers < 1):
            raise ClusterError(f"workers={self.workers!r}: must be an integer >= 1 (or omitted)")
        if isinstance(self.ps_hosts, bool) or not isinstance(self.ps_hosts, int) or \
                self.ps_hosts < 0:
            raise ClusterError(f"ps_hosts={self.ps_hosts!r}: must be an integer >= 0")
        if self.ps_placement not in ("dedicated", "colocated"):
            raise ClusterError(f"ps_placement={self.ps_placement!r}: use 'dedicated' or "
                               "'colocated'")
        if not isinstance(self.comm_uses_compute, bool):
            raise ClusterError(f"comm_uses_compute={self.comm_uses_compute!r}: must be true or "
                               "false")
        hosts: dict[str, dict[str, Link]] = {}
        if not isinstance(self.hosts, Mapping):
            raise ClusterError(f"hosts={self.hosts!r:.80}: must map a host name (ps0, worker1, "
                               "...) to its uplink/downlink overrides")
        for h in self.hosts:
            _host_name_check(h, self.workers, self.ps_hosts)
        for h, dirs in dict(self.hosts).items():
            dd = _keys(dirs, ("uplink", "downlink"), f"hosts.{h}")
            hosts[str(h)] = {k: v if isinstance(v, Link) else Link.from_dict(v, f"hosts.{h}.{k}")
                             for k, v in dd.items()}
        s(self, "hosts", hosts)
        s(self, "cpu", {k: _num(v, "time", f"cpu.{k}")
                        for k, v in _keys(self.cpu, _CPU, "cpu").items()})
        s(self, "ps", {k: _num(v, "time", f"ps.{k}")
                       for k, v in _keys(self.ps, _PS, "ps").items()})
        if not isinstance(self.local_step_s, Mapping):
            raise ClusterError(f"local_step_s={self.local_step_s!r}: must map model name -> "
                               "seconds")
        s(self, "local_step_s", {str(k): _num(v, "time", f"local_step_s.{k}")
                                 for k, v in self.local_step_s.items()})
        if isinstance(self.notes, (str, Mapping)) or not isinstance(self.notes, (list, tuple)) \
                or not all(isinstance(n, str) for n in self.notes):
            raise ClusterError(f"notes={self.notes!r}: must be a list of strings")
        s(self, "notes", tuple(self.notes))
        if not isinstance(self.measurements, Mapping):
            raise ClusterError(f"measurements={self.measurements!r}: must be a mapping")
        s(self, "measurements", dict(self.measurements))
        if not isinstance(self.calibration, Mapping):
            raise ClusterError(f"calibration={self.calibration!r:.80}: must be a mapping (the "
                               "block 'sgdnet calibrate' writes), or leave it out")
        s(self, "calibration", dict(self.calibration))

    # ------------------------------------------------------------------ per-host links
    def uplink(self, host: str) -> Link:
        """The send direction of ``host`` (``"worker0"``, ``"ps0"``, ...)."""
        return self.hosts.get(host, {}).get("uplink", self.link)

    def downlink(self, host: str) -> Link:
        """The receive direction of ``host``."""
        return self.hosts.get(host, {}).get("downlink", self.link)

    def cluster_kwargs(self, workers: int | None = None, **overrides: Any) -> dict[str, Any]:
        """The :class:`~sgdnet.workload.Cluster` fields this file gives (``Cluster(**kw)``;
        :meth:`Cluster.from_file <sgdnet.workload.Cluster.from_file>` does that).

        Mapped: link bandwidth (per direction when every worker has the same override), latency,
        the PS hosts' link (``ps_bandwidth``, the slower of its two directions when they
        differ), ``ps_hosts`` -> ``ps_shards`` (at least 1), placement, PS update costs,
        ``comm_uses_compute`` (only for a file without ``cpu`` costs: with them the flows model
        charges the CPU per byte instead), the ``cpu`` per-byte costs (``send_s_per_byte``,
        ``recv_s_per_byte``, ``reduce_s_per_byte``) and the link's incast curve (``incast``:
        the efficiency for 1..the largest measured flow count; ``ps_efficiency`` likewise as
        ``ps_link_efficiency``), the link's ``share_cv``
        (``share_cv_in``, ``share_cv_out``) and ``tcp_pacing``. The token bucket's ``burst``
        only when asked, ``burst="file"`` (every NIC link's, both directions: a message after an
        idle period gets it at once; off by default: on the emulated testbed it makes the PS
        cells of small messages right and the rings and DDP 5-10 % too fast, docs/validation.md).
        Not used by the nets: ``table`` (the measured one-way times it was fitted from).

        Parameters
        ----------
        workers : int, optional
            Number of workers; default the file's ``workers``.
        **overrides
            Any :class:`Cluster` field, applied last (e.g. ``speeds``, ``comm_cv``).
        """
        n = self.workers if workers is None else workers
        if n is None:
            raise ClusterError("the cluster file has no 'workers'; pass workers=N "
                               "(CLI: --workers N)")
        kw: dict[str, Any] = {"workers": n, "bandwidth": self.link.bandwidth,
                              "latency": self.link.latency,
                              "ps_shards": max(1, self.ps_hosts),
                              "ps_placement": self.ps_placement,
                              # with per-byte CPU costs the flows model charges the CPU
                              # itself; the whole-link-time flag is for the fifo/ps models
                              "comm_uses_compute": self.comm_uses_compute and not self.cpu,
                              "update_s_per_byte": self.ps.get("update_s_per_byte", 0.0),
                              "update_s_per_layer": self.ps.get("update_s_per_tensor", 0.0),
                              **{k: self.cpu[k] for k in _CPU if k in self.cpu}}
        for f, name in (("incast", "incast"), ("ps_efficiency", "ps_link_efficiency")):
            curve = getattr(self.link, f)
            if curve:
                kw[name] = tuple(min(1.0, self.link.efficiency(k, f))
                                 for k in range(1, max(curve) + 1))
        for d in (self.link.share_cv or {}):
            kw[f"share_cv_{d}"] = self.link.share_cv[d]
        if self.link.tcp_pacing is not None:
            kw["tcp_pacing"] = self.link.tcp_pacing
        if isinstance(n, int) and not isinstance(n, bool) and n >= 1:
            ups = {self.uplink(f"worker{i}").bandwidth for i in range(n)}
            downs = {self.downlink(f"worker{i}").bandwidth for i in range(n)}
            if len(ups) > 1 or len(downs) > 1:
                raise ClusterError(f"cluster file {self.name!r}: workers have different link "
                                   "bandwidths, which today's Cluster cannot express; make them "
                                   "equal or override bandwidth=...")
            if ups != {self.link.bandwidth}:
                kw["uplink"] = ups.pop()
            if downs != {self.link.bandwidth}:
                kw["downlink"] = downs.pop()
        if self.topology is not None:
            kw["topology"] = self.topology
        ps_bw = min(self.uplink("ps0").bandwidth, self.downlink("ps0").bandwidth)
        if ps_bw != self.link.bandwidth:
            kw["ps_bandwidth"] = ps_bw
        if overrides.get("burst") == "file":
            overrides = {**overrides, "burst": float(self.link.burst or 0.0)}
        kw.update(overrides)
        return kw

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict:
        """Plain types and SI floats (YAML/JSON-ready)."""
        d: dict[str, Any] = {"sgdnet_cluster": SCHEMA, "name": self.name}
        if self.workers is not None:
            d["workers"] = self.workers
        d.update({"ps_hosts": self.ps_hosts, "ps_placement": self.ps_placement,
                  "comm_uses_compute": self.comm_uses_compute, "link": self.link.to_dict()})
        if self.hosts:
            d["hosts"] = {h: {k: v.to_dict() for k, v in dirs.items()}
                          for h, dirs in self.hosts.items()}
        for key in ("cpu", "ps", "local_step_s", "measurements", "calibration"):
            if getattr(self, key):
                d[key] = dict(getattr(self, key))
        if self.notes:
            d["notes"] = list(self.notes)
        if self.topology is not None:
            d["topology"] = self.topology.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Any, source: str | None = None) -> ClusterFile:
        """Inverse of :meth:`to_dict`; ``source`` (a path) prefixes error messages."""
        d = _keys(d, _TOP, source or "cluster file")
        ver = d.pop("sgdnet_cluster", None)
        if ver != SCHEMA:
            raise ClusterError(f"{_where(source, 'sgdnet_cluster')}={ver!r}: not a cluster file "
                               f"of schema {SCHEMA}; the first key must be "
                               f"'sgdnet_cluster: {SCHEMA}'")
        if "link" not in d:
            raise ClusterError(f"{_where(source, 'link')}: required (e.g. link: {{bandwidth: "
                               "100Mbit/s, latency: 100us})")
        try:
            d["link"] = Link.from_dict(d["link"], "link")
            if "notes" in d and d["notes"] is not None:
                if isinstance(d["notes"], str) or not isinstance(d["notes"], list):
                    raise ClusterError(f"notes={d['notes']!r}: must be a list of strings")
                d["notes"] = tuple(d["notes"])
            for k in ("hosts", "cpu", "ps", "local_step_s", "measurements", "calibration"):
                if d.get(k, ...) is None:
                    d[k] = {}
            return cls(**d)
        except ClusterError as e:
            raise ClusterError(f"{source}: {e}" if source else str(e)) from None

    def save(self, path: str | Path) -> Path:
        """Write the file as YAML (SI floats); returns the path."""
        import yaml

        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(_plain(self.to_dict()), sort_keys=False, default_flow_style=None,
                              width=100)
        p.write_text(f"# sgdnet cluster file (schema {SCHEMA}); SI units: bytes, seconds, "
                     "bytes/s\n" + text)
        return p

    def replace(self, **changes: Any) -> ClusterFile:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


def _plain(x: Any) -> Any:
    """numpy scalars and tuples -> plain Python for yaml.safe_dump."""
    if isinstance(x, Mapping):
        return {(k if isinstance(k, (str, int)) else str(k)): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if hasattr(x, "item") and callable(x.item):
        return x.item()
    return x


def load_cluster_file(path: str | Path) -> ClusterFile:
    """Read a cluster file (YAML, or JSON, which is YAML too).

    Raises
    ------
    ClusterError
        Not YAML, not a cluster file, or a bad field (the message names the path and field);
        the file does not exist, is a directory, is not UTF-8 text, is beyond ``max_file_bytes``,
        nests deeper than ``max_depth`` or expands (aliases) beyond ``max_config_nodes``.
    """
    from .._files import load_yaml

    if not isinstance(path, (str, os.PathLike)):
        raise ClusterError(f"cluster file path {path!r:.80} must be a str or a path")
    p = Path(path)
    # one loader for every YAML sgdnet reads (study configs too): a directory, a missing,
    # binary or UTF-16 file, deep nesting and alias bombs are ClusterErrors before any walk
    data = load_yaml(p, "cluster file", ClusterError)
    return ClusterFile.from_dict(data, source=str(p))
