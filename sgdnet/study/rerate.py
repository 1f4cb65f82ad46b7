"""Build once, re-rate: a study's rows that differ only in the link bandwidth share one net.

With the default network model (flows), a variant's fine net does not depend on the cluster's
``bandwidth`` except through the bandwidth of its flow resources (the NICs' links, the compiled
``r_bw``): transfers carry their bytes as work, and the arcs, durations, priorities and tags are
the same at every bandwidth. So the first row of a group (same variant, model, granularity,
options and cluster but for ``bandwidth``) builds and compiles its net, and the others copy the
compiled arrays with ``r_bw`` moved to their bandwidth — no Python build, no compile. The result
is the :func:`sgdnet.predict` result of that row, bit for bit (``tests/test_study_rerate.py``
compares every compiled array and the predictions of every variant).

Only cases whose invariance is checked there are re-rated: fine nets of the variants in
:data:`VERIFIED`, without variant options, with a model given by name, on a cluster whose links
all run at ``bandwidth`` (no ``uplink``, ``downlink``, ``ps_bandwidth`` or ``topology``); and only
when every flow resource of the first net runs at that bandwidth. Anything else runs
:func:`sgdnet.predict` as usual.
"""

from __future__ import annotations

import copy
import hashlib
from collections import OrderedDict
from typing import Any

import numpy as np

__all__ = ["VERIFIED", "predict"]

#: variants whose fine nets depend on ``cluster.bandwidth`` only through ``r_bw`` (checked by
#: tests/test_study_rerate.py over worker counts and bandwidths)
VERIFIED = frozenset({"sync-ps", "async-ps", "ssp", "dssp", "backup", "allreduce", "cocod",
                      "local-sgd", "pipe-sgd"})
#: keyword arguments of :func:`sgdnet.predict` that are not variant options
_RUN_KEYS = frozenset({"granularity", "steps", "warmup", "replications", "seed", "parallel",
                       "trace", "samples", "progress"})
_CACHE_SIZE = 4  # templates kept per process (a 32-worker fine net is a few MB of arrays)
_TEMPLATES: OrderedDict[tuple, tuple[Any, dict, float]] = OrderedDict()


def _group(variant: Any, model: Any, cluster: Any, kwargs: dict) -> tuple | None:
    """The key of the rows that may share a net with this one, or None (not re-ratable)."""
    from ..variants import get

    if not isinstance(variant, str) or not isinstance(model, str):
        return None
    if any(k not in _RUN_KEYS for k in kwargs) or kwargs.get("granularity", "fine") != "fine":
        return None
    if (cluster.uplink, cluster.downlink, cluster.ps_bandwidth, cluster.topology) != (None,) * 4:
        return None
    try:
        name = get(variant).name
    except Exception:  # an unknown variant: predict reports it
        return None
    if name not in VERIFIED:
        return None
    return (name, model, repr(cluster.replace(bandwidth=1.0)))


def rerated(cn: Any, old_bw: float, new_bw: float) -> Any | None:
    """A copy of the compiled net ``cn`` with its flow resources moved from ``old_bw`` to
    ``new_bw`` bytes/s, or None when some flow resource runs at another bandwidth or has a
    token bucket."""
    flow = np.asarray(cn.r_bw) > 0
    if not np.all(cn.r_bw[flow] == old_bw):
        return None
    if np.any(cn.r_tb[:, 0] > 0):  # a token bucket's peak was set from the old bandwidth
        return None
    out = copy.copy(cn)
    for attr in ("_fastpath", "_fastfifo"):  # the fast paths' analyses, cached on the net:
        got = out.__dict__.get(attr)  # a refusal holds at every rate (both refuse flow
        if got is not None and got[0] is not None:  # resources); a plan is made afresh
            del out.__dict__[attr]
    out.r_bw = np.where(flow, new_bw, cn.r_bw)
    out.r_bw.flags.writeable = cn.r_bw.flags.writeable  # the kernel's signature (and cache entry)
    out.key = hashlib.sha1(f"{cn.key}|r_bw={new_bw!r}".encode()).hexdigest()
    return out


def predict(variant: Any, model: Any, cluster: Any, **kwargs: Any) -> Any:
    """:func:`sgdnet.predict`, re-rating a net of an earlier call when only the bandwidth differs
    (see the module docstring); the same Prediction either way."""
    from ..net.compiled import compile_net
    from ..prediction import predict as plain
    from ..prediction import predict_net
    from ..variants import get
    from ..variants.inputs import resolve_cluster

    cluster = resolve_cluster(cluster)
    key = _group(variant, model, cluster, kwargs)
    if key is None:
        return plain(variant, model, cluster, **kwargs)
    bw = float(cluster.up_bw(0))
    hit = _TEMPLATES.get(key)
    if hit is not None:
        cn = rerated(hit[0], hit[2], bw)
        if cn is not None:
            _TEMPLATES.move_to_end(key)
            return predict_net(variant, model, cluster, cn, meta={**hit[1], "cluster": cluster},
                               **kwargs)
    net = get(variant).build(model, cluster, kwargs.get("granularity", "fine"))
    # not shared by structure: a template is built once per group (hashing it cost ~8% of the
    # fine sweep's CPU), and predict_net below finds this very net's compiled form again
    _TEMPLATES[key] = (compile_net(net, share=False), dict(net.meta), bw)
    while len(_TEMPLATES) > _CACHE_SIZE:
        _TEMPLATES.popitem(last=False)
    return predict_net(variant, model, cluster, net, **kwargs)
