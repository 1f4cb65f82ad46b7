"""The instance catalog: GPU instances people rent, as cluster files with a price.

``sgdnet/catalog/*.yaml`` holds one file per instance type (AWS p4d/p4de/p5 and g5, GCP
a2/a3/a3-mega, Azure ND A100 v4 and ND H100 v5). Each is a cluster file
(:mod:`sgdnet.workload.cluster_file`: its ``link`` and ``topology``, nominal vendor rates) with
three more top-level keys that a plain cluster file may also carry:

``price_per_hour``
    US dollars per instance-hour, on-demand (absent where no price was found in the material
    read: predictions then report the cost as unknown).
``instance``
    ``provider``, ``device`` (a GPU of :data:`sgdnet.workload.compute.DEVICES`), ``transport``
    (a name of :data:`sgdnet.workload.transports.TRANSPORTS`; EFA is not modelled separately and
    is given as ``rdma``), ``network`` (text) and ``price`` (currency, region, kind, date read,
    URL).
``sources``
    The source of every figure, by its dotted key (``topology.nic_bandwidth``, ``price_per_hour``,
    ...).

:func:`cluster_from_instance` makes the :class:`~sgdnet.workload.Cluster` of ``nodes``
instances; :func:`read_cluster_file` reads a user's cluster file with its own
``price_per_hour`` (which overrides the catalog's when both are given).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ClusterError, UnknownNameError

__all__ = ["Instance", "CATALOG_DIR", "instance_names", "get_instance", "load_instance_file",
           "cluster_from_instance", "read_cluster_file", "resolve_instance", "instance_profile",
           "pricing_inputs", "EXTRA_KEYS"]

#: Where the catalog's files are (package data).
CATALOG_DIR = Path(__file__).resolve().parent.parent / "catalog"
#: Top-level keys a cluster file may carry beside :mod:`.cluster_file`'s schema.
EXTRA_KEYS = ("price_per_hour", "instance", "sources")
_INSTANCE_KEYS = ("provider", "device", "transport", "network", "price")


@dataclass(frozen=True)
class Instance:
    """One instance type of the catalog (or a user's priced cluster file).

    Attributes
    ----------
    name : str
    cluster_file : ClusterFile
        The cluster part (link, topology).
    price_per_hour : float or None
        USD per instance-hour (on-demand); None when unknown.
    provider, device, transport, network : str or None
    price : dict
        Currency, region, kind, the date it was read and its URL.
    sources : dict
        The source of each figure, by dotted key.
    path : Path or None
        The file it was read from.
    """

    name: str
    cluster_file: Any
    price_per_hour: float | None = None
    provider: str | None = None
    device: str | None = None
    transport: str | None = None
    network: str | None = None
    price: Mapping[str, Any] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)
    path: Path | None = None

    @property
    def gpus_per_node(self) -> int:
        """GPUs per instance (1 for a file without a topology: one worker per host)."""
        t = self.cluster_file.topology
        return 1 if t is None else int(t.gpus_per_node)

    def retime_warning(self, profile: Any) -> str:
        """Why ``profile`` is not re-timed for this instance's GPU, and what to do."""
        return (f"profile {profile.name!r} is for {profile.device!r}, not a built-in device, "
                f"so it is not re-timed for {self.name}'s {self.device}; pass --from-device "
                "GPU (from_device=), or a profile built for a stated device (sgdnet models: "
                "e.g. resnet152, bert_large)")

    def cluster(self, nodes: int = 1, **overrides: Any):
        """The :class:`~sgdnet.workload.Cluster` of ``nodes`` instances (``overrides``:
        Cluster fields applied last)."""
        from .cluster import Cluster

        if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
            raise ClusterError(f"nodes={nodes!r}: give a number of {self.name} instances >= 1")
        return Cluster(**self.cluster_file.cluster_kwargs(nodes * self.gpus_per_node,
                                                          **overrides))


def _price(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or \
            value == float("inf"):
        raise ClusterError(f"{where}: price_per_hour={value!r} must be a positive number of "
                           "dollars per instance-hour (e.g. 32.77), or left out when unknown")
    return float(value)


def _split(data: Any, source: str) -> tuple[dict, dict]:
    """``(cluster-file mapping, extra keys)`` of a parsed YAML file."""
    if not isinstance(data, Mapping):
        raise ClusterError(f"{source}: expected a mapping (a cluster file), got "
                           f"{type(data).__name__}")
    rest = {k: v for k, v in data.items() if k not in EXTRA_KEYS}
    extra = {k: data[k] for k in EXTRA_KEYS if k in data}
    inst = extra.get("instance") or {}
    if not isinstance(inst, Mapping):
        raise ClusterError(f"{source}: 'instance' must be a mapping with keys "
                           f"{list(_INSTANCE_KEYS)}")
    bad = sorted(str(k) for k in inst if k not in _INSTANCE_KEYS)
    if bad:
        raise ClusterError(f"{source}: instance: unknown key(s) {bad}; valid keys are "
                           f"{list(_INSTANCE_KEYS)}")
    src = extra.get("sources") or {}
    if not isinstance(src, Mapping) or not all(isinstance(v, str) for v in src.values()):
        raise ClusterError(f"{source}: 'sources' must map a figure's dotted key to its source text")
    return rest, extra


def _parse(path: Path) -> tuple[Any, dict]:
    from .._files import load_yaml
    from .cluster_file import ClusterFile

    # the one YAML loader (issue #43): a directory, a binary or UTF-16 file, deep nesting and
    # alias bombs are ClusterErrors before any walk over the document
    data = load_yaml(path, "cluster file", ClusterError)
    rest, extra = _split(data, str(path))
    return ClusterFile.from_dict(rest, source=str(path)), extra


def load_instance_file(path: str | Path) -> Instance:
    """An :class:`Instance` from a catalog-style file (a cluster file with the extra keys).

    Raises
    ------
    ClusterError
        Not YAML, not a cluster file, a bad price or instance section.
    OSError
        The file cannot be read.
    """
    from .compute import DEVICES
    from .transports import TRANSPORTS

    p = Path(path)
    cf, extra = _parse(p)
    inst = dict(extra.get("instance") or {})
    dev, tr = inst.get("device"), inst.get("transport")
    if dev is not None and dev not in DEVICES:
        raise ClusterError(f"{p}: instance.device={dev!r} is not a device of "
                           f"sgdnet.workload.compute.DEVICES ({', '.join(DEVICES)})")
    if tr is not None and tr not in TRANSPORTS:
        raise ClusterError(f"{p}: instance.transport={tr!r}: use one of {sorted(TRANSPORTS)}")
    return Instance(cf.name, cf, _price(extra.get("price_per_hour"), str(p)),
                    inst.get("provider"), dev, tr, inst.get("network"),
                    dict(inst.get("price") or {}), dict(extra.get("sources") or {}), p)


def _catalog_files() -> dict[str, Path]:
    return {p.stem: p for p in sorted(CATALOG_DIR.glob("*.yaml"))}


def instance_names() -> list[str]:
    """The catalog's instance types, sorted."""
    return sorted(_catalog_files())


def get_instance(name: str | Instance) -> Instance:
    """The catalog's instance ``name`` (case-insensitive), or an :class:`Instance` as given.

    Raises
    ------
    UnknownNameError
        Not in the catalog (the message lists the catalog and the closest names).
    """
    if isinstance(name, Instance):
        return name
    files = _catalog_files()
    by_lower = {k.lower(): k for k in files}
    key = by_lower.get(str(name).strip().lower())
    if key is None:
        close = difflib.get_close_matches(str(name), list(files), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownNameError(f"unknown instance {name!r}{hint} The catalog has "
                               f"{', '.join(sorted(files))} (or give a cluster file with "
                               "--cluster FILE)")
    return load_instance_file(files[key])


def cluster_from_instance(name: str | Instance, nodes: int = 1, **overrides: Any):
    """The :class:`~sgdnet.workload.Cluster` of ``nodes`` instances of the catalog's ``name``
    (``nodes x gpus_per_node`` workers, one per GPU), nominal rates: the instance's transport
    is applied at prediction (:func:`sgdnet.predict` with ``instance=``), not here.

    Examples
    --------
    >>> c = cluster_from_instance("p4d.24xlarge", 2)
    >>> c.workers, c.topology.nics_per_node
    (16, 4)
    """
    return get_instance(name).cluster(nodes, **overrides)


def read_cluster_file(path: str | Path) -> tuple[Any, float | None]:
    """``(ClusterFile, price_per_hour or None)`` of a user's cluster file, which may carry the
    catalog's extra keys (``price_per_hour``, ``instance``, ``sources``)."""
    p = Path(path)
    cf, extra = _parse(p)
    return cf, _price(extra.get("price_per_hour"), str(p))


#: Cluster fields of a given cluster that an instance's cluster keeps (noise and PS layout).
KEPT_FIELDS = ("compute_cv", "comm_cv", "straggler", "ps_shards", "ps_placement")


def resolve_instance(instance: Any, nodes: int | None, cluster: Any, transport: str | None,
                     framework: str | None) -> tuple[Any, str | None, float | None]:
    """``(cluster, transport, price_per_hour)`` of :func:`sgdnet.predict` with ``instance=``.

    The cluster is ``nodes`` (default 1) instances, keeping :data:`KEPT_FIELDS` of ``cluster``
    (a Cluster, a dict of its fields, or None); ``transport="auto"`` becomes the framework's
    own transport when it has one, else the instance's.

    Raises
    ------
    ClusterError
        ``nodes`` without an instance, or a bad count.
    UnknownNameError
        An instance not in the catalog.
    """
    if instance is None:
        raise ClusterError(f"nodes={nodes!r} needs instance= (an instance type of the catalog: "
                           f"{', '.join(instance_names())})")
    inst = get_instance(instance)
    keep: dict[str, Any] = {}
    if cluster is not None:
        from .cluster import Cluster

        clu = cluster if isinstance(cluster, Cluster) else Cluster.from_dict(dict(cluster))
        keep = {f: getattr(clu, f) for f in KEPT_FIELDS}
    out = inst.cluster(1 if nodes is None else nodes, **keep)
    if transport == "auto":
        own = None
        if framework is not None:
            from .frameworks import get_framework

            own = get_framework(framework).transport
        transport = own or inst.transport
    return out, transport, inst.price_per_hour


def instance_profile(instance: Any, profile: Any, from_device: Any = None) -> tuple[Any, bool]:
    """``(profile, retimed)``: ``profile`` re-timed for the instance's GPU
    (:func:`sgdnet.workload.compute.retime`) when its times are for a known device (or
    ``from_device`` says which), else as given with ``retimed=False`` (a PipeDream profile of
    an unspecified GPU cannot be moved to another GPU)."""
    from .compute import DEVICES, retime

    inst = get_instance(instance)
    if inst.device is None or (from_device is None and profile.device not in DEVICES):
        return profile, False
    if profile.device == inst.device and from_device is None:
        return profile, True
    return retime(profile, device=inst.device, from_device=from_device), True


def pricing_inputs(instance: str | None, nodes: Any, workers: Any, cluster_path: Any,
                   price_per_hour: float | None, samples: float | None, epochs: float | None,
                   dataset_size: float | None, transport: str | None, framework: str | None
                   ) -> tuple[Instance | None, Any, str | None, float | None, float | None]:
    """What the CLI's ``--instance/--nodes/--cluster/--price-per-hour/--samples/--epochs/
    --dataset-size`` mean: ``(instance, workers, transport, price, training samples)``.

    With an instance, ``workers`` becomes its GPUs (``nodes``: a list or one count; default
    1, 2, 4 where ``workers`` is a list, else 1) and ``transport="auto"`` the framework's own
    transport, else the instance's (None: unchanged). The price is ``price_per_hour``, else
    the cluster file's or the catalog's.
    """
    from .cost import training_samples

    if instance is None and nodes is not None:
        raise ClusterError("--nodes counts instances of --instance NAME; give --instance too "
                           "(or --workers for GPUs)")
    if instance is not None and cluster_path is not None:
        raise ClusterError("give --instance NAME or --cluster FILE, not both")
    inst, price = None, None
    if instance is not None:
        inst = get_instance(instance)
        many = isinstance(workers, list)
        n = nodes if nodes is not None else ([1, 2, 4] if many else 1)
        workers = ([k * inst.gpus_per_node for k in n] if isinstance(n, list)
                   else n * inst.gpus_per_node)
        price = inst.price_per_hour
        if transport == "auto":
            own = None
            if framework is not None:
                from .frameworks import get_framework

                own = get_framework(framework).transport
            transport = own or inst.transport or "auto"
        else:
            transport = None
    else:
        transport = None
        if cluster_path is not None:
            price = read_cluster_file(cluster_path)[1]
    if price_per_hour is not None:
        price = price_per_hour
    return inst, workers, transport, price, training_samples(samples, epochs, dataset_size)
